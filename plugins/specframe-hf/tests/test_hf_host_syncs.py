"""Host synchronisations per round of an hf-target pipeline: the loop reads the device a bounded number of times."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from specframe_hf.target import HFTarget

from specframe.device_sync import HostSyncCounter
from specframe.pipeline import Pipeline

STAGES = {"corrector": {"type": "identity"}, "tree_builder": {"type": "chain"}, "pruner": {"type": "none"},
          "verifier": {"type": "auto"}, "budget": 4, "sampling": {"temperature": 0.0}}


@pytest.mark.parametrize(("drafter", "per_round"), [
    ({"type": "none"}, 3),  # the tree depth (sizes the accepted path), commit's path check, the round's outcome
    ({"type": "ngram", "num_speculative_tokens": 4}, 6),  # + the n-gram lookup over the committed ids on the host
])
def test_syncs_per_round_are_bounded(tiny_model: Callable[..., Any], drafter: dict[str, Any], per_round: int) -> None:
    target = HFTarget(tiny_model("llama"), None)
    pipe = Pipeline.from_dict({**STAGES, "drafter": drafter}, target=target)
    prompt = list(range(3, 20))
    with HostSyncCounter() as counter:
        result = pipe.generate(prompt, 11)
    assert result.num_rounds > 3
    # Prefill: the cache length and the first token (3 reads), then at most `per_round` per round.
    assert counter.total <= 3 + per_round * result.num_rounds, counter.by_op
