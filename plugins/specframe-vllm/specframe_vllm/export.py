"""Export a specframe block drafter (DFlash family, z-lab layout) as a checkpoint vLLM 0.32's DFlash loads.

What changes between the two directories (docs/serving-vllm.md, /work/notes/vllm-layout.md):

* ``architectures``: ``DFlashDraftModel`` (vLLM's own class) for a non-shift drafter; for a shift drafter
  :data:`~specframe_vllm.layout.SHIFT_ARCHITECTURE`, registered by this package's ``vllm.general_plugins`` entry
  point (its outputs moved one slot, :mod:`specframe_vllm.shift_model`);
* ``dflash_config.target_layer_ids`` ascending, ``fc.weight``'s column blocks permuted to match: vLLM concatenates
  the taps in layer order, specframe in the listed order (the shipped drafters list them ascending already);
* ``dflash_config.causal: false`` and ``rope_parameters`` written explicitly (vLLM's defaults agree today: non-causal
  for ``full_attention`` layers, RoPE theta 1e6 only when none is given);
* a reduced draft vocabulary (FR-Spec, EAGLE-3 ``d2t`` / ``t2d``): vLLM reads ``d2t`` and ``draft_vocab_size`` and
  scores with the drafter's own ``lm_head.weight`` ``[V_draft, H]``, so the target's LM-head rows of the subset
  are written (the drafter otherwise shares the target's embedding and head, as in specframe).

Every other tensor is copied bit for bit in its stored dtype under the same key (the published key names are vLLM's:
``fc.weight``, ``hidden_norm.weight``, ``layers.{i}.self_attn.q_proj.weight``, ..., ``norm.weight``). The
``normalize_taps`` scaling of training is already folded into ``fc.weight`` by the training export, so vLLM's raw
taps (the residual stream after decoder layer ``i``, before the final norm) are what the file expects.

Example::

    specframe vllm-export checkpoints/smollm2-135m/drafter -o runs/vllm-drafter \\
        --draft-vocab checkpoints/smollm2-135m/draft-vocab/fr8k.safetensors \\
        --target ~/.cache/specframe/smollm2-135m-instruct
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from specframe_diffusion.checkpoint import DraftModelConfig, open_checkpoint
from specframe_diffusion.checkpoint.safetensors_dir import SafetensorsDir, write_checkpoint_dir
from specframe_diffusion.draft_config import TRAINED_TAPS_KEY

from specframe.draft_vocab import D2T, DraftVocab, load_draft_vocab
from specframe.errors import CheckpointError
from specframe.files.outputs import MARKER_FILE, check_output_dir, marker_text
from specframe_vllm.layout import EXPORT_KEY, NATIVE_ARCHITECTURE, SHIFT_ARCHITECTURE, speculative_tokens

#: Keys of a target's LM head, preferred first (tied models such as SmolLM2 store only the embedding).
TARGET_HEAD_KEYS = ("lm_head.weight", "model.embed_tokens.weight")
#: The output marker's kind: an export directory is replaced only by another export (specframe.files.outputs).
EXPORT_KIND = "vllm-export"


@dataclass(frozen=True)
class ExportResult:
    """Where the export went and how vLLM must run it."""

    directory: Path
    architecture: str
    num_speculative_tokens: int
    draft_vocab_size: int | None


def check_exportable(cfg: DraftModelConfig, source: str) -> None:
    """Refuse drafters vLLM 0.32 has no counterpart for, saying why."""
    if cfg.family == "domino":
        raise CheckpointError(f"{source} is a Domino drafter (GRU correction head); vLLM 0.32 has no Domino model",
                              hint="export the plain DFlash drafter it was trained on; the GRU head stays specframe's")
    if cfg.family == "dspark":
        raise CheckpointError(
            f"{source} is a DSpark drafter ({cfg.markov_head_type} Markov head); vLLM 0.32 runs DSpark only in its "
            "GPU (V2) model runner and only with the vanilla Markov head", hint="export the plain DFlash drafter")
    if cfg.layout != "zlab":
        raise CheckpointError(f"{source} is in the DeepSeek layout; the export reads z-lab-layout DFlash drafters",
                              hint="vLLM loads DeepSeek-layout checkpoints itself (method: dspark)")


def export_for_vllm(drafter: str | Path, output: str | Path, *, draft_vocab: str | Path | None = None,
                    target: str | Path | None = None) -> ExportResult:
    """Write ``drafter`` (a specframe / z-lab DFlash checkpoint directory) to ``output`` for vLLM; see the module
    docstring. ``draft_vocab`` (a d2t/t2d file; default: the checkpoint's own mapping, if any) needs ``target``
    (the target model directory), whose LM-head rows the reduced head is cut from.

    ``output`` is checked first (:func:`~specframe.files.outputs.check_output_dir`): it is replaced only when it
    is new, empty or an earlier export, never the drafter, the target or another model."""
    check_output_dir(output, kind=EXPORT_KIND, what="export directory",
                     inputs={"the drafter": drafter, "the target": target, "the draft vocabulary": draft_vocab})
    files = open_checkpoint(drafter)
    cfg = files.config
    source = f"checkpoint {files.directory}"
    check_exportable(cfg, source)
    tensors = files.group_state("backbone")  # stored dtype, published keys
    order = sorted(range(cfg.num_taps), key=lambda i: cfg.target_layer_ids[i])
    tensors["fc.weight"] = permute_tap_blocks(tensors["fc.weight"], order, cfg.hidden_size)  # [H, n*H]
    vocab = load_draft_vocab(draft_vocab) if draft_vocab is not None else files.draft_vocab()
    if vocab is not None:
        if target is None:
            raise CheckpointError(f"{source}: a reduced draft vocabulary needs the target's LM head",
                                  hint="pass --target DIR (the target model directory, e.g. the converted SmolLM2)")
        vocab.check_target(cfg.vocab_size)
        tensors["lm_head.weight"] = reduced_head(target, vocab, cfg)  # [V_draft, H]
        tensors[D2T] = vocab.d2t
    architecture = SHIFT_ARCHITECTURE if cfg.shift_label else NATIVE_ARCHITECTURE
    config = vllm_config(cfg, architecture, [cfg.target_layer_ids[i] for i in order],
                         None if vocab is None else vocab.size, source=str(files.directory))
    out = write_checkpoint_dir(output, config, tensors,
                               extra_files={MARKER_FILE: marker_text(EXPORT_KIND, files.directory.resolve())})
    return ExportResult(out, architecture, speculative_tokens(cfg.block_size), None if vocab is None else vocab.size)


def permute_tap_blocks(fc_weight: torch.Tensor, order: list[int], hidden_size: int) -> torch.Tensor:
    """``fc.weight`` ``[H, n*H]`` with its column blocks (one per tap) in ``order``: block ``b`` of the result is
    block ``order[b]`` of the input. Example: taps listed ``(7, 1)`` -> order ``[1, 0]`` swaps the two blocks."""
    if order == sorted(order):
        return fc_weight
    blocks = fc_weight.split(hidden_size, dim=1)
    return torch.cat([blocks[i] for i in order], dim=1).contiguous()


def reduced_head(target: str | Path, vocab: DraftVocab, cfg: DraftModelConfig) -> torch.Tensor:  # [V_draft, H]
    """The target's LM-head rows of ``vocab``'s tokens, in draft-id order, in the target's stored dtype."""
    weights = SafetensorsDir(target)
    key = next((k for k in TARGET_HEAD_KEYS if k in weights.file_of), None)
    if key is None:
        raise CheckpointError(f"target directory {target} holds neither {' nor '.join(TARGET_HEAD_KEYS)}",
                              hint="pass the directory of the target the drafter was trained for")
    head = weights.load([key])[key]
    if tuple(head.shape) != (cfg.vocab_size, cfg.hidden_size):
        raise CheckpointError(f"target directory {target}: {key} is {list(head.shape)}, the drafter needs "
                              f"[{cfg.vocab_size}, {cfg.hidden_size}]", hint="use the drafter's own target")
    return head.index_select(0, vocab.target_ids).contiguous()


def vllm_config(cfg: DraftModelConfig, architecture: str, layer_ids: list[int], draft_vocab_size: int | None, *,
                source: str) -> dict[str, Any]:
    """The drafter's ``config.json`` with the fields vLLM 0.32 reads set explicitly (module docstring)."""
    raw = copy.deepcopy(cfg.raw)
    raw["architectures"] = [architecture]
    raw["model_type"] = "qwen3"
    dflash = raw.setdefault("dflash_config", {})
    dflash.update(mask_token_id=cfg.mask_token_id, target_layer_ids=layer_ids, shift_label=cfg.shift_label,
                  causal=False)
    raw["block_size"] = cfg.block_size
    raw["rope_theta"] = cfg.rope_theta
    raw["rope_parameters"] = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    raw["layer_types"] = ["full_attention"] * cfg.num_hidden_layers
    if draft_vocab_size is not None:
        raw["draft_vocab_size"] = draft_vocab_size
    if TRAINED_TAPS_KEY in raw:  # fc's blocks are permuted with the taps: the trained order is now this one
        raw[TRAINED_TAPS_KEY] = layer_ids
    raw[EXPORT_KEY] = {"source": source, "shift_label": cfg.shift_label,
                       "num_speculative_tokens": speculative_tokens(cfg.block_size)}
    return raw
