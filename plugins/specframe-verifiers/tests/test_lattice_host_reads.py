"""The lattice corrector (LiLiCorr's reranker) adds no device-to-host read to a round, under every verifier.

A round's one read is its packed outcome (:mod:`specframe.decode.rounds`); the corrector scores the lattice on
the device. Each case decodes the same requests twice with the same builder, verifier and sampling settings, once
with the ``identity`` corrector and once with ``random_lilicorr``, and compares the reads per round counted by
`HostSyncCounter` (after a warm-up request, so a check a stage makes once per pipeline is not counted).
"""

from __future__ import annotations

import types
from dataclasses import replace
from typing import Any, Literal

import pytest
import torch

import specframe.decode.loop as loop_module
from specframe import ComponentConfig, ComponentSpec, DecodeState, DraftProposal, PluginHost, hookimpl
from specframe.device_sync import HostSyncCounter
from specframe.pipeline import Pipeline
from specframe.registry import DrafterCapabilities
from specframe.testing.toy import ToyDrafter, ToyTarget

VOCAB = 16
HIDDEN = 8
PROMPTS = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]


class FeatureToyConfig(ComponentConfig):
    type: Literal["feature_toy"] = "feature_toy"


class FeatureToyDrafter(ToyDrafter):
    """The toy drafter with per-depth features computed on the device from its candidates' log-probs."""

    def __init__(self, target: ToyTarget) -> None:
        super().__init__(target, depth=4, num_candidates=4, distance=0.6, seed=1)
        self.mix = torch.randn(4, HIDDEN, generator=torch.Generator().manual_seed(2))  # [K, H]

    def propose(self, state: DecodeState) -> DraftProposal:
        p = super().propose(state)
        features = torch.nan_to_num(p.logprobs, neginf=-30.0) @ self.mix  # [B, L, H]
        return replace(p, features=features)


def _host(target: ToyTarget) -> PluginHost:
    mod = types.ModuleType("feature_toy")

    @hookimpl
    def specframe_drafters():
        yield ComponentSpec(kind="drafter", name="feature_toy", config=FeatureToyConfig, summary="toy + features",
                            factory=lambda cfg, ctx: FeatureToyDrafter(target),
                            capabilities=DrafterCapabilities(emits_features=True))

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    host = PluginHost(autoload=True, allowlist=["trees", "verifiers"], disabled=(), trace=False)
    host.register(mod, "feature_toy")
    return host


LILICORR = {"type": "random_lilicorr", "seed": 4, "vocab_size": VOCAB, "model_hidden_size": HIDDEN,
            "hidden_size": 8, "num_heads": 2, "num_slots": 4, "candidate_topk": 4, "factor_dim": 4}
# verifier -> (tree builder, temperature)
CASES: dict[str, tuple[dict[str, Any], float]] = {
    "greedy": ({"type": "chain"}, 0.0),
    "walk": ({"type": "dartree", "mode": "fixed"}, 1.0),
    "chain_rejection": ({"type": "sampled_chain"}, 1.0),
    "tree_rejection": ({"type": "sampled_tree", "branching": [2, 2, 1]}, 0.8),
}


def _reads_per_round(corrector: dict[str, Any], verifier: str, rows: int,
                     monkeypatch: pytest.MonkeyPatch) -> dict[int, set[int]]:
    """The reads of the rounds of a batch of ``rows`` requests (after a warm-up batch), by rows in flight."""
    builder, temperature = CASES[verifier]
    target = ToyTarget.random(vocab_size=VOCAB, seed=3)
    data = {"drafter": {"type": "feature_toy"}, "corrector": corrector, "tree_builder": builder,
            "pruner": {"type": "none"}, "verifier": {"type": verifier}, "budget": 8,
            "sampling": {"temperature": temperature}, "generation": {"stop_at_eos": False}, "seed": 7}
    pipe = Pipeline.from_dict(data, target=target, host=_host(target))
    prompts = PROMPTS[:rows]
    pipe.generate_batch(prompts, 6, batch_size=rows)  # warm-up
    reads: dict[int, set[int]] = {}
    real = loop_module.run_round

    def counted(session: Any, round_rows: Any) -> None:
        with HostSyncCounter() as counter:
            real(session, round_rows)
        reads.setdefault(len(round_rows), set()).add(counter.total)

    with monkeypatch.context() as patch:
        patch.setattr(loop_module, "run_round", counted)
        results = pipe.generate_batch(prompts, 12, batch_size=rows, seed=11)
    assert max(r.num_rounds for r in results) > 1 and rows in reads  # type: ignore[union-attr]
    return reads


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("verifier", list(CASES))
def test_the_lattice_corrector_adds_no_host_read_to_a_round(verifier: str, rows: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    identity = _reads_per_round({"type": "identity"}, verifier, rows, monkeypatch)
    lattice = _reads_per_round(LILICORR, verifier, rows, monkeypatch)
    assert lattice[rows] == identity[rows], (identity, lattice)  # the same reads with every row in flight
    for width in lattice.keys() & identity.keys():  # and once some rows have left
        assert lattice[width] == identity[width], (width, identity, lattice)


def test_a_token_id_outside_the_embedding_table_is_refused_clearly() -> None:
    from specframe_trees.correctors import RandomLiLiCorrConfig, build_random_lilicorr

    from specframe.errors import GenerationError

    config = {k: v for k, v in LILICORR.items() if k != "type"}
    corrector = build_random_lilicorr(RandomLiLiCorrConfig(**config))
    tokens = torch.arange(8).view(1, 2, 4)
    p = DraftProposal(root=torch.tensor([1]), tokens=tokens + VOCAB - 5,  # ids up to VOCAB + 2
                      logprobs=torch.log_softmax(torch.zeros(1, 2, 4), -1), features=torch.zeros(1, 2, HIDDEN))
    with pytest.raises(GenerationError, match=f"vocabulary of {VOCAB}, the proposal holds token id {VOCAB + 2}"):
        corrector.child_logprobs(p, 1, p.root[:, None], torch.zeros(1, 1, 0))
