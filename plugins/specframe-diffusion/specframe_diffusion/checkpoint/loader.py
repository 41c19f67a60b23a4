"""Opening, validating, loading and saving drafter checkpoints in their published layouts.

``open_checkpoint(dir)`` reads ``config.json`` and the safetensors headers and checks every published key
against :func:`~specframe_diffusion.checkpoint.key_layout.checkpoint_layout`: missing keys, unexpected keys and
shape mismatches are reported together in one :class:`CheckpointError`. Components then load only the tensors
they own (the drafter its backbone, a corrector its head), so nothing is read twice. An EAGLE-3 reduced-vocabulary
mapping (``d2t`` / ``t2d``) is optional and read by :meth:`CheckpointFiles.draft_vocab`.

``save_checkpoint`` writes the same layout back (same key spellings as the loaded files, same ``config.json``),
atomically, so the authors' own loaders can read the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specframe.draft_vocab import D2T, T2D, DraftVocab
from specframe.errors import CheckpointError
from specframe.files import path_problem
from specframe_diffusion.checkpoint.key_layout import (
    IGNORED_SUFFIXES,
    VOCAB_MAP_KEYS,
    Group,
    TensorSlot,
    checkpoint_layout,
    key_aliases,
)
from specframe_diffusion.checkpoint.safetensors_dir import (
    CONFIG_FILE,
    SafetensorsDir,
    write_checkpoint_dir,
)
from specframe_diffusion.checkpoint.weight_checks import check_weights
from specframe_diffusion.draft_config import DraftModelConfig
from specframe_diffusion.models.backbone import DFlashBackbone

_MAX_LISTED = 12


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f", ... and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


@dataclass
class CheckpointFiles:
    """A validated checkpoint directory: its config and, for every expected tensor, the key it is stored under."""

    directory: Path
    config: DraftModelConfig
    weights: SafetensorsDir
    stored_key: dict[tuple[Group, str], str]  # (group, local name) -> key in the files

    def has_group(self, group: Group) -> bool:
        return any(g == group for g, _ in self.stored_key)

    def group_state(self, group: Group, *, dtype: torch.dtype | None = None,
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Tensors of one group under their local names (e.g. ``prefix_gru.weight_ih_l0``), checked to be floating
        point and finite (:func:`~specframe_diffusion.checkpoint.weight_checks.check_weights`)."""
        names = {local: key for (g, local), key in self.stored_key.items() if g == group}
        if not names:
            raise CheckpointError(f"checkpoint {self.directory} ({self.config.family}) has no {group} weights",
                                  hint=_group_hint(group))
        loaded = self.weights.load(list(names.values()), dtype=dtype, device=device)
        check_weights(loaded, source=f"checkpoint {self.directory}", group=group)
        return {local: loaded[key] for local, key in names.items()}

    def draft_vocab(self) -> DraftVocab | None:
        """The checkpoint's own reduced vocabulary (EAGLE-3 ``d2t`` / ``t2d``), validated; None when it has none."""
        present = [k for k in VOCAB_MAP_KEYS if k in self.weights.file_of]
        if not present:
            return None
        source = f"checkpoint {self.directory}"
        if len(present) != len(VOCAB_MAP_KEYS):
            raise CheckpointError(f"{source} holds {present[0]} but not {'/'.join(set(VOCAB_MAP_KEYS) - set(present))}",
                                  hint="a reduced-vocabulary checkpoint needs both d2t and t2d")
        loaded = self.weights.load(list(VOCAB_MAP_KEYS))
        vocab = DraftVocab.from_mapping(loaded[D2T], loaded[T2D], source=source)
        declared = self.config.raw.get("draft_vocab_size")
        if declared is not None and int(declared) != vocab.size:
            raise CheckpointError(f"{source}: config.json says draft_vocab_size {declared}, d2t maps {vocab.size} "
                                  "tokens", hint="the mapping and config.json must come from the same checkpoint")
        vocab.check_target(self.config.vocab_size)
        return vocab

    def load_backbone(self, *, dtype: torch.dtype = torch.float32,
                      device: str | torch.device = "cpu") -> DFlashBackbone:
        with torch.device("meta"):  # no allocation and no random initialisation (the global RNG stays untouched)
            backbone = DFlashBackbone(self.config)
        backbone.load_state_dict(self.group_state("backbone", dtype=dtype, device=device), strict=True, assign=True)
        return backbone.eval().requires_grad_(False)


def _group_hint(group: Group) -> str:
    return {
        "backbone": "a head-only export (dflash_config.head_only) holds a correction head without its drafter: give "
                    "the drafter its base drafter's checkpoint and the corrector this one (corrector.checkpoint)",
        "domino_head": "the `ar` corrector needs a Domino checkpoint (dflash_config.projector_type: domino)",
        "markov_head": "the `markov` corrector needs a DSpark checkpoint (markov_rank > 0)",
        "path_selector": "the `path_selector` corrector needs a DFlash2 checkpoint (dflash_config.selector_rank "
                         "and selector_top_k, candidate_selector.* weights)",
        "lilicorr_head": "the `lilicorr` corrector needs a LiLiCorr checkpoint (dflash_config.projector_type: "
                         "lilicorr, lilicorr.* weights)",
        "embeddings": "only DeepSeek-layout DSpark checkpoints carry embed_tokens / lm_head",
    }.get(group, "check that the checkpoint matches the component")


