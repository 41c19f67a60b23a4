"""The export for vLLM against specframe's drafter, without vLLM.

The exported directory is read from scratch the way vLLM 0.32's DFlash runs it (``vllm_reading`` below: taps
concatenated in ascending layer order, one query block ``[bonus, MASK x k]``, drafts from offsets 1..k, the shift
class's one-slot move, the drafter's own ``lm_head`` + ``d2t`` for a reduced vocabulary, else the target's head),
with the diffusion plugin's float64 reference backbone; its draft logits must equal specframe's drafter's on the
original checkpoint. Taps are listed out of order so the ``fc`` column permutation is exercised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusion_testkit import HIDDEN, MASK_TOKEN, VOCAB, reference_block, write_published_checkpoint
from safetensors.torch import load_file, save_file
from specframe_diffusion.drafters import DFlashDrafterConfig, build_block_drafter
from specframe_vllm.export import export_for_vllm
from specframe_vllm.layout import EXPORT_KEY, NATIVE_ARCHITECTURE, SHIFT_ARCHITECTURE

from specframe.cli import run_cli
from specframe.draft_vocab import DraftVocab, save_draft_vocab
from specframe.errors import CheckpointError
from specframe.interfaces import BuildContext, DecodeState
from specframe.types import SamplingParams, TargetOutput

TAPS_LISTED = [2, 0]  # out of order on purpose: vLLM concatenates taps in layer order
BLOCK = 5
SUBSET = list(range(0, VOCAB, 3))  # a reduced draft vocabulary of 171 tokens


def write_drafter(directory: Path, *, shift: bool) -> Path:
    cfg, _ = write_published_checkpoint(directory, "dflash", seed=5, taps=TAPS_LISTED, block_size=BLOCK)
    cfg["dflash_config"]["shift_label"] = shift
    (directory / "config.json").write_text(json.dumps(cfg))
    return directory


def write_target_head(directory: Path, model: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    save_file({"lm_head.weight": model.get_output_embeddings().weight.detach().clone()},
              str(directory / "model.safetensors"))
    return directory


def vllm_reading(directory: Path, taps_by_layer: dict[int, torch.Tensor], bonus: int, model: Any) -> torch.Tensor:
    """Draft logits ``[k, V]`` float64 of the exported drafter as vLLM 0.32's DFlash computes them."""
    cfg = json.loads((directory / "config.json").read_text())
    weights = load_file(str(directory / "model.safetensors"))
    layers = sorted(cfg["dflash_config"]["target_layer_ids"])  # vLLM appends taps as the layers run
    context = torch.cat([taps_by_layer[i] for i in layers], dim=-1)  # [P, n*H]
    k = cfg[EXPORT_KEY]["num_speculative_tokens"]
    block = torch.tensor([bonus] + [cfg["dflash_config"]["mask_token_id"]] * k)
    embed = model.get_input_embeddings().weight.detach()
    z = reference_block(weights, cfg, context, embed[block])  # [k + 1, H]
    if cfg["architectures"] == [SHIFT_ARCHITECTURE]:
        z = torch.cat([z[:1], z[:-1]])  # row j holds output j - 1
    rows = z[1:]  # vLLM samples the mask offsets only
    head = weights.get("lm_head.weight", model.get_output_embeddings().weight.detach())
    logits = rows @ head.double().T
    if "d2t" not in weights:
        return logits
    full = torch.full((k, cfg["vocab_size"]), float("-inf"), dtype=torch.float64)
    full[:, torch.arange(logits.shape[1]) + weights["d2t"]] = logits
    return full


def specframe_logits(directory: Path, target: Any, taps: torch.Tensor, tokens: torch.Tensor,
                     draft_vocab: str | None) -> torch.Tensor:  # [L, V]
    config = DFlashDrafterConfig(checkpoint=str(directory), dtype="float32", draft_vocab=draft_vocab)
    drafter = build_block_drafter(config, BuildContext(pipeline=None, target=target), "dflash")
    state = DecodeState(tokens=tokens, prompt_len=tokens.shape[1] - 1, sampling=SamplingParams(), seed=0)
    drafter.begin(state, TargetOutput(logits=torch.zeros(1, 1, VOCAB), hidden=taps))
    return drafter.propose(state).logits[0]


