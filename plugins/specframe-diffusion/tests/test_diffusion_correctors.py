"""The `ar` and `markov` correctors loaded from published-layout checkpoints.

Checks: the loaded head computes what the published formulas say (re-derived here from the raw file tensors);
a batched frontier equals one node at a time; the low-rank form equals the direct one; bad pairings fail clearly.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from diffusion_testkit import HIDDEN, TAPS
from safetensors import safe_open
from specframe_diffusion.correctors import (
    ARCorrectorConfig,
    MarkovCorrectorConfig,
    build_ar_corrector,
    build_markov_corrector,
)
from specframe_diffusion.drafters import DominoDrafterConfig, DSparkDrafterConfig, build_block_drafter

from specframe.errors import CheckpointError, ConfigError
from specframe.interfaces import BuildContext, DecodeState
from specframe.types import DraftProposal, SamplingParams, TargetOutput

WIDTH = len(TAPS) * HIDDEN


def _ctx(target: Any, drafter_cfg: Any) -> BuildContext:
    return BuildContext(pipeline=SimpleNamespace(drafter=drafter_cfg), target=target)


def _weights(directory: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(directory / "model.safetensors"), framework="pt") as f:
        return {k: f.get_tensor(k).double() for k in f.keys()}


def _proposal(directory: Path, target: Any, family: str) -> DraftProposal:
    """A real proposal of the checkpoint's drafter after a random 6-token prompt."""
    cls = DominoDrafterConfig if family == "domino" else DSparkDrafterConfig
    drafter = build_block_drafter(cls(checkpoint=str(directory), top_k=8, dtype="float32"),
                                  BuildContext(pipeline=None, target=target), family)
    gen = torch.Generator().manual_seed(5)
    state = DecodeState(tokens=torch.randint(0, 500, (1, 7), generator=gen), prompt_len=6,
                        sampling=SamplingParams(), seed=0)
    drafter.begin(state, TargetOutput(logits=torch.zeros(1, 1, 512), hidden=torch.randn(1, 6, WIDTH, generator=gen)))
    return drafter.propose(state)


def _gru_step(w: dict[str, torch.Tensor], s: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """PyTorch GRU equations without biases, gate order r, z, n (float64)."""
    g = s.shape[-1]
    gi, gh = w["prefix_gru.weight_ih_l0"] @ x, w["prefix_gru.weight_hh_l0"] @ s
    r = torch.sigmoid(gi[:g] + gh[:g])
    z = torch.sigmoid(gi[g : 2 * g] + gh[g : 2 * g])
    n = torch.tanh(gi[2 * g :] + r * gh[2 * g :])
    return (1 - z) * n + z * s


# ------------------------------------------------------------------------------------------------ ar
def test_ar_head_follows_the_domino_formulas(make_checkpoint, tiny_qwen3: Any, hf_target: Any) -> None:
    directory = make_checkpoint("domino", block_size=6, seed=9)
    drafter_cfg = DominoDrafterConfig(checkpoint=str(directory))
    corrector = build_ar_corrector(ARCorrectorConfig(normalize="full_vocab", dtype="float32"),
                                   _ctx(hf_target, drafter_cfg))
    assert corrector.pure_prefix_len == 1  # from dflash_config.pure_draft_prefix_len
    proposal = _proposal(directory, hf_target, "domino")
    w = _weights(directory)
    embed = tiny_qwen3.get_input_embeddings().weight.detach().double()
    # Roll out a chain along the top candidate of every slot and compare each slot's corrected law.
    s = _gru_step(w, torch.zeros(w["prefix_gru.weight_hh_l0"].shape[1], dtype=torch.float64),
                  embed[int(proposal.root[0])])
    state = corrector.init_state(proposal)
    torch.testing.assert_close(state[0, 0].double(), s, atol=1e-6, rtol=0)
    token = proposal.root
    for depth in range(1, proposal.depth + 1):
        slot = depth - 1
        base = proposal.logits[0, slot].double()
        if slot >= 1:
            z = proposal.features[0, slot].double()
            hidden = torch.nn.functional.silu(w["embed_proj.0.weight"] @ torch.cat([z, s]))
            base = base + w["embed_proj.2.weight"] @ hidden
        want = torch.log_softmax(base, dim=0)[proposal.tokens[0, slot]]
        got = corrector.child_logprobs(proposal, depth, token[:, None], state)[0, 0]
        torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=0)
        token = proposal.tokens[:, slot, 0]
        s = _gru_step(w, s, embed[int(token[0])])
        state = corrector.advance(proposal, depth, state, token[:, None])
        torch.testing.assert_close(state[0, 0].double(), s, atol=1e-5, rtol=0)


