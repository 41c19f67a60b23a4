"""What machine a measurement ran on: the CPU model and its flags, native bf16 support, threads and versions.

Benchmarks name the CPU they ran on (a speedup measured on an AMD EPYC without bf16 says little about an Intel
Xeon with AMX), and the kernel and profile caches are keyed by it. Everything is read from ``/proc/cpuinfo``
and ``lscpu`` (Linux) with ``platform`` as the fallback; nothing fails where they are missing.

**Native bf16** on a CPU means the ``amx_bf16`` or ``avx512_bf16`` flag (Intel Sapphire Rapids and later, AMD
Zen 4 and later): bf16 matrix products then run at about twice the fp32 rate or better. Without them torch
still computes in bf16, by converting to fp32, which is slower than fp32 itself. On a GPU it is
``torch.cuda.is_bf16_supported()`` (Ampere and later).

Example::

    cpu_model()              # "AMD EPYC"
    native_bf16("cpu")       # False on the development machine
    machine_summary()        # {"cpu": "AMD EPYC", "vendor": "AuthenticAMD", "cores": 2, "bf16_flags": [], ...}
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

#: CPU flags that mean bf16 matrix products in hardware.
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return []


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``), else what ``platform`` knows."""
    for line in _cpuinfo():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> frozenset[str]:
    """The first CPU's feature flags (empty where ``/proc/cpuinfo`` is missing)."""
    for line in _cpuinfo():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def native_bf16(device: str | torch.device = "cpu") -> bool:
    """Whether ``device`` computes bf16 matrix products in hardware (see the module docstring)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return dev.type == "cpu" and any(flag in cpu_flags() for flag in BF16_FLAGS)


def lscpu() -> dict[str, str]:
    """``lscpu``'s fields (``Model name``, ``Vendor ID``, ``CPU(s)``, ...); empty where it is missing."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    fields = (line.partition(":") for line in out.splitlines())
    return {key.strip(): value.strip() for key, sep, value in fields if sep and value.strip()}


def machine_identity() -> dict[str, Any]:
    """What tells two machines' speeds apart, recorded with every benchmark result so that ``report`` pairs only
    results measured on the same kind of machine: the CPU model, its core count and the GPU (None without one).

    Example: ``{"cpu": "AMD EPYC 9B45", "cores": 2, "gpu": None}``."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(),
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}


def machine_summary() -> dict[str, Any]:
    """The facts a benchmark result is reported with."""
    info = lscpu()
    return {
        "cpu": info.get("Model name") or cpu_model(),
        "vendor": info.get("Vendor ID"),
        "hypervisor": info.get("Hypervisor vendor"),
        "cores": os.cpu_count(),
        "bf16_flags": sorted(f for f in BF16_FLAGS if f in cpu_flags()),
        "native_bf16_cpu": native_bf16("cpu"),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
