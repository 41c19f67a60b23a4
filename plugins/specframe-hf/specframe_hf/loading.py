"""Loading a causal LM and its tokenizer from a local directory, strictly offline.

``target.model`` must name a directory written by ``save_pretrained`` (config.json + weights). Nothing is
downloaded: every ``from_pretrained`` call passes ``local_files_only=True``, and a missing directory or file
is a :class:`~specframe.errors.CheckpointError` naming the path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from specframe.errors import CheckpointError

#: Files whose presence means the directory ships a tokenizer.
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def model_directory(path: str) -> Path:
    """The checked model directory: it exists and holds a config.json."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise CheckpointError(
            f"target.model directory '{directory}' does not exist",
            hint="give a local directory written by save_pretrained (config.json + weights); "
            "specframe never downloads models",
        )
    if not (directory / "config.json").is_file():
        raise CheckpointError(
            f"target.model directory '{directory}' has no config.json",
            hint="point target.model at the directory that save_pretrained wrote",
        )
    return directory


@contextmanager
def without_progress_bars() -> Iterator[None]:
    """Silence transformers' progress bars ("Loading weights") for the block: loading a local target takes
    about a second, and commands print only their own output."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def load_model(directory: Path, *, dtype: torch.dtype, device: torch.device, attn: str) -> Any:
    """``AutoModelForCausalLM`` from ``directory`` (local files only), in eval mode on ``device``."""
    from transformers import AutoModelForCausalLM

    try:
        with without_progress_bars():
            model = AutoModelForCausalLM.from_pretrained(
                directory, local_files_only=True, dtype=dtype, attn_implementation=attn
            )
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"could not load a causal LM from '{directory}': {type(exc).__name__}: {exc}",
            hint="the directory needs config.json and model weights (*.safetensors or pytorch_model.bin)",
        ) from None
    return model.to(device).eval()


def load_tokenizer(directory: Path) -> Any:
    """The directory's tokenizer, or None when it ships none."""
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(directory, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"could not load the tokenizer in '{directory}': {type(exc).__name__}: {exc}",
            hint="re-save it with tokenizer.save_pretrained(directory), or remove the broken tokenizer files",
        ) from None
