"""At temperature > 0 every WALK pipeline emits, token for token, what plain decoding emits for the same seed.

The target's samples are keyed by (request seed, absolute position) (:mod:`specframe.sampling.noise`), and WALK
emits at each position the target's own sample given the emitted prefix, so the drafter, the tree builder, the
pruner, the budget (fixed or ``auto``), the batch size and the batch-mates cannot change the output. The oracle
drafter proposes the sampled future (with noise), so rounds accept several tokens, partially or not at all.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from specframe_hf.testing import random_ids
from specframe_verifiers import WalkVerifier

from specframe.decode.request import Request
from specframe.pipeline import Pipeline
from specframe.testing.frozen_budget import freeze_auto_budget
from specframe.tree import DraftTree
from tests.exactness.test_auto_budget_exact import STEEP
from tests.exactness.test_batch_greedy_hf import RowOracle, make_plugin
from tests.exactness.test_greedy_exact_hf import BASE, BUILDERS, PRUNERS, Reference, exact_host, fit_builder

SAMPLINGS = {"T0.7": {"temperature": 0.7}, "T0.7-k8-p0.9": {"temperature": 0.7, "top_k": 8, "top_p": 0.9}}
#: (prompt length, prompt seed, new tokens, seed, oracle noise)
REQUESTS = [(9, 1, 15, 11, 0.0), (4, 2, 7, 12, 0.5), (12, 3, 19, 13, 0.3), (6, 4, 10, 14, 1.0)]
#: Batch-mates of the first request in the other batch (other prompts, seeds and limits).
MATES = [(5, 7, 9, 21, 0.2), (13, 8, 12, 22, 0.0), (3, 9, 14, 23, 0.6)]


@pytest.fixture(scope="module")
def host():  # type: ignore[no-untyped-def]
    return exact_host(make_plugin(), "batch_exact_drafters")


@pytest.fixture(scope="module")
def ref() -> Reference:
    return Reference("qwen3", "sdpa")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))


def plain_tokens(ref: Reference, host: Any, sampling: dict[str, Any], requests: list[tuple]) -> list[list[int]]:
    """Plain decoding's sampled tokens per request (its own seed), one request at a time."""
    plain = Pipeline.from_dict({**BASE, "sampling": sampling, "drafter": {"type": "none"},
                                "tree_builder": {"type": "chain"}}, target=ref.target, host=host)
    out = []
    for length, prompt_seed, n, seed, _ in requests:
        prompt = torch.tensor([random_ids(length, seed=prompt_seed)])
        out.append(plain.generate(prompt, n, seed=seed).tokens)
    return out


def walk_pipeline(ref: Reference, host: Any, sampling: dict[str, Any], builder: dict[str, Any],
                  pruner: dict[str, Any], auto: bool) -> Pipeline:
    data = {**BASE, "sampling": sampling, "drafter": {"type": "oracle", "num_candidates": 3},
            "tree_builder": fit_builder(builder, pruner), "pruner": pruner, "corrector": {"type": "identity"},
            "verifier": {"type": "walk"}}
    if auto:
        data.update(budget="auto", auto_budget={"max_budget": 10})
    pipe = Pipeline.from_dict(data, target=ref.target, host=host)
    if auto:  # a steep frozen curve, so the controller trims trees and stops drafting where it does not pay
        freeze_auto_budget(pipe, STEEP)
    return pipe


def decode(pipe: Pipeline, requests: list[tuple], expected: list[list[int]], batch_size: int) -> list[Any]:
    batch = []
    for (length, prompt_seed, n, seed, noise), want in zip(requests, expected, strict=True):
        prompt = random_ids(length, seed=prompt_seed)
        RowOracle.futures[tuple(prompt)] = (prompt + want + [0] * 16, noise)  # the oracle knows the sampled future
        batch.append(Request(torch.tensor([prompt]), max_new_tokens=n, seed=seed))
    return pipe.generate_batch(batch, batch_size=batch_size)


