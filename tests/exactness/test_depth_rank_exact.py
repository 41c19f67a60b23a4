"""JetSpec's depth_rank_histogram pruner keeps every pipeline lossless on Hugging Face targets (fp32).

Greedy: the pipeline's tokens equal ``model.generate`` (the harness of :mod:`tests.exactness.test_greedy_exact_hf`:
an oracle drafter with and without rank noise, a drafter that always misses). Sampling: WALK over the pruned trees
emits plain decoding's tokens for the same seeds, alone, batched and with batch-mates (the harness of
:mod:`tests.exactness.test_sampled_equals_plain`). Both rules run: JetSpec's fan-out cap (the default; two
ranks at depth 1, chains below) and the path product, whose profile prefers first-level siblings to the drafter's
chain, so it keeps trees that no path-score pruner would; over-expanded builders (24 nodes) are cut to 10.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from specframe_hf.testing import random_ids

from specframe import PluginHost
from specframe.metrics.depth_rank import DepthRankCounts, dumps
from tests.exactness import test_sampled_equals_plain as sampled
from tests.exactness.test_greedy_exact_hf import MODELS, Reference, exact_host, make_test_plugin, run

BUILDERS = [{"type": "heap", "budget": 24}, {"type": "dartree", "mode": "pruned", "width": 4},
            {"type": "accum_logp", "budget": 24}]


#: Both rules; the fan-out cap's tau keeps ranks 0-1 at depth 1 and rank 0 below (caps [2, 1, 1]).
RULES: list[dict[str, Any]] = [{"rule": "fanout_cap", "tau": 0.3}, {"rule": "path_product"}]


@pytest.fixture(scope="module", params=RULES, ids=[r["rule"] for r in RULES])
def pruner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = Path(tmp_path_factory.mktemp("profile")) / "profile.json"
    path.write_text(dumps(DepthRankCounts(trials=[20, 12, 8], accepted=[[8, 9, 2], [7, 3], [5]])))
    return {"type": "depth_rank_histogram", "profile": str(path), **request.param}


@pytest.fixture(scope="module")
def greedy_host() -> PluginHost:
    return exact_host(make_test_plugin(), "exact_drafters")


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: b["type"] + "-" + str(b.get("mode", b.get("budget"))))
@pytest.mark.parametrize("model_key", MODELS, ids=lambda m: f"{m[0]}-{m[1]}")
def test_greedy_pipelines_with_the_pruner_equal_generate(greedy_host, pruner, model_key, builder):
    ref = Reference(*model_key)
    full = run(greedy_host, ref, {"type": "oracle"}, builder, pruner, random_ids(9, seed=1), 17)
    assert any(r.accepted >= 2 for r in full.rounds)  # several drafted tokens accepted in a round
    assert all(r.nodes <= 10 for r in full.rounds)  # cut to the pipeline's budget
    noisy = {"type": "oracle", "num_candidates": 3, "rank_noise": 0.5, "miss_rate": 0.2}
    result = run(greedy_host, ref, noisy, builder, pruner, random_ids(14, seed=2), 23)
    assert any(r.path_ranks and max(r.path_ranks) > 0 for r in result.rounds)  # a kept sibling was accepted
    miss = run(greedy_host, ref, {"type": "miss"}, builder, pruner, random_ids(5, seed=3), 6)
    assert all(r.accepted == 0 for r in miss.rounds) and any(r.nodes > 0 for r in miss.rounds)


host, ref, private_cache = sampled.host, sampled.ref, sampled.private_cache  # the WALK harness's fixtures


@pytest.mark.parametrize("auto", [False, True], ids=["fixed", "auto"])
@pytest.mark.parametrize("sampling", list(sampled.SAMPLINGS))
@pytest.mark.parametrize("builder", BUILDERS[:2], ids=lambda b: b["type"])
def test_walk_over_pruned_trees_emits_plain_decodings_tokens(host, ref, pruner, builder, sampling, auto):
    params = sampled.SAMPLINGS[sampling]
    if auto:  # `budget: auto` sizes the builder itself (a fixed builder budget is refused); the pruner cuts to it
        builder = {k: v for k, v in builder.items() if k != "budget"}
    expected = sampled.plain_tokens(ref, host, params, sampled.REQUESTS)
    pipe = sampled.walk_pipeline(ref, host, params, builder, pruner, auto)
    alone = [sampled.decode(pipe, [req], [want], 1)[0] for req, want in zip(sampled.REQUESTS, expected, strict=True)]
    assert [r.tokens for r in alone] == expected
    batched = sampled.decode(pipe, sampled.REQUESTS, expected, 4)
    assert [r.tokens for r in batched] == expected
    assert any(r.accepted >= 2 for res in alone + batched for r in res.rounds)  # drafts were accepted