@pytest.mark.parametrize("normalize", ["candidates", "full_vocab"])
def test_ar_batched_frontier_and_low_rank_equal_direct(make_checkpoint, hf_target: Any, normalize: str) -> None:
    directory = make_checkpoint("domino", block_size=6, seed=10)
    ctx = _ctx(hf_target, DominoDrafterConfig(checkpoint=str(directory)))
    fast = build_ar_corrector(ARCorrectorConfig(normalize=normalize, dtype="float32"), ctx)
    direct = build_ar_corrector(ARCorrectorConfig(normalize=normalize, dtype="float32", low_rank=False), ctx)
    proposal = _proposal(directory, hf_target, "domino")
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 500, (1, 5), generator=gen)
    state = fast.advance(proposal, 2, fast.init_state(proposal).expand(1, 5, -1), tokens)
    for corrector in (fast, direct):
        batched = corrector.child_logprobs(proposal, 3, tokens, state)  # [1, 5, K]
        for m in range(5):
            single = corrector.child_logprobs(proposal, 3, tokens[:, m : m + 1], state[:, m : m + 1])
            torch.testing.assert_close(batched[:, m : m + 1], single, atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.child_logprobs(proposal, 3, tokens, state),
                               direct.child_logprobs(proposal, 3, tokens, state), atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.advance(proposal, 3, state, tokens), direct.advance(proposal, 3, state, tokens),
                               atol=1e-6, rtol=0)


# -------------------------------------------------------------------------------------------- markov
@pytest.mark.parametrize("kind", ["dspark_deepseek", "dspark_zlab"])
@pytest.mark.parametrize("head_type", ["vanilla", "gated", "rnn"])
def test_markov_head_follows_the_dspark_formulas(make_checkpoint, hf_target: Any, kind: str,
                                                 head_type: str) -> None:
    directory = make_checkpoint(kind, head_type=head_type, seed=12)
    corrector = build_markov_corrector(MarkovCorrectorConfig(normalize="full_vocab", dtype="float32"),
                                       _ctx(hf_target, DSparkDrafterConfig(checkpoint=str(directory))))
    proposal = _proposal(directory, hf_target, "dspark")
    prefix = "markov_head." if kind == "dspark_deepseek" else ""
    w = {k.removeprefix(prefix): v for k, v in _weights(directory).items()}
    r = w["markov_w1.weight"].shape[1]
    s = torch.zeros(r, dtype=torch.float64)
    state = corrector.init_state(proposal)
    prev = proposal.root
    for depth in range(1, proposal.depth + 1):  # slot 0 is corrected: its previous token is the root
        slot = depth - 1
        e, h = w["markov_w1.weight"][int(prev[0])], proposal.features[0, slot].double()
        if head_type == "vanilla":
            u = e
        elif head_type == "gated":
            u = torch.sigmoid(w["gate_proj.weight"] @ torch.cat([h, e]) + w["gate_proj.bias"]) * e
        else:
            gate, cand, out = (w["joint_proj.weight"] @ torch.cat([s, e, h]) + w["joint_proj.bias"]).chunk(3)
            u = torch.tanh(out)
            s = torch.sigmoid(gate) * s + (1 - torch.sigmoid(gate)) * torch.tanh(cand)
        want = torch.log_softmax(proposal.logits[0, slot].double() + w["markov_w2.weight"] @ u, dim=0)
        got = corrector.child_logprobs(proposal, depth, prev[:, None], state)[0, 0]
        torch.testing.assert_close(got.double(), want[proposal.tokens[0, slot]], atol=2e-5, rtol=0)
        prev = proposal.tokens[:, slot, 1]  # follow the second candidate for variety
        state = corrector.advance(proposal, depth, state, prev[:, None])