@pytest.mark.parametrize("shift", [False, True])
@pytest.mark.parametrize("reduced", [False, True])
def test_exported_drafts_equal_specframe(tmp_path: Path, tiny_qwen3: Any, hf_target: Any, shift: bool,
                                         reduced: bool) -> None:
    source = write_drafter(tmp_path / "drafter", shift=shift)
    mapping = None
    if reduced:
        mapping = str(save_draft_vocab(DraftVocab.from_target_ids(SUBSET, VOCAB), tmp_path / "map.safetensors"))
    result = export_for_vllm(source, tmp_path / "vllm", draft_vocab=mapping,
                             target=write_target_head(tmp_path / "target", tiny_qwen3) if reduced else None)
    assert result.architecture == (SHIFT_ARCHITECTURE if shift else NATIVE_ARCHITECTURE)
    assert result.num_speculative_tokens == BLOCK - 1

    gen = torch.Generator().manual_seed(3)
    taps_by_layer = {i: torch.randn(6, HIDDEN, generator=gen) for i in TAPS_LISTED}
    listed = torch.cat([taps_by_layer[i] for i in TAPS_LISTED], dim=-1)[None]  # [1, P, n*H] specframe's order
    tokens = torch.randint(0, VOCAB - 1, (1, 7), generator=gen)  # 6 committed + the root
    want = specframe_logits(source, hf_target, listed, tokens, mapping)[: BLOCK - 1].double()
    got = vllm_reading(result.directory, taps_by_layer, int(tokens[0, -1]), tiny_qwen3)
    finite = torch.isfinite(want)
    assert torch.equal(finite, torch.isfinite(got))
    torch.testing.assert_close(got[finite], want[finite], atol=1e-5, rtol=1e-5)
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_config_and_tensors(tmp_path: Path) -> None:
    source = write_drafter(tmp_path / "drafter", shift=True)
    out = export_for_vllm(source, tmp_path / "vllm").directory
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == [SHIFT_ARCHITECTURE] and cfg["model_type"] == "qwen3"
    assert cfg["dflash_config"] | {} == {"mask_token_id": MASK_TOKEN, "target_layer_ids": [0, 2], "shift_label": True,
                                         "causal": False}
    assert cfg["rope_parameters"] == {"rope_type": "default", "rope_theta": cfg["rope_theta"]}
    assert cfg[EXPORT_KEY]["num_speculative_tokens"] == BLOCK - 1 and "draft_vocab_size" not in cfg
    before, after = load_file(str(source / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert set(after) == set(before)
    assert all(torch.equal(before[k], after[k]) for k in before if k != "fc.weight")
    assert torch.equal(after["fc.weight"], torch.cat([before["fc.weight"][:, HIDDEN:], before["fc.weight"][:, :HIDDEN]],
                                                     dim=1))


@pytest.mark.parametrize(("kind", "words"), [("domino", "no Domino model"), ("dspark_zlab", "vanilla Markov head")])
def test_heads_without_a_vllm_counterpart_are_refused(tmp_path: Path, kind: str, words: str) -> None:
    write_published_checkpoint(tmp_path / kind, kind, seed=1)
    with pytest.raises(CheckpointError, match=words):
        export_for_vllm(tmp_path / kind, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_reduced_vocabulary_needs_the_target(tmp_path: Path) -> None:
    source = write_drafter(tmp_path / "drafter", shift=False)
    mapping = save_draft_vocab(DraftVocab.from_target_ids(SUBSET, VOCAB), tmp_path / "map.safetensors")
    with pytest.raises(CheckpointError, match="--target"):
        export_for_vllm(source, tmp_path / "out", draft_vocab=mapping)


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_drafter(tmp_path / "drafter", shift=False)
    assert run_cli(["vllm-export", str(source), "-o", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert f'"num_speculative_tokens": {BLOCK - 1}' in printed and NATIVE_ARCHITECTURE in printed
    assert run_cli(["vllm-export", str(tmp_path / "missing"), "-o", str(tmp_path / "out2")]) == 2
    assert "Traceback" not in capsys.readouterr().err
