"""Greedy exactness with `budget: auto` for every builder x pruner x verifier, against ``model.generate``.

`budget: auto` only ever verifies a subtree of the pruned tree, or the root alone; the output must not change.
The controller is built with a frozen steep cost curve (no online learning) and the request seed is pinned (the test
drafters draw their noise from it), so every run decides the same: rounds are trimmed to varying sizes and drafting
stops when a drafter is never accepted; the test checks that both happened (after the first round, which verifies the
full budget: before it nothing is known about the drafter).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from specframe_hf.testing import random_ids

from specframe.pipeline import Pipeline
from specframe.testing.frozen_budget import freeze_auto_budget

from .test_greedy_exact_hf import BASE, BUILDERS, PRUNERS, MissDrafter, OracleDrafter, fit_builder

STEEP = {1: 45.0, 2: 60.0, 3: 66.0, 5: 75.0, 9: 99.0, 17: 106.0, 33: 141.0}
VERIFIERS = [{"type": "auto"}, {"type": "walk"}]
SAMPLED = [({"type": "sampled_chain"}, {"type": "chain_rejection"}),
           ({"type": "sampled_tree", "branching": [3, 2, 1]}, {"type": "tree_rejection"}),
           ({"type": "sampled_tree", "branching": [3, 2, 1]}, {"type": "walk"})]


@pytest.fixture(scope="module")
def host():
    from .test_greedy_exact_hf import exact_host, make_test_plugin

    return exact_host(make_test_plugin(), "greedy_exact_test_drafters")


@pytest.fixture(scope="module")
def ref():
    from .test_greedy_exact_hf import Reference

    return Reference("qwen3", "sdpa")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))


def run_auto(host, ref, drafter: dict[str, Any], builder: dict[str, Any], pruner: dict[str, Any],
             verifier: dict[str, Any], prompt: list[int], n: int, seed: int = 0) -> Any:
    data = {**BASE, "budget": "auto", "auto_budget": {"max_budget": 10}, "seed": seed,
            "drafter": drafter, "tree_builder": fit_builder(builder, pruner), "pruner": pruner,
            "verifier": verifier, "corrector": {"type": "identity"}}
    pipe = Pipeline.from_dict(data, target=ref.target, host=host)
    freeze_auto_budget(pipe, STEEP, prompt)
    stage = pipe.stages.drafter
    if isinstance(stage, (OracleDrafter, MissDrafter)):
        stage.future = prompt + ref.generate(prompt, n + 16)
    result = pipe.generate(torch.tensor([prompt]), max_new_tokens=n)
    assert result.tokens == ref.generate(prompt, n), (drafter, builder, pruner, verifier)
    return result


@pytest.mark.parametrize("verifier", VERIFIERS, ids=lambda v: v["type"])
@pytest.mark.parametrize("pruner", PRUNERS, ids=lambda p: p["type"])
@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: "-".join(str(v) for v in b.values()))
def test_auto_budget_is_greedy_exact(host, ref, builder, pruner, verifier):
    noisy = {"type": "oracle", "num_candidates": 3, "rank_noise": 0.5, "miss_rate": 0.2}
    good = run_auto(host, ref, noisy, builder, pruner, verifier, random_ids(14, seed=2), 23)
    miss = run_auto(host, ref, {"type": "miss"}, builder, pruner, verifier, random_ids(5, seed=3), 24)
    assert any(not r.drafted for r in miss.rounds)  # drafting stopped paying: plain rounds
    assert {r.plain_reason for r in miss.rounds if not r.drafted} <= {"no_gain", "explore_declined"}  # and why
    assert all(r.plain_reason is None for r in good.rounds if r.nodes > 0)
    assert all(r.budget is not None for r in good.rounds if r.drafted)


@pytest.mark.parametrize(("builder", "verifier"), SAMPLED, ids=lambda x: x["type"])
def test_auto_budget_with_sampled_builders_is_greedy_exact_at_temperature_zero(host, ref, builder, verifier):
    noisy = {"type": "oracle", "num_candidates": 3, "rank_noise": 0.5, "miss_rate": 0.2}
    run_auto(host, ref, noisy, builder, {"type": "none"}, verifier, random_ids(14, seed=2), 23)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_rounds_are_trimmed_below_the_pruned_size(host, ref, seed):
    noisy = {"type": "oracle", "num_candidates": 3, "rank_noise": 0.5, "miss_rate": 0.2}
    result = run_auto(host, ref, noisy, {"type": "heap"}, {"type": "none"}, {"type": "auto"},
                      random_ids(14, seed=2), 30, seed)
    sizes = [r.nodes for r in result.rounds[1:] if r.drafted]  # the first round drafts in full: nothing is known yet
    # The steep curve (C(1, n) rises 45 -> 99 ms from 1 to 9 tokens) makes the full budget of 10 pay only after a
    # run of well-accepted rounds; on the noisy drafter most rounds are trimmed, to sizes that follow the outlook.
    assert sizes and sum(k < 10 for k in sizes) > len(sizes) / 2, sizes
    assert len(set(sizes)) > 1, sizes
