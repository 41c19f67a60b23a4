"""Targets split across devices: accelerate's ``device_map`` with ``max_memory`` and disk offload.

``target: {type: hf, model: ..., device_map: auto | balanced | balanced_low_0 | sequential | {module: device},
max_memory: {0: 20GiB, cpu: 64GiB}, offload_folder: /scratch/offload}`` loads the model through
``from_pretrained(device_map=...)``: accelerate places whole decoder layers on GPUs, the CPU or disk, and its hooks
move each layer's inputs (hidden states, the 4-D tree mask, positions) to where the layer runs. The adapter
then needs only three facts, all computed here:

* every named device exists on this machine (a clear error otherwise, before anything is loaded);
* the *execution device* of the embedding, where input ids, the tree mask and the random streams go (the
  first GPU of the map; the CPU when the map has none; layers offloaded to CPU or disk run on it);
* the set of compute devices, which the stage clocks synchronise.

KV compaction already moves its indices to each layer's cache device, so tree attention and commits work for
layers on different devices unchanged.

``tensor_parallel: true`` instead shards every layer over the ranks of a ``torchrun`` launch with transformers'
own tensor-parallel plan (``tp_plan="auto"``; NCCL on GPUs, gloo on CPUs): each rank holds a slice of the
attention heads and MLP columns, its KV cache holds its heads, and the logits come back whole on every rank.
Every rank runs the same decode loop on the same prompt with the same random streams, so they take the same
decisions; the tree mask covers all heads and KV compaction acts on each rank's own heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from specframe.errors import ConfigError

#: The named placements accelerate computes itself.
STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")


@dataclass(frozen=True)
class DeviceMap:
    """A target's placement request (``device_map`` None: the whole model on one device)."""

    device_map: str | dict[str, int | str] | None = None
    max_memory: dict[int | str, int | str] | None = None
    offload_folder: str | None = None
    tensor_parallel: bool = False

    @property
    def active(self) -> bool:
        return self.device_map is not None or self.tensor_parallel

    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``from_pretrained`` (after :meth:`check`)."""
        if self.tensor_parallel:
            from transformers import DistributedConfig

            return {"distributed_config": DistributedConfig(tp_plan="auto")}
        out: dict[str, Any] = {"device_map": self.device_map}
        if self.max_memory is not None:
            out["max_memory"] = {_memory_key(k): v for k, v in self.max_memory.items()}
        if self.offload_folder is not None:
            out["offload_folder"] = self.offload_folder
        return out

    def check(self) -> None:
        """Refuse devices this machine does not have, disk offload without a folder, tensor parallelism without
        torchrun."""
        if self.tensor_parallel:
            self._check_tensor_parallel()
        if isinstance(self.device_map, str) and self.device_map not in STRATEGIES:
            raise ConfigError(f"target.device_map: unknown strategy '{self.device_map}'",
                              hint=f"use one of {', '.join(STRATEGIES)}, or a mapping {{module: device}}")
        if isinstance(self.device_map, dict):
            for module, device in self.device_map.items():
                _check_device(device, f"target.device_map['{module}']")
            if "disk" in self.device_map.values() and not self.offload_folder:
                raise ConfigError("target.device_map puts modules on 'disk' but target.offload_folder is not set",
                                  hint="add offload_folder: /path/with/space for the offloaded weights")
        for key in self.max_memory or {}:
            _check_device(key, f"target.max_memory['{key}']")
        if self.max_memory is not None and self.device_map is None:
            raise ConfigError("target.max_memory is set but target.device_map is not",
                              hint="add device_map: auto (or balanced) to place the model within these limits")


    def _check_tensor_parallel(self) -> None:
        if self.device_map is not None or self.max_memory is not None:
            raise ConfigError("target.tensor_parallel cannot be combined with target.device_map or max_memory",
                              hint="shard the model over the torchrun ranks, or split it with a device_map")
        import torch.distributed as dist

        from specframe.distributed import from_env

        from_env()  # joins the launch's process group (NCCL on GPUs, gloo on CPUs)
        if not dist.is_initialized() or dist.get_world_size() < 2:
            raise ConfigError("target.tensor_parallel: true needs a torchrun launch with two or more ranks",
                              hint="torchrun --nproc-per-node N -m specframe run ... (docs/scale-out.md)")


def _memory_key(key: int | str) -> int | str:
    """accelerate's spelling: GPU indices as ints, 'cpu', 'disk', 'mps'."""
    if isinstance(key, str) and key.isdigit():
        return int(key)
    if isinstance(key, str) and key.startswith("cuda:"):
        return int(key.split(":", 1)[1])
    return key


def _check_device(device: int | str, field: str) -> None:
    if device in ("cpu", "disk"):
        return
    key = _memory_key(device)
    if isinstance(key, int):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not 0 <= key < count:
            raise ConfigError(
                f"{field} names CUDA device {key}, but this machine has {count} CUDA device(s)",
                hint="use an index below the device count (see nvidia-smi and CUDA_VISIBLE_DEVICES), cpu or disk"
                if count else "no GPU is visible here: use cpu or disk, or device_map: auto")
        return
    if key == "mps" and torch.backends.mps.is_available():
        return
    raise ConfigError(f"{field}: unknown or unavailable device '{device}'",
                      hint="devices are GPU indices (0, 1, ... or cuda:N), cpu or disk")


def execution_device(model: Any) -> torch.device:
    """Where inputs go: the first accelerator in the model's placement, else the CPU (one-device models: theirs)."""
    placement = getattr(model, "hf_device_map", None)
    if not placement:
        return next(model.parameters()).device
    devices = compute_devices(model)
    return devices[0] if devices else torch.device("cpu")


def compute_devices(model: Any) -> tuple[torch.device, ...]:
    """The accelerators a placed model computes on, in map order (CPU and disk placements excluded)."""
    placement = getattr(model, "hf_device_map", None) or {}
    found = []
    for device in placement.values():
        if device in ("cpu", "disk"):
            continue
        found.append(torch.device("cuda", device) if isinstance(device, int) else torch.device(device))
    return tuple(dict.fromkeys(found))


def parameter_dtype(model: Any) -> torch.dtype:
    """The weights' dtype (offloaded weights sit on the meta device but keep their dtype)."""
    return next(model.parameters()).dtype
