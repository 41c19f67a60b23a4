"""Loading the draft model from a local directory and checking that it fits the target.

Nothing is downloaded (``local_files_only``) and nothing is unpickled: the directory is checked by
:func:`specframe.tensor_files.check_model_directory` (config.json, safetensors weights inside the directory) and
loaded with ``use_safetensors=True``. Problems become :class:`~specframe.errors.CheckpointError` or
:class:`~specframe.errors.ConfigError` naming the directory or the field and saying how to fix them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from specframe.errors import CheckpointError, ConfigError
from specframe.interfaces import SharedEmbeddings, TargetModel
from specframe.placement import resolve_device, resolve_dtype
from specframe.tensor_files import check_loading_info, check_model_directory
from specframe_example_lmdraft.config import LMDraftConfig

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def model_directory(path: str) -> Path:
    directory = Path(path).expanduser()
    if not (directory / "config.json").is_file():
        raise CheckpointError(f"drafter.model '{directory}' is not a model directory (no config.json)",
                              hint="give a local directory written by save_pretrained; nothing is downloaded")
    return directory


def resolve_placement(config: LMDraftConfig, target: TargetModel | None) -> tuple[torch.dtype, torch.device]:
    """``auto`` dtype and device follow a target with :class:`~specframe.interfaces.SharedEmbeddings`, else
    float32 on the CPU."""
    shared = target if isinstance(target, SharedEmbeddings) else None
    dtype = resolve_dtype(config.dtype, field="drafter.dtype", follow=shared.dtype if shared else None)
    device = resolve_device(config.device, field="drafter.device",
                            follow=shared.device if shared else torch.device("cpu"))
    return dtype, device


def load_draft_model(directory: Path, dtype: torch.dtype, device: torch.device) -> Any:
    from transformers import AutoModelForCausalLM

    check_model_directory(directory, role="drafter.model")
    model: Any
    info: Any  # transformers' loading report
    try:
        model, info = AutoModelForCausalLM.from_pretrained(directory, local_files_only=True, use_safetensors=True,
                                                           dtype=dtype, output_loading_info=True)
    except Exception as exc:  # transformers raises many types for a directory it cannot use
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise CheckpointError(f"could not load a causal LM from drafter.model '{directory}': "
                              f"{type(exc).__name__}: {first}",
                              hint="the directory needs config.json and weights of a causal LM") from None
    check_loading_info(info, directory, role="drafter.model")
    return model.to(device).eval()


def check_fits_target(model: Any, directory: Path | None, target: TargetModel | None, check_tokenizer: bool) -> int:
    """Return the target's vocabulary size after checking the draft model can propose in it."""
    if target is None:
        raise ConfigError("drafter 'lm_draft' needs the target (its vocabulary), but none was built",
                          hint="give the pipeline a `target:` section")
    vocab = int(target.vocab_size)
    draft_vocab = int(model.get_output_embeddings().weight.shape[0])
    if draft_vocab < vocab:
        raise ConfigError(f"the draft model has {draft_vocab} output tokens but the target's vocabulary has {vocab}",
                          where="drafter.model", hint="use a draft model that shares the target's tokenizer")
    if check_tokenizer and directory is not None and target.tokenizer is not None and \
            any((directory / name).is_file() for name in TOKENIZER_FILES):
        from transformers import AutoTokenizer

        try:
            draft_tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        except Exception as exc:  # a broken tokenizer file surfaces as many exception types
            raise CheckpointError(f"could not load the tokenizer in drafter.model '{directory}': "
                                  f"{type(exc).__name__}: {str(exc).strip()[:300]}",
                                  hint="re-save it with tokenizer.save_pretrained, or remove the broken files "
                                       "(set drafter.check_tokenizer: false to skip the comparison)") from None
        if draft_tokenizer.get_vocab() != target.tokenizer.get_vocab():
            raise ConfigError(f"the tokenizer in '{directory}' differs from the target's",
                              where="drafter.model", hint="draft and target must share one tokenizer "
                              "(or set drafter.check_tokenizer: false if you know the ids agree)")
    return vocab