@pytest.mark.parametrize("auto", [False, True], ids=["fixed", "auto"])
@pytest.mark.parametrize("sampling", list(SAMPLINGS))
@pytest.mark.parametrize("pruner", PRUNERS, ids=lambda p: p["type"])
@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: "-".join(str(v) for v in b.values()))
def test_walk_emits_plain_decodings_tokens(host, ref, builder, pruner, sampling, auto):
    params = SAMPLINGS[sampling]
    expected = plain_tokens(ref, host, params, REQUESTS)
    pipe = walk_pipeline(ref, host, params, builder, pruner, auto)
    alone = [decode(pipe, [req], [want], 1)[0] for req, want in zip(REQUESTS, expected, strict=True)]
    assert [r.tokens for r in alone] == expected
    batched = decode(pipe, REQUESTS, expected, 4)
    assert [r.tokens for r in batched] == expected
    mates_expected = plain_tokens(ref, host, params, MATES)
    with_mates = decode(pipe, [REQUESTS[0], *MATES], [expected[0], *mates_expected], 4)
    assert [r.tokens for r in with_mates] == [expected[0], *mates_expected]
    rounds = [r for res in alone + batched for r in res.rounds]
    assert any(r.accepted >= 2 for r in rounds)  # drafts were accepted, so trees mattered
    if auto:
        assert any(r.budget is not None for r in rounds)


@pytest.mark.parametrize("sampling", list(SAMPLINGS))
def test_walk_on_sampled_trees_emits_plain_decodings_tokens(host, ref, sampling):
    params = SAMPLINGS[sampling]
    expected = plain_tokens(ref, host, params, REQUESTS)
    for auto in (False, True):
        pipe = walk_pipeline(ref, host, params, {"type": "sampled_tree", "branching": [3, 2, 1]}, {"type": "none"},
                             auto)
        results = decode(pipe, REQUESTS, expected, 1) + decode(pipe, REQUESTS, expected, 4)
        assert [r.tokens for r in results] == expected + expected
        assert any(r.accepted >= 2 for res in results for r in res.rounds)  # sampled drafts were accepted


class BlindWalk(WalkVerifier):
    """Negative control: follows the first child whatever the target sampled (accepts every drafted path)."""

    def matches(self, tree: DraftTree, y: torch.Tensor) -> torch.Tensor:  # [B, N] bool
        return tree.valid & (tree.sibling_rank() == 0)  # the first child, whatever the target drew


def test_a_wrong_future_is_corrected_and_a_blind_walk_would_emit_it(host, ref):
    """The equality checks can fail: the oracle proposes another seed's sampled tokens, noise-free. The walk
    emits plain decoding's tokens all the same; a walk that follows the drafts blindly emits the wrong future."""
    params = SAMPLINGS["T0.7"]
    length, prompt_seed, n, seed, _ = REQUESTS[0]
    want = plain_tokens(ref, host, params, [REQUESTS[0]])[0]
    wrong = plain_tokens(ref, host, params, [(length, prompt_seed, n, seed + 1000, 0.0)])[0]
    assert want != wrong
    pipe = walk_pipeline(ref, host, params, {"type": "chain"}, {"type": "none"}, auto=False)
    request = (length, prompt_seed, n, seed, 0.0)
    assert decode(pipe, [request], [wrong], 1)[0].tokens == want
    pipe.stages.verifier = BlindWalk()
    assert decode(pipe, [request], [wrong], 1)[0].tokens != want


def test_another_seed_gives_other_tokens(host, ref):
    """The equality is not vacuous: the sampled tokens depend on the seed."""
    first = plain_tokens(ref, host, SAMPLINGS["T0.7"], REQUESTS[:1])
    other = plain_tokens(ref, host, SAMPLINGS["T0.7"], [(9, 1, 15, 99, 0.0)])
    assert first != other
