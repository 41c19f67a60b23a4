"""Greedy exactness end to end on Hugging Face targets: every tree pipeline reproduces ``model.generate``.

At temperature 0 a lossless pipeline must emit exactly the token ids of ``model.generate(do_sample=False)``,
whatever the drafter, tree builder and pruner. Tiny random Llama and Qwen3 models (fp32, sdpa and eager) are
the targets. Random models rarely agree with a real drafter, so two test-only drafters force the regimes:

* ``oracle`` knows the target's future greedy tokens and proposes them among K candidates, optionally at a
  random rank or not at all (noise); with no noise every round accepts the full depth;
* ``miss`` proposes random candidates that never contain the next greedy token, so nothing is accepted.

The real ``ngram`` and ``none`` drafters run through the same loop. EOS is disabled on both sides (the
model's generation config has no eos and the pipeline has ``stop_at_eos: false``), except in the EOS test,
which gives both the same eos id.
"""

from __future__ import annotations

import types
from typing import Any, Literal

import pytest
import torch
from pydantic import Field

# Plain imports: first-party plugins are required by the suite (the root conftest fails the session without
# them), so this headline test can never be skipped by a broken install.
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids, tiny_causal_lm

from specframe import (
    ComponentConfig,
    ComponentSpec,
    DecodeState,
    Drafter,
    DrafterCapabilities,
    DraftProposal,
    PluginHost,
    hookimpl,
)
from specframe.pipeline import Pipeline

VOCAB = 512
MODELS = [("llama", "sdpa"), ("llama", "eager"), ("qwen3", "sdpa"), ("qwen3", "eager")]
BUILDERS = [
    {"type": "chain"},
    {"type": "heap"},
    {"type": "heap_sequential"},
    {"type": "dartree", "mode": "fixed"},
    {"type": "dartree", "mode": "pruned"},
    {"type": "chain_then_heap"},
]
PRUNERS = [{"type": "none"}, {"type": "deferred_topb"}]
BASE = {
    "sampling": {"temperature": 0.0},
    "budget": 10,
    "verifier": {"type": "auto"},
    "generation": {"stop_at_eos": False, "chat_template": False},
}


# ------------------------------------------------------------------------------------ test drafters
class OracleConfig(ComponentConfig):
    type: Literal["oracle"] = "oracle"
    depth: int = Field(5, ge=1, description="depths proposed per round")
    num_candidates: int = Field(3, ge=1, description="candidates K per depth")
    rank_noise: float = Field(0.0, ge=0.0, le=1.0, description="chance the true token is not ranked first")
    miss_rate: float = Field(0.0, ge=0.0, le=1.0, description="chance the true token is left out of a depth")


class MissConfig(ComponentConfig):
    type: Literal["miss"] = "miss"
    depth: int = Field(4, ge=1)
    num_candidates: int = Field(3, ge=1)


def candidate_proposal(root: torch.Tensor, ranked: list[list[int]]) -> DraftProposal:
    """A proposal whose depth ``d`` candidates are ``ranked[d]`` (best first), with consistent full logits."""
    depth, k = len(ranked), len(ranked[0])
    logits = torch.zeros(1, depth, VOCAB)  # [1, L, V]
    tokens = torch.tensor([ranked], dtype=torch.long)  # [1, L, K]
    logits.scatter_(2, tokens, torch.linspace(8.0, 4.0, k).expand(1, depth, k).contiguous())
    logprobs = torch.gather(logits.log_softmax(dim=-1), 2, tokens)  # [1, L, K], descending along K
    features = torch.randn(1, depth, 64, generator=torch.Generator().manual_seed(depth))  # for learned correctors
    return DraftProposal(root=root, tokens=tokens, logprobs=logprobs, logits=logits, features=features)


def noise_tokens(gen: torch.Generator, count: int, exclude: int) -> list[int]:
    """``count`` distinct random ids, none equal to ``exclude``."""
    picked: list[int] = []
    while len(picked) < count:
        t = int(torch.randint(0, VOCAB, (1,), generator=gen))
        if t != exclude and t not in picked:
            picked.append(t)
    return picked


class OracleDrafter(Drafter):
    """Proposes the target's own future greedy tokens (``future`` = prompt + greedy continuation), with noise."""

    def __init__(self, cfg: OracleConfig) -> None:
        self.cfg = cfg
        self.future: list[int] = []

    def propose(self, state: DecodeState) -> DraftProposal:
        t = state.tokens.shape[1]
        cfg, gen = self.cfg, torch.Generator().manual_seed((state.seed * 100_003 + t) % 2**63)  # the test's own noise
        ranked = []
        for d in range(1, cfg.depth + 1):
            true = self.future[t - 1 + d] if t - 1 + d < len(self.future) else 0
            row = noise_tokens(gen, cfg.num_candidates, exclude=true)
            if float(torch.rand((), generator=gen)) >= cfg.miss_rate:
                noisy_rank = float(torch.rand((), generator=gen)) < cfg.rank_noise and cfg.num_candidates > 1
                rank = int(torch.randint(1, cfg.num_candidates, (1,), generator=gen)) if noisy_rank else 0
                row[rank] = true
            ranked.append(row)
        return candidate_proposal(state.root, ranked)