@pytest.mark.parametrize("head_type", ["vanilla", "gated", "rnn"])
def test_markov_batched_frontier_equals_single_nodes(make_checkpoint, hf_target: Any, head_type: str) -> None:
    directory = make_checkpoint("dspark_zlab", head_type=head_type, seed=13)
    corrector = build_markov_corrector(MarkovCorrectorConfig(dtype="float32"),
                                       _ctx(hf_target, DSparkDrafterConfig(checkpoint=str(directory))))
    proposal = _proposal(directory, hf_target, "dspark")
    tokens = torch.tensor([[3, 70, 200, 9]])
    state = corrector.advance(proposal, 1, corrector.init_state(proposal).expand(1, 4, -1), tokens)
    batched = corrector.child_logprobs(proposal, 2, tokens, state)
    advanced = corrector.advance(proposal, 2, state, tokens.flip(1))
    for m in range(4):
        one = slice(m, m + 1)
        torch.testing.assert_close(batched[:, one], corrector.child_logprobs(proposal, 2, tokens[:, one],
                                                                             state[:, one]), atol=1e-6, rtol=0)
        torch.testing.assert_close(advanced[:, one], corrector.advance(proposal, 2, state[:, one],
                                                                       tokens.flip(1)[:, one]), atol=1e-6, rtol=0)


# --------------------------------------------------------------------------------------------- errors
def test_heads_need_the_matching_checkpoint(make_checkpoint, hf_target: Any) -> None:
    dflash = make_checkpoint("dflash")
    ctx = _ctx(hf_target, SimpleNamespace(checkpoint=str(dflash)))
    with pytest.raises(CheckpointError, match="dflash checkpoint without the domino head"):
        build_ar_corrector(ARCorrectorConfig(), ctx)
    with pytest.raises(CheckpointError, match="without the dspark head"):
        build_markov_corrector(MarkovCorrectorConfig(), ctx)
    with pytest.raises(ConfigError, match="needs a checkpoint"):
        build_ar_corrector(ARCorrectorConfig(), _ctx(hf_target, SimpleNamespace(type="ngram")))


def test_head_and_backbone_slot_counts_must_agree(make_checkpoint, hf_target: Any) -> None:
    backbone = make_checkpoint("domino", block_size=16)
    head = make_checkpoint("domino", block_size=8)
    ctx = _ctx(hf_target, DominoDrafterConfig(checkpoint=str(backbone)))
    with pytest.raises(CheckpointError, match="trained for 8 slots per block, the drafter drafts 16"):
        build_ar_corrector(ARCorrectorConfig(checkpoint=str(head)), ctx)


def test_bfloat16_heads_track_float32(make_checkpoint, hf_target: Any) -> None:
    domino, dspark = make_checkpoint("domino", block_size=6, seed=14), make_checkpoint("dspark_zlab", head_type="rnn")
    cases = [(domino, DominoDrafterConfig, ARCorrectorConfig, build_ar_corrector, "domino"),
             (dspark, DSparkDrafterConfig, MarkovCorrectorConfig, build_markov_corrector, "dspark")]
    for directory, drafter_cls, config_cls, build, family in cases:
        ctx = _ctx(hf_target, drafter_cls(checkpoint=str(directory)))
        proposal = _proposal(directory, hf_target, family)
        tokens = proposal.tokens[:, 0, :3]  # [1, 3] frontier of three depth-1 nodes
        scores = {}
        for dtype in ("float32", "bfloat16"):
            corrector = build(config_cls(dtype=dtype), ctx)
            state = corrector.advance(proposal, 1, corrector.init_state(proposal).expand(1, 3, -1), tokens)
            scores[dtype] = corrector.child_logprobs(proposal, 2, tokens, state)
        assert scores["bfloat16"].dtype == torch.float32
        torch.testing.assert_close(scores["bfloat16"], scores["float32"], atol=0.1, rtol=0.05)
