"""Where weights live: the one table of dtype names and the one device resolver.

Config fields name dtypes (``float32``, ``bfloat16``, ...) and devices (``cpu``, ``cuda``, ``cuda:1``,
``auto``); every component resolves them here, so a name means the same thing in every section.
``auto`` follows the target when there is one to follow (a drafter or head on its target's device and dtype)
and otherwise means "cuda when available" (devices) or float32 (dtypes).

Example: ``resolve_device("auto", field="drafter.device", follow=target.device)`` is the target's device;
``resolve_dtype("float16", field="target.dtype")`` is ``torch.float16``.
"""

from __future__ import annotations

import torch

from specframe.errors import ConfigError

#: Every dtype name a config may use.
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
                                  "float16": torch.float16}


def resolve_dtype(name: str, *, field: str, follow: torch.dtype | None = None) -> torch.dtype:
    """The dtype ``name`` names; ``auto`` is ``follow`` (float32 when None)."""
    if name == "auto":
        return follow if follow is not None else torch.float32
    try:
        return DTYPES[name]
    except KeyError:
        raise ConfigError(f"unknown {field} '{name}'", hint=f"use one of auto, {', '.join(DTYPES)}") from None


def resolve_device(name: str, *, field: str, follow: torch.device | str | None = None) -> torch.device:
    """The device ``name`` names; ``auto`` is ``follow`` when given, else cuda when available, else cpu."""
    if name == "auto":
        if follow is not None:
            return torch.device(follow)
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(f"{field} '{name}' is not a device name", hint="use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{field} is '{name}' but no CUDA device is available",
                          hint="use device: cpu, or device: auto (cuda only when present, or the target's device)")
    return device
