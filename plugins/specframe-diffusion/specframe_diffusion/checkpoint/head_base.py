"""Which drafter a head-only export was trained on, recorded at export and checked at load.

A head-only export (``dflash_config.head_only``: the path selector, the LiLiCorr lattice head) holds the head
without the frozen drafter it rides on; the pipeline names the drafter separately. A head on another drafter, on
the right drafter with its taps listed in another order, or a path selector over another draft vocabulary of the
same size loaded without a word and rejected most drafts. So:

* the training export records the base drafter in ``config.json`` under :data:`BASE_KEY`:
  ``{"weights_sha256": ..., "source": "checkpoints/smollm2-135m/drafter"}`` (:func:`base_record`; the hash covers
  the drafter's ``*.safetensors`` files, names and bytes, in name order);
* at load (:func:`check_head_base`) the pipeline's drafter must list the taps the head's config records (a
  head-only config is the base drafter's config, so its ``target_layer_ids`` are the ones the head was trained
  with: a CheckpointError otherwise), and its weights must hash to the recorded value (a
  :class:`HeadBaseWarning` otherwise: a re-saved drafter in another dtype is the same model with other bytes);
* a path selector stored with a draft vocabulary must have the drafter's draft vocabulary
  (:func:`check_same_vocabulary`: a CheckpointError naming both files).

Hashing the shipped 17 MB drafter takes about 30 ms, once per pipeline build.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

import torch

from specframe.draft_vocab import DraftVocab
from specframe.errors import CheckpointError
from specframe_diffusion.checkpoint.safetensors_dir import CONFIG_FILE
from specframe_diffusion.draft_config import DraftModelConfig

#: The ``config.json`` key of a head-only export's base-drafter record.
BASE_KEY = "specframe_base_drafter"
_CHUNK = 1 << 20


class HeadBaseWarning(UserWarning):
    """A head-only export runs on a drafter whose weights differ from the one it was trained on."""


def weights_sha256(directory: str | Path) -> str:
    """SHA-256 over the ``*.safetensors`` files of ``directory`` (each name, then its bytes; names in order)."""
    digest = hashlib.sha256()
    for path in sorted(Path(directory).glob("*.safetensors")):
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def base_record(directory: str | Path) -> dict[str, str]:
    """The record a head-only export keeps of its base drafter ``directory``."""
    return {"weights_sha256": weights_sha256(directory), "source": str(directory)}


def check_head_base(head: DraftModelConfig, head_dir: Path, drafter_checkpoint: str | None, *,
                    component: str) -> None:
    """Check a head-only export against the pipeline's drafter checkpoint (module docstring); nothing to check
    for a full checkpoint or a pipeline whose drafter has no checkpoint."""
    if not head.head_only or not drafter_checkpoint:
        return
    drafter_dir = Path(drafter_checkpoint).expanduser()
    drafter = DraftModelConfig.from_file(drafter_dir / CONFIG_FILE)
    if list(drafter.target_layer_ids) != list(head.target_layer_ids):
        raise CheckpointError(
            f"{component}: the head {head_dir} was trained on a drafter tapping target layers "
            f"{list(head.target_layer_ids)} in this order, but the drafter {drafter_dir} lists "
            f"{list(drafter.target_layer_ids)}", hint="list the drafter's dflash_config.target_layer_ids in the order "
                                                     "it was trained with (the head's config.json records it), or "
                                                     "use the drafter the head was trained on")
    record: Any = head.raw.get(BASE_KEY)
    if not isinstance(record, dict) or not isinstance(record.get("weights_sha256"), str):
        return  # exported before the record existed
    if weights_sha256(drafter_dir) != record["weights_sha256"]:
        warnings.warn(f"{component}: the head {head_dir} was trained on the drafter {record.get('source', '?')} "
                      f"(weights sha256 {record['weights_sha256'][:12]}...), but the pipeline's drafter "
                      f"{drafter_dir} has other weights; its corrections will mostly be rejected. Use the drafter "
                      "it was trained on, or retrain the head on this one", HeadBaseWarning, stacklevel=2)


def check_same_vocabulary(selector: DraftVocab | None, drafter: DraftVocab | None, *, component: str) -> None:
    """A head stored with a draft vocabulary runs only on a drafter drafting from the same one."""
    if selector is None or drafter is None:
        return
    if selector.size != drafter.size or not torch.equal(selector.target_ids, drafter.target_ids):
        same = " (same size, other tokens)" if selector.size == drafter.size else ""
        raise CheckpointError(
            f"{component}: the head's draft vocabulary ({selector.source}: {selector.size} tokens) is not the "
            f"drafter's ({drafter.source}: {drafter.size} tokens){same}; its codebook rows would score other tokens",
            hint="give the drafter the draft_vocab the head was trained over (the recipe's head.draft_vocab)")