class MissDrafter(Drafter):
    """Random candidates; depth 1 never holds the next greedy token, so no draft token is ever accepted."""

    def __init__(self, cfg: MissConfig) -> None:
        self.cfg = cfg
        self.future: list[int] = []

    def propose(self, state: DecodeState) -> DraftProposal:
        t = state.tokens.shape[1]
        nxt = self.future[t] if t < len(self.future) else -1
        gen = torch.Generator().manual_seed((state.seed * 100_003 + t) % 2**63)  # the test's own noise
        ranked = [noise_tokens(gen, self.cfg.num_candidates, exclude=nxt if d == 0 else -1)
                  for d in range(self.cfg.depth)]
        return candidate_proposal(state.root, ranked)


def make_test_plugin() -> types.ModuleType:
    mod = types.ModuleType("greedy_exact_test_drafters")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        caps = DrafterCapabilities(emits_logits=True, emits_features=True)
        yield ComponentSpec(kind="drafter", name="oracle", config=OracleConfig, capabilities=caps,
                            factory=lambda c, ctx: OracleDrafter(c))
        yield ComponentSpec(kind="drafter", name="miss", config=MissConfig, capabilities=caps,
                            factory=lambda c, ctx: MissDrafter(c))

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    return mod


def exact_host(plugin: types.ModuleType, name: str) -> PluginHost:
    """A plugin host with the built-in hf, trees and verifiers plugins (nothing else installed is loaded) and the
    test's own drafters ``plugin`` registered as ``name``."""
    host = PluginHost(autoload=True, allowlist=["hf", "trees", "verifiers"], disabled=(), trace=False)
    host.register(plugin, name)
    return host


# ----------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def host() -> PluginHost:
    return exact_host(make_test_plugin(), "greedy_exact_test_drafters")


class Reference:
    """A tiny model without eos, its target adapter, and cached ``model.generate`` outputs."""

    def __init__(self, family: str, attn: str) -> None:
        self.model = tiny_causal_lm(family, attn=attn, seed={"llama": 0, "qwen3": 1}[family])  # type: ignore[arg-type]
        self.model.generation_config.eos_token_id = None
        self.target = HFTarget.from_model(self.model)
        self._cache: dict[tuple[tuple[int, ...], int], list[int]] = {}

    def generate(self, prompt: list[int], n: int) -> list[int]:
        """New tokens of ``model.generate(do_sample=False)``."""
        key = (tuple(prompt), n)
        if key not in self._cache:
            ids = torch.tensor([prompt])
            out = self.model.generate(ids, max_new_tokens=n, do_sample=False, pad_token_id=0)
            self._cache[key] = out[0, len(prompt):].tolist()
        return self._cache[key]


@pytest.fixture(scope="module")
def references() -> dict[tuple[str, str], Reference]:
    return {key: Reference(*key) for key in MODELS}


def fit_builder(builder: dict[str, Any], pruner: dict[str, Any]) -> dict[str, Any]:
    """DARTree's pruned mode keeps ``width`` nodes per depth; without a pruner that must fit the budget of 10."""
    if builder.get("mode") == "pruned" and pruner["type"] == "none":
        return {**builder, "width": 2, "max_depth": 5}
    return builder


def run(host: PluginHost, ref: Reference, drafter: dict[str, Any], builder: dict[str, Any],
        pruner: dict[str, Any], prompt: list[int], n: int, corrector: dict[str, Any] | None = None,
        seed: int = 0) -> Any:
    """Generate ``n`` tokens through the pipeline and check them against ``model.generate``. The request seed is
    pinned (the oracle drafter draws its noise from it), so a run and what a test asserts about its rounds are the
    same every time."""
    data = {**BASE, "drafter": drafter, "tree_builder": fit_builder(builder, pruner), "pruner": pruner,
            "corrector": corrector or {"type": "identity"}, "seed": seed}
    pipe = Pipeline.from_dict(data, target=ref.target, host=host)
    stage = pipe.stages.drafter
    if isinstance(stage, (OracleDrafter, MissDrafter)):
        stage.future = prompt + ref.generate(prompt, n + 16)
    result = pipe.generate(torch.tensor([prompt]), max_new_tokens=n)
    expected = ref.generate(prompt, n)
    assert result.tokens == expected, (
        f"{drafter['type']} / {builder} / {pruner['type']}: pipeline {result.tokens} != generate {expected}")
    return result


