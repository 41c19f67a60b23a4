"""`freeze_auto_budget`: a `budget: auto` controller that decides from a synthetic verify curve, for tests.

The controller decides from this machine's measured verify curve and keeps refining it. A test that needs the
same decisions on every machine saves a synthetic curve as the profile of the pipeline's target (in the
``$SPECFRAME_CACHE`` the test points at a temporary directory), builds the controller from it and stops the
refinement; with :class:`specframe.testing.clock.TickClock` for the stage times nothing measured is left.

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


def freeze_auto_budget(pipe: Any, verify_ms: dict[int, float], prompt: list[int] | None = None) -> Any:
    """Build ``pipe``'s `budget: auto` controller on the curve ``verify_ms`` (ms by tokens per forward), frozen.

    ``prompt`` is what the controller is prepared with (any short prompt: nothing is measured). Returns the
    controller (``pipe.auto_budget``).
    """
    key = target_profile_key(pipe.target, pipe.config)
    save_profile(CostProfile(key=key, verify_ms=verify_ms), profile_path(key))
    auto = pipe.prepare_auto_budget(torch.tensor([prompt or [1, 2, 3]]))
    auto.profile.smoothing = 0.0  # frozen: decisions come from the curve, not this machine
    return auto


def without_batch_policy(monkeypatch: Any) -> None:
    """Let every row the controller wants drafted draft: probes whatever their hope (`AutoBudget.can_pay`) and no
    hold of the measured-rate guard (`RoundRates.allows_drafting`), for tests of what drafting rows do, not of
    which rows draft (``tests/cost/test_probe_in_batch.py`` and ``test_round_rates.py`` test that policy)."""
    from specframe.cost.auto_budget import AutoBudget
    from specframe.cost.round_rates import RoundRates

    monkeypatch.setattr(AutoBudget, "can_pay", lambda self, row, rows, **prices: True)
    monkeypatch.setattr(RoundRates, "allows_drafting", lambda self, rows, **_: True)
