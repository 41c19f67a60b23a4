"""Batched greedy exactness on Hugging Face targets: every row equals ``model.generate`` and its lone decode.

Rows have prompts of different lengths, their own limits (so they end at different rounds) and, with a batch
smaller than the request list, requests join mid-run into freed rows. Each row's tree is its own: the oracle
drafter is right, noisy or missing per row, so rows verify trees of different sizes and accept different
numbers of nodes in the same forward.
"""

from __future__ import annotations

import types
from typing import Any, ClassVar

import pytest
import torch
from specframe_hf.testing import random_ids

from specframe import ComponentSpec, DecodeState, DraftProposal, PluginHost, hookimpl
from specframe.decode.request import RefusedRequest, Request
from specframe.errors import ConfigError
from specframe.pipeline import Pipeline
from specframe.testing.frozen_budget import freeze_auto_budget
from tests.exactness.test_greedy_exact_hf import (
    BASE,
    BUILDERS,
    PRUNERS,
    OracleConfig,
    OracleDrafter,
    Reference,
    exact_host,
    fit_builder,
)

#: (prompt length, prompt seed, new tokens, oracle noise): lengths, limits and acceptance differ per row.
REQUESTS = [(9, 1, 17, 0.0), (4, 2, 6, 0.5), (14, 3, 23, 0.3), (6, 4, 11, 1.0), (11, 5, 3, 0.0)]


class RowOracle(OracleDrafter):
    """The oracle of the single-request test, looking up each row's future by its prompt."""

    supports_batch = True
    futures: ClassVar[dict[tuple[int, ...], tuple[list[int], float]]] = {}

    def propose(self, state: DecodeState) -> DraftProposal:
        future, noise = self.futures[tuple(state.tokens[0, : state.prompt_len].tolist())]
        self.future = future
        self.cfg = self.cfg.model_copy(update={"rank_noise": noise / 2, "miss_rate": noise / 2})
        return super().propose(state)


class UndeclaredOracle(OracleDrafter):
    """A drafter that never declared batch support."""


def make_plugin() -> types.ModuleType:
    mod = types.ModuleType("batch_exact_drafters")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="oracle", config=OracleConfig, factory=lambda c, ctx: RowOracle(c))

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    return mod


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return exact_host(make_plugin(), "batch_exact_drafters")


@pytest.fixture(scope="module")
def ref() -> Reference:
    return Reference("llama", "sdpa")


def batch_run(host: PluginHost, ref: Reference, drafter: dict[str, Any], builder: dict[str, Any],
              pruner: dict[str, Any], batch_size: int,
              verifier: dict[str, Any] | None = None) -> tuple[Pipeline, list[Any], list[list[int]]]:
    data = {**BASE, "drafter": drafter, "tree_builder": fit_builder(builder, pruner), "pruner": pruner,
            "corrector": {"type": "identity"}, "verifier": verifier or {"type": "auto"}}
    pipe = Pipeline.from_dict(data, target=ref.target, host=host)
    prompts, expected = [], []
    for length, seed, n, noise in REQUESTS:
        prompt = random_ids(length, seed=seed)
        RowOracle.futures[tuple(prompt)] = (prompt + ref.generate(prompt, n + 16), noise)
        prompts.append(Request(torch.tensor([prompt]), max_new_tokens=n))
        expected.append(ref.generate(prompt, n))
    return pipe, pipe.generate_batch(prompts, batch_size=batch_size), expected


@pytest.mark.parametrize("verifier", [{"type": "auto"}, {"type": "walk"}], ids=lambda v: v["type"])
@pytest.mark.parametrize("pruner", PRUNERS, ids=lambda p: p["type"])
@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: "-".join(str(v) for v in b.values()))
def test_every_row_equals_generate_and_its_lone_decode(host, ref, builder, pruner, verifier):
    pipe, results, expected = batch_run(host, ref, {"type": "oracle"}, builder, pruner, 3, verifier)
    for (length, seed, n, _), result, want in zip(REQUESTS, results, expected, strict=True):
        assert result.tokens == want, f"row of prompt length {length}: {result.tokens} != generate {want}"
        alone = pipe.generate(torch.tensor([random_ids(length, seed=seed)]), max_new_tokens=n)
        assert alone.tokens == result.tokens
        assert result.batch_size == 3
    # Rows verified trees of different sizes in one forward and ended at different rounds.
    assert len({len(r.rounds) for r in results}) > 1
    assert any(r.accepted > 0 for res in results for r in res.rounds)


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_ngram_and_plain_batches_equal_generate(host, ref, batch_size):
    for drafter in ({"type": "ngram", "num_speculative_tokens": 6}, {"type": "none"}):
        _, results, expected = batch_run(host, ref, drafter, {"type": "chain"}, {"type": "none"}, batch_size)
        assert [r.tokens for r in results] == expected


