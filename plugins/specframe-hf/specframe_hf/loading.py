"""Loading a causal LM and its tokenizer from a local directory, strictly offline.

``target.model`` must name a directory written by ``save_pretrained`` (config.json + weights). Nothing is
downloaded: every ``from_pretrained`` call passes ``local_files_only=True``, and a missing directory or file
is a :class:`~specframe.errors.CheckpointError` naming the path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from specframe.errors import CheckpointError, ConfigError
from specframe_hf.device_map import DeviceMap

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

#: Files whose presence means the directory ships a tokenizer.
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def resolve_device(device: str) -> torch.device:
    """``cpu`` / ``cuda`` / ``auto`` (cuda when available) as a torch device."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("target.device is 'cuda' but no CUDA device is available",
                          hint="use device: cpu, or device: auto to pick cuda only when present")
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"unknown target.device '{device}'", hint="use cpu, cuda or auto")
    return torch.device(device)


def resolve_dtype(dtype: str) -> torch.dtype:
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ConfigError(f"unknown target.dtype '{dtype}'", hint=f"use one of {', '.join(DTYPES)}") from None


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


def load_model(directory: Path, *, dtype: torch.dtype, device: torch.device, attn: str,
               placement: DeviceMap | None = None) -> Any:
    """``AutoModelForCausalLM`` from ``directory`` (local files only), in eval mode on ``device``, or split across
    devices by accelerate when ``placement`` has a device map (:mod:`specframe_hf.device_map`)."""
    from transformers import AutoModelForCausalLM

    if placement is not None:
        placement.check()
    split = placement is not None and placement.active
    try:
        model = AutoModelForCausalLM.from_pretrained(
            directory, local_files_only=True, dtype=dtype, attn_implementation=attn,
            **(placement.load_kwargs() if split else {}),  # type: ignore[union-attr]
        )
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"could not load a causal LM from '{directory}': {type(exc).__name__}: {exc}",
            hint="the directory needs config.json and model weights (*.safetensors or pytorch_model.bin)",
        ) from None
    return model.eval() if split else model.to(device).eval()


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
