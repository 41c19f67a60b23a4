"""`freeze_auto_budget` really freezes: a batched run changes neither the cost model nor the draft cost.

Made to fail once by freezing as the helper did before (``auto.profile.smoothing = 0.0``): the batch of 2 rows then
added a batch curve to the profile (its forward, beyond the one-row curve, became points of their own).
"""

from __future__ import annotations

import pytest
from specframe_hf.target import HFTarget
from specframe_hf.testing import tiny_causal_lm

from specframe.pipeline import Pipeline
from specframe.testing.frozen_budget import freeze_auto_budget


def test_a_frozen_controller_learns_no_cost_from_a_batched_run(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    target = HFTarget.from_model(tiny_causal_lm("llama", seed=0))
    data = {"budget": "auto", "auto_budget": {"max_budget": 4}, "drafter": {"type": "ngram"},
            "tree_builder": {"type": "chain"}, "pruner": {"type": "none"},
            "generation": {"chat_template": False, "stop_at_eos": False}}
    pipe = Pipeline.from_dict(data, target=target)
    auto = freeze_auto_budget(pipe, {1: 5.0, 3: 6.0}, draft_ms=(2.0, 1.0))
    before = (auto.profile.to_json(), auto.draft_cost.split())
    results = pipe.generate_batch([[5, 6, 7, 5, 6, 7, 5, 6], [1, 2, 3, 1, 2, 3, 1]], 12, batch_size=2)
    assert all(len(r.tokens) == 12 for r in results)
    assert any(r.drafted for res in results for r in res.rounds)
    assert (auto.profile.to_json(), auto.draft_cost.split()) == before