def test_a_too_long_prompt_is_refused_alone(host, ref):
    pipe = Pipeline.from_dict({**BASE, "drafter": {"type": "none"}, "tree_builder": {"type": "chain"}},
                              target=ref.target, host=host)
    limit = ref.target.max_length
    long_prompt = torch.tensor([random_ids(limit + 3, seed=9)])
    short = random_ids(5, seed=8)
    bad_ids = torch.tensor([[3, 10_000, 4]])
    results = pipe.generate_batch([torch.tensor([short]), long_prompt, bad_ids], 4, batch_size=2)
    assert results[0].tokens == ref.generate(short, 4)
    assert isinstance(results[1], RefusedRequest) and results[1].index == 1
    assert "request 1" in str(results[1]) and str(limit) in str(results[1])
    assert isinstance(results[2], RefusedRequest) and "request 2" in str(results[2]) and "10000" in str(results[2])


def test_a_drafter_without_batch_support_is_refused_by_name(ref):
    host = PluginHost(autoload=True, allowlist=["hf", "trees", "verifiers"], disabled=(), trace=False)
    mod = types.ModuleType("undeclared_drafter")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="oracle", config=OracleConfig,
                            factory=lambda c, ctx: UndeclaredOracle(c))

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    host.register(mod, "undeclared_drafter")
    pipe = Pipeline.from_dict({**BASE, "drafter": {"type": "oracle"}, "tree_builder": {"type": "chain"}},
                              target=ref.target, host=host)
    with pytest.raises(ConfigError, match=r"drafter 'oracle' .*does not declare batch support"):
        pipe.generate_batch([[1, 2, 3], [4, 5]], 3, batch_size=2)
    assert len(pipe.generate_batch([[1, 2, 3]], 3, batch_size=1)) == 1  # batch size 1 needs no declaration


# ----------------------------------------------------------------------------------- budget: auto
AUTO_VERIFIERS = [{"type": "auto"}, {"type": "walk"}]
SAMPLED = [({"type": "sampled_chain"}, {"type": "chain_rejection"}),
           ({"type": "sampled_tree", "branching": [3, 2, 1]}, {"type": "tree_rejection"})]


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))


def auto_batch(host: PluginHost, ref: Reference, builder: dict[str, Any], pruner: dict[str, Any],
               verifier: dict[str, Any]) -> list[Any]:
    """A batch under `budget: auto` with a frozen steep cost curve; every row checked against generate()."""
    from tests.exactness.test_auto_budget_exact import STEEP

    data = {**BASE, "budget": "auto", "auto_budget": {"max_budget": 10},
            "drafter": {"type": "oracle"}, "tree_builder": fit_builder(builder, pruner), "pruner": pruner,
            "verifier": verifier, "corrector": {"type": "identity"}}
    pipe = Pipeline.from_dict(data, target=ref.target, host=host)
    freeze_auto_budget(pipe, STEEP)
    requests, expected = [], []
    for length, seed, n, noise in REQUESTS:
        prompt = random_ids(length, seed=seed)
        RowOracle.futures[tuple(prompt)] = (prompt + ref.generate(prompt, n + 16), noise)
        requests.append(Request(torch.tensor([prompt]), max_new_tokens=n))
        expected.append(ref.generate(prompt, n))
    results = pipe.generate_batch(requests, batch_size=3)
    assert [r.tokens for r in results] == expected, (builder, pruner, verifier)
    return results


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("verifier", AUTO_VERIFIERS, ids=lambda v: v["type"])
@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: "-".join(str(v) for v in b.values()))
def test_auto_budget_batches_are_greedy_exact(host, ref, builder, verifier):
    pruner = {"type": "deferred_topb"} if builder.get("mode") == "pruned" else {"type": "none"}
    results = auto_batch(host, ref, builder, pruner, verifier)
    drafted = [r for res in results for r in res.rounds if r.drafted]
    assert drafted and all(r.budget is not None and r.nodes <= r.budget for r in drafted)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("builder", "verifier"), SAMPLED, ids=lambda x: x["type"])
def test_auto_budget_batches_with_sampled_builders_are_greedy_exact(host, ref, builder, verifier):
    auto_batch(host, ref, builder, {"type": "none"}, verifier)
