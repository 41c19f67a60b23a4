"""`freeze_auto_budget`: a `budget: auto` controller that decides from a synthetic cost model, for tests.

The controller decides from this machine's measured cost model and keeps refining it. A test that needs the same
decisions on every machine saves a synthetic curve as the profile of the pipeline's target (in the
``$SPECFRAME_CACHE`` the test points at a temporary directory), builds the controller from it and freezes it
(`AutoBudget.freeze`: no timed round changes the cost model, its overheads, a batch curve or the draft cost); with
:class:`specframe.testing.clock.TickClock` for the stage times nothing measured is left.

Example::

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    monkeypatch.setattr(specframe.decode.loop, "StageClock", TickClock)
    auto = freeze_auto_budget(pipe, {1: 45.0, 2: 60.0, 5: 75.0, 9: 99.0, 17: 106.0})
"""

from __future__ import annotations

from typing import Any

import torch

from specframe.cost.measure import profile_path, save_profile
from specframe.cost.profile import CostProfile
from specframe.cost.setup import target_profile_key


def freeze_auto_budget(pipe: Any, verify_ms: dict[int, float], prompt: list[int] | None = None, *,
                       batch_ms: dict[int, dict[int, float]] | None = None,
                       draft_ms: tuple[float, float] | None = None) -> Any:
    """Build ``pipe``'s `budget: auto` controller on the cost model ``verify_ms`` (``C(1, n)``, ms by tokens per
    forward) and ``batch_ms`` (``C(B, n)`` for batches), frozen; ``draft_ms`` = ``(fixed, per_row)``: a draft cost
    given instead of learnt (None: the draft cost stays 0 ms, frozen).

    ``prompt`` is what the controller is prepared with (any short prompt: nothing is measured). Returns the
    controller (``pipe.auto_budget``).
    """
    key = target_profile_key(pipe.target, pipe.config)
    save_profile(CostProfile(key=key, verify_ms=verify_ms, batch_ms=batch_ms or {}), profile_path(key))
    auto = pipe.prepare_auto_budget(torch.tensor([prompt or [1, 2, 3]]))
    if draft_ms is not None:
        auto.draft_cost.observe(1, draft_ms[0] + draft_ms[1])
        auto.draft_cost.observe(2, draft_ms[0] + 2 * draft_ms[1])
    auto.freeze()
    return auto
