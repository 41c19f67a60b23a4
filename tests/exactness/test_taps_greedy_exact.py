"""Greedy exactness of the `taps` pruner end to end: pipelines with it reproduce ``model.generate`` token for token.

The harness of :mod:`tests.exactness.test_greedy_exact_hf` (tiny random Llama and Qwen3 models in fp32, the
oracle and miss drafters): the builders over-expand past the pipeline's budget of 10 (a heap of 24 nodes, DARTree
pruned at width 3, JetSpec's accum_logp fan-out) and `taps` cuts each tree to 10, with its default discount and a
steep one (which moves most nodes below a sibling out of the tree).
"""

from __future__ import annotations

from typing import Any

import pytest
from specframe_hf.testing import random_ids

from specframe import PluginHost
from tests.exactness.test_greedy_exact_hf import MODELS, Reference, exact_host, make_test_plugin, run

BUDGET = 10  # the harness's pipeline budget
BUILDERS = [
    {"type": "heap", "budget": 24},
    {"type": "dartree", "mode": "pruned", "width": 3},
    {"type": "accum_logp", "candidates": 3, "budget": 24},
]
PRUNERS = [{"type": "taps"}, {"type": "taps", "sibling_discount": 0.01}]


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return exact_host(make_test_plugin(), "taps_greedy_exact_test_drafters")


@pytest.fixture(scope="module")
def references() -> dict[tuple[str, str], Reference]:
    return {key: Reference(*key) for key in MODELS}


@pytest.mark.parametrize("pruner", PRUNERS, ids=lambda p: "-".join(str(v) for v in p.values()))
@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: str(b["type"]))
@pytest.mark.parametrize("model_key", MODELS, ids=lambda m: f"{m[0]}-{m[1]}")
def test_taps_pipelines_equal_generate(host: PluginHost, references: dict[tuple[str, str], Reference],
                                       model_key: tuple[str, str], builder: dict[str, Any],
                                       pruner: dict[str, Any]) -> None:
    ref = references[model_key]
    full = run(host, ref, {"type": "oracle"}, builder, pruner, random_ids(9, seed=1), 17)
    assert any(r.depth >= 2 and r.accepted == r.depth for r in full.rounds)
    assert all(r.nodes <= BUDGET for r in full.rounds) and any(r.nodes == BUDGET for r in full.rounds)
    noisy = {"type": "oracle", "num_candidates": 3, "rank_noise": 0.5, "miss_rate": 0.2}
    run(host, ref, noisy, builder, pruner, random_ids(14, seed=2), 23)
    miss = run(host, ref, {"type": "miss"}, builder, pruner, random_ids(5, seed=3), 6)
    assert all(r.accepted == 0 for r in miss.rounds) and any(r.nodes > 0 for r in miss.rounds)
