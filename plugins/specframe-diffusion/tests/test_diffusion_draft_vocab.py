"""Reduced draft vocabularies in the block-diffusion drafters: candidates, laws, checkpoints and bad mappings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from diffusion_testkit import HIDDEN, TAPS, VOCAB
from safetensors import safe_open
from safetensors.torch import save_file
from specframe_diffusion.drafters import DFlashDrafterConfig, DSparkDrafterConfig, build_block_drafter
from specframe_verifiers import SampledTreeBuilder

from specframe.builtin.identity import IdentityCorrector
from specframe.draft_vocab import DraftVocab, save_draft_vocab
from specframe.errors import CheckpointError
from specframe.interfaces import BuildContext, DecodeState, RoundContext
from specframe.sampling.noise import RoundNoise
from specframe.types import SamplingParams, TargetOutput

WIDTH = len(TAPS) * HIDDEN
SUBSET = DraftVocab.from_target_ids(torch.randperm(VOCAB, generator=torch.Generator().manual_seed(5))[:100], VOCAB)


def _proposal(directory: Path, target: Any, kind: str = "dflash", **fields: Any) -> Any:
    config_cls = DSparkDrafterConfig if kind == "dspark" else DFlashDrafterConfig
    config = config_cls(checkpoint=str(directory), dtype="float32", top_k=16, **fields)
    drafter = build_block_drafter(config, BuildContext(pipeline=None, target=target), kind)
    gen = torch.Generator().manual_seed(9)
    state = DecodeState(tokens=torch.randint(0, 500, (2, 6), generator=gen), prompt_len=5,
                        sampling=SamplingParams(), seed=0)
    drafter.begin(state, TargetOutput(logits=torch.zeros(2, 1, VOCAB), hidden=torch.randn(2, 5, WIDTH, generator=gen)))
    return drafter, drafter.propose(state)


@pytest.mark.parametrize("kind", ["dflash", "dspark_deepseek"])
def test_candidates_come_only_from_the_subset_with_the_subset_law(make_checkpoint, hf_target: Any, tmp_path: Path,
                                                                    kind: str) -> None:
    directory = make_checkpoint(kind, block_size=5)
    family = "dspark" if kind == "dspark_deepseek" else "dflash"
    mapping = save_draft_vocab(SUBSET, tmp_path / "map.safetensors")
    drafter, full = _proposal(directory, hf_target, family)
    _, reduced = _proposal(directory, hf_target, family, draft_vocab=str(mapping))
    assert drafter.head.size == VOCAB
    allowed = SUBSET.t2d
    assert bool(allowed[reduced.tokens].all())  # never a candidate outside the subset
    # The reduced logits are the full ones on the subset and -inf elsewhere.
    torch.testing.assert_close(reduced.logits[..., allowed], full.logits[..., allowed], atol=1e-5, rtol=1e-5)
    assert bool(torch.isneginf(reduced.logits[..., ~allowed]).all())
    # Candidates: the top-K of the log-softmax over the subset, as target ids, sorted descending.
    law = torch.log_softmax(full.logits[..., allowed], dim=-1)  # [B, L, V_d]
    want_lp, want_idx = torch.topk(law, 16, dim=-1)
    assert torch.equal(reduced.tokens, SUBSET.target_ids[want_idx])
    torch.testing.assert_close(reduced.logprobs, want_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.log_softmax(reduced.logits, -1).gather(-1, reduced.tokens), reduced.logprobs)


def test_sampled_draft_law_is_zero_outside_the_subset(make_checkpoint, hf_target: Any, tmp_path: Path) -> None:
    mapping = save_draft_vocab(SUBSET, tmp_path / "map.safetensors")
    _, proposal = _proposal(make_checkpoint("dflash", block_size=5), hf_target, draft_vocab=str(mapping))
    params = SamplingParams(temperature=1.0)
    ctx = RoundContext(budget=64, sampling=params, noise=RoundNoise.from_seed(3))
    tree = SampledTreeBuilder((4, 2, 1), VOCAB).build(proposal, IdentityCorrector(), ctx)
    assert tree.child_q is not None
    q = tree.child_q[:, : tree.tokens.shape[1]]  # [B, N, V]
    assert bool((q[..., ~SUBSET.t2d] == 0).all())
    assert bool((q.sum(-1) > 0.99).any())  # laws do live on the subset
    assert bool(SUBSET.t2d[tree.tokens[:, 1:][tree.valid[:, 1:]]].all())


def _with_mapping(directory: Path, tensors: dict[str, torch.Tensor]) -> Path:
    path = directory / "model.safetensors"
    with safe_open(str(path), framework="pt") as f:
        weights = {k: f.get_tensor(k) for k in f.keys()}
    save_file(weights | tensors, str(path), metadata={"format": "pt"})
    return directory


def test_a_checkpoint_carrying_d2t_t2d_uses_them_unless_full(make_checkpoint, hf_target: Any) -> None:
    directory = _with_mapping(make_checkpoint("dflash", block_size=5), SUBSET.tensors())
    drafter, proposal = _proposal(directory, hf_target)
    assert drafter.head.size == SUBSET.size
    assert bool(SUBSET.t2d[proposal.tokens].all())
    drafter, proposal = _proposal(directory, hf_target, draft_vocab="full")
    assert drafter.head.size == VOCAB and not bool(SUBSET.t2d[proposal.tokens].all())


def test_a_mapping_for_another_vocabulary_is_a_clear_error(make_checkpoint, hf_target: Any, tmp_path: Path) -> None:
    other = save_draft_vocab(DraftVocab.from_target_ids(range(10), 1000), tmp_path / "other.safetensors")
    with pytest.raises(CheckpointError, match=r"other\.safetensors.*1000 tokens.*target has 512"):
        _proposal(make_checkpoint("dflash", block_size=5), hf_target, draft_vocab=str(other))
    directory = _with_mapping(make_checkpoint("dflash", block_size=5), {"d2t": torch.zeros(3, dtype=torch.long)})
    with pytest.raises(CheckpointError, match="holds d2t but not t2d"):
        _proposal(directory, hf_target)
    bad = DraftVocab.from_target_ids(range(3), 1000).tensors()
    with pytest.raises(CheckpointError, match=f"checkpoint {directory}.*1000 tokens"):
        _proposal(_with_mapping(directory, bad), hf_target)


def test_cpu_linear_auto_follows_the_targets_measured_rule(make_checkpoint, tmp_path: Path) -> None:
    from specframe_hf import HFTarget
    from specframe_hf.testing import tiny_causal_lm

    from specframe.cpu_linear import LinearKernels, PackedLinear, onednn_linear_available, pack_linear_layers

    if not onednn_linear_available():
        pytest.skip("this torch build has no oneDNN")
    rule = LinearKernels(low=3)
    model = tiny_causal_lm("qwen3", seed=7, num_layers=4)
    pack_linear_layers(model, kernels=rule)
    target = HFTarget.from_model(model)
    mapping = save_draft_vocab(SUBSET, tmp_path / "map.safetensors")
    drafter, _ = _proposal(make_checkpoint("dflash", block_size=5), target, draft_vocab=str(mapping))
    packed = [m for m in drafter.backbone.modules() if isinstance(m, PackedLinear)]
    assert packed and {m.kernels for m in packed} == {rule}
    assert isinstance(drafter.head.sub_head, PackedLinear) and drafter.head.sub_head.kernels == rule
    bf16 = build_block_drafter(DFlashDrafterConfig(checkpoint=str(make_checkpoint("dflash", block_size=5)),
                                                   dtype="bfloat16"), BuildContext(pipeline=None, target=target),
                               "dflash")  # a bf16 backbone is not packable: left as it is, no error
    assert not any(isinstance(m, PackedLinear) for m in bf16.backbone.modules())