# -------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("pruner", PRUNERS, ids=lambda p: p["type"])
@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: "-".join(str(v) for v in b.values()))
@pytest.mark.parametrize("model_key", MODELS, ids=lambda m: f"{m[0]}-{m[1]}")
def test_tree_pipelines_equal_generate(host, references, model_key, builder, pruner):
    ref = references[model_key]
    # Full-depth acceptance: a noiseless oracle is right at every depth, so each round accepts its whole tree.
    full = run(host, ref, {"type": "oracle"}, builder, pruner, random_ids(9, seed=1), 17)
    assert any(r.depth >= 2 and r.accepted == r.depth for r in full.rounds)
    # Partial acceptance: the true token is sometimes ranked lower (trees find it) or missing.
    noisy = {"type": "oracle", "num_candidates": 3, "rank_noise": 0.5, "miss_rate": 0.2}
    run(host, ref, noisy, builder, pruner, random_ids(14, seed=2), 23)
    # Nothing accepted: every round's tree is wrong at depth 1.
    miss = run(host, ref, {"type": "miss"}, builder, pruner, random_ids(5, seed=3), 6)
    assert all(r.accepted == 0 for r in miss.rounds) and any(r.nodes > 0 for r in miss.rounds)


@pytest.mark.parametrize("corrector", [{"type": "random_gru"}, {"type": "random_markov", "variant": "rnn"}],
                         ids=lambda c: c["type"])
@pytest.mark.parametrize("builder", [b for b in BUILDERS if b["type"] != "heap"],
                         ids=lambda b: "-".join(str(v) for v in b.values()))
def test_path_dependent_correctors_keep_greedy_exactness(host, references, builder, corrector):
    """Correctors only reshape the tree; the output must not change (heap ignores correctors and refuses them)."""
    pruner = {"type": "deferred_topb"} if builder.get("mode") == "pruned" else {"type": "none"}
    noisy = {"type": "oracle", "num_candidates": 3, "rank_noise": 0.5, "miss_rate": 0.2}
    run(host, references[("qwen3", "eager")], noisy, builder, pruner, random_ids(10, seed=7), 19, corrector)


@pytest.mark.parametrize("model_key", MODELS, ids=lambda m: f"{m[0]}-{m[1]}")
def test_ngram_and_plain_decoding_equal_generate(host, references, model_key):
    ref = references[model_key]
    prompt = random_ids(12, seed=1)  # these random models fall into loops that prompt lookup then matches
    accepted = 0
    for builder in ({"type": "chain"}, {"type": "heap"}):
        result = run(host, ref, {"type": "ngram", "num_speculative_tokens": 6}, builder, {"type": "none"}, prompt, 40)
        accepted += sum(r.accepted for r in result.rounds)
    assert accepted > 0
    plain = run(host, ref, {"type": "none"}, {"type": "chain"}, {"type": "none"}, prompt, 12)
    assert all(r.nodes == 0 for r in plain.rounds) and len(plain.rounds) == 11


@pytest.mark.parametrize("n", [1, 2, 3])
def test_very_short_generations(host, references, n):
    run(host, references[("qwen3", "sdpa")], {"type": "oracle"}, {"type": "heap"}, {"type": "none"},
        random_ids(4, seed=5), n)


def test_eos_stops_both_at_the_same_token(host):
    model = tiny_causal_lm("llama", seed=0)
    prompt = random_ids(8, seed=6)
    model.generation_config.eos_token_id = None
    free = model.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False, pad_token_id=0)
    eos = int(free[0, len(prompt) + 7])  # the 8th new token becomes the eos id
    model.generation_config.eos_token_id = eos
    expected = model.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False, pad_token_id=0)
    expected_new = expected[0, len(prompt):].tolist()
    assert expected_new[-1] == eos and len(expected_new) <= 8
    target = HFTarget.from_model(model)
    assert target.eos_token_ids == (eos,)
    data = {**BASE, "generation": {"stop_at_eos": True, "chat_template": False},
            "drafter": {"type": "oracle"}, "tree_builder": {"type": "chain"}, "pruner": {"type": "none"}}
    pipe = Pipeline.from_dict(data, target=target, host=host)
    pipe.stages.drafter.future = prompt + free[0, len(prompt):].tolist()
    result = pipe.generate(torch.tensor([prompt]), max_new_tokens=20)
    assert result.tokens == expected_new and result.stop_reason == "eos"