def open_checkpoint(directory: str | Path) -> CheckpointFiles:
    """Read ``config.json`` and the weight headers of ``directory`` and validate every key and shape."""
    directory = Path(directory)
    problem = path_problem(directory, directory=True)
    if problem is not None:
        raise CheckpointError(
            f"checkpoint directory {directory} {problem}",
            hint="set `checkpoint:` to a local directory with config.json and *.safetensors "
                 "(download it first, e.g. `huggingface-cli download <repo> --local-dir <dir>`)",
        )
    config = DraftModelConfig.from_file(directory / CONFIG_FILE)
    if not 0 <= config.mask_token_id < config.vocab_size:
        raise CheckpointError(
            f"{directory / CONFIG_FILE}: mask_token_id {config.mask_token_id} is outside the vocabulary "
            f"(vocab_size {config.vocab_size})",
            hint="the mask token must be a row of the embedding table (151669 for Qwen3)",
        )
    weights = SafetensorsDir(directory)
    return CheckpointFiles(directory, config, weights, _match_keys(directory, config, weights.shapes()))


def _match_keys(directory: Path, config: DraftModelConfig,
                found: dict[str, tuple[int, ...]]) -> dict[tuple[Group, str], str]:
    """Map every expected slot to its stored key; collect every mismatch into one error."""
    slots = {s.key: s for s in checkpoint_layout(config)}
    aliases = key_aliases(config)
    stored: dict[tuple[Group, str], str] = {}
    unexpected: list[str] = []
    mismatched: list[str] = []
    for key in sorted(found):
        if key.endswith(IGNORED_SUFFIXES) or key in VOCAB_MAP_KEYS:
            continue
        slot: TensorSlot | None = slots.get(key) or slots.get(aliases.get(key, ""))
        if slot is None or (slot.group, slot.local) in stored:
            unexpected.append(key)
            continue
        stored[(slot.group, slot.local)] = key
        if tuple(found[key]) != slot.shape:
            mismatched.append(f"{key}: expected {list(slot.shape)}, found {list(found[key])}")
    missing = [s.key for s in slots.values() if (s.group, s.local) not in stored]
    if missing or unexpected or mismatched:
        lines = [f"checkpoint {directory} does not match its config.json "
                 f"(family {config.family}, {config.layout} layout, {config.num_hidden_layers} layers, "
                 f"{config.num_taps} taps)"]
        if missing:
            lines.append(f"missing keys ({len(missing)}): {_listing(missing)}")
        if unexpected:
            lines.append(f"unexpected keys ({len(unexpected)}): {_listing(unexpected)}")
        if mismatched:
            lines.append(f"shape mismatches ({len(mismatched)}): {_listing(mismatched)}")
        raise CheckpointError("\n".join(lines), hint="the weights and config.json must come from the same "
                              "checkpoint; re-download it or fix config.json")
    return stored


@dataclass
class DraftCheckpoint:
    """A fully loaded checkpoint: the backbone module (None for a head-only export) plus every other group as plain
    tensors."""

    config: DraftModelConfig
    backbone: DFlashBackbone | None
    others: dict[Group, dict[str, torch.Tensor]] = field(default_factory=dict)
    stored_key: dict[tuple[Group, str], str] = field(default_factory=dict)

    def groups(self) -> dict[Group, dict[str, torch.Tensor]]:
        if self.backbone is None:
            return dict(self.others)
        return {"backbone": dict(self.backbone.state_dict()), **self.others}


def load_checkpoint(directory: str | Path, *, dtype: torch.dtype = torch.float32,
                    device: str | torch.device = "cpu") -> DraftCheckpoint:
    """Load everything a checkpoint holds (for inspection and round trips; drafters load per group)."""
    files = open_checkpoint(directory)
    groups = {g for g, _ in files.stored_key if g != "backbone"}
    others = {g: files.group_state(g, dtype=dtype, device=device) for g in sorted(groups)}
    backbone = None if files.config.head_only else files.load_backbone(dtype=dtype, device=device)
    return DraftCheckpoint(files.config, backbone, others, dict(files.stored_key))


def save_checkpoint(checkpoint: DraftCheckpoint, directory: str | Path, *, dtype: torch.dtype | None = None,
                    max_shard_bytes: int | None = None, extra_files: Mapping[str, str] | None = None) -> Path:
    """Write ``checkpoint`` in its published layout (same config.json, same key spellings), atomically.

    Args:
        checkpoint: what to write; every slot of its config's layout must be present.
        directory: destination directory (created if needed).
        dtype: cast floating tensors (and record it as ``torch_dtype``) when given.
        max_shard_bytes: write ``model-0000i-of-0000n.safetensors`` + index above this size.
        extra_files: file name -> text written with the weights (the output marker).
    """
    cfg = checkpoint.config
    groups = checkpoint.groups()
    tensors: dict[str, torch.Tensor] = {}
    missing = []
    for slot in checkpoint_layout(cfg):
        t = groups.get(slot.group, {}).get(slot.local)
        if t is None:
            missing.append(slot.key)
            continue
        if tuple(t.shape) != slot.shape:
            raise CheckpointError(f"cannot save {slot.key}: expected shape {list(slot.shape)}, "
                                  f"found {list(t.shape)}")
        key = checkpoint.stored_key.get((slot.group, slot.local), slot.key)
        tensors[key] = t.to(dtype) if dtype is not None and t.is_floating_point() else t
    if missing:
        raise CheckpointError(f"cannot save a {cfg.family} checkpoint without {_listing(missing)}",
                              hint="load the checkpoint with load_checkpoint() to keep every group")
    config = dict(cfg.raw)
    if dtype is not None:
        config["dtype" if "dtype" in config and "torch_dtype" not in config else "torch_dtype"] = (
            str(dtype).removeprefix("torch."))
    return write_checkpoint_dir(directory, config, tensors, max_shard_bytes=max_shard_bytes,
                                extra_files=extra_files)
