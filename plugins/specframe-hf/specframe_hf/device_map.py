"""Targets split across devices: accelerate's ``device_map`` with ``max_memory`` and disk offload.

``target: {type: hf, model: ..., device_map: auto | balanced | balanced_low_0 | sequential | {module: device},
max_memory: {0: 20GiB, cpu: 64GiB}, offload_folder: /scratch/offload}`` loads the model through
``from_pretrained(device_map=...)``: accelerate places whole decoder layers on GPUs, the CPU or disk, and its hooks
move each layer's inputs (hidden states, the 4-D tree mask, positions) to where the layer runs. The adapter
then needs only three facts, all computed here:

* every named device exists on this machine, every ``device_map`` key names a module of the model and together
  they cover every weight, every ``max_memory`` value is a size (bytes, or a string with a unit such as
  ``20GiB``) that holds at least the model's largest unsplittable block (one decoder layer; a smaller limit
  would silently push everything to the next device or to disk), and ``offload_folder`` is a writable
  directory: each a clear error naming the field, before anything is loaded;
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

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from specframe.errors import CheckpointError, ConfigError
from specframe.files import OutputError, check_writable_dir

#: The named placements accelerate computes itself.
STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
#: Bytes per unit of a ``max_memory`` size (case-insensitive; a bare number is bytes).
UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$", re.IGNORECASE)
#: Largest memory limit accepted (an exbibyte: far above any machine).
MAX_MEMORY_BYTES = 2**60


def memory_bytes(value: object) -> int:
    """A ``max_memory`` value in bytes: a positive integer (bytes) or a string such as ``"20GiB"`` or
    ``"512MB"``; a ``ValueError`` says what is wrong otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{value!r} is not a size: give bytes as an integer or a string such as '20GiB'")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(value)
        if match is None or match.group(2).lower() not in UNITS:
            raise ValueError(f"{value!r} is not a size: write a number and a unit such as '20GiB', '512MiB' or "
                             f"'8GB' (units: {', '.join(u for u in UNITS if u)})")
        size = int(float(match.group(1)) * UNITS[match.group(2).lower()])
    if not 1 <= size <= MAX_MEMORY_BYTES:
        raise ValueError(f"{value!r} is not a memory limit: it must be a positive size (at most 1 EiB)")
    return size


def _show_bytes(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


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
            out["max_memory"] = {_memory_key(k): memory_bytes(v) for k, v in self.max_memory.items()}
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
        for key, value in (self.max_memory or {}).items():
            _check_device(key, f"target.max_memory['{key}']")
            try:
                memory_bytes(value)
            except ValueError as exc:
                raise ConfigError(f"target.max_memory['{key}']: {exc}",
                                  hint="e.g. max_memory: {0: 20GiB, cpu: 64GiB}") from None
        if self.max_memory is not None and self.device_map is None:
            raise ConfigError("target.max_memory is set but target.device_map is not",
                              hint="add device_map: auto (or balanced) to place the model within these limits")
        if self.offload_folder is not None and self.active:
            try:
                check_writable_dir(Path(self.offload_folder).expanduser(), what="target.offload_folder")
            except OutputError as exc:
                raise ConfigError(exc.message, hint="give a writable directory with room for the offloaded "
                                                    "weights") from None

    def check_model(self, directory: Path, dtype: torch.dtype) -> None:
        """Check the placement against the model's modules (built on the meta device from ``config.json``, no
        weights read): known module names covering every weight, and limits that hold its largest block."""
        if self.tensor_parallel or self.device_map is None:
            return
        model = _meta_model(directory, dtype)
        sizes = _module_sizes(model)
        if isinstance(self.device_map, dict):
            names = dict(model.named_modules())
            unknown = [k for k in self.device_map if k not in names]
            if unknown:
                top = sorted({n.split(".layers.")[0] + (".layers.N" if ".layers." in n else "")
                              for n in names if n and n.count(".") <= 2})
                raise ConfigError(f"target.device_map names {', '.join(map(repr, unknown[:3]))}, which "
                                  f"{'is not a module' if len(unknown) == 1 else 'are not modules'} of this model",
                                  hint=f"module names: {', '.join(top)} (N = 0 .. "
                                       f"{sum(1 for n in names if _is_layer(n)) - 1}); '' places the whole model")
            uncovered = [n for n, _ in _weights(model) if not any(n == k or n.startswith(k + ".") or k == ""
                                                                for k in self.device_map)]
            if uncovered:
                owners = sorted({n.rsplit(".", 1)[0] for n in uncovered})
                raise ConfigError(f"target.device_map places no device for {len(uncovered)} weights, in "
                                  f"{', '.join(owners[:4])}{' ...' if len(owners) > 4 else ''}",
                                  hint="give every module a device (GPU index, cpu or disk), or use "
                                       "device_map: auto")
        block_name, block = _largest_block(model, sizes)
        for key, value in (self.max_memory or {}).items():
            limit = memory_bytes(value)
            if limit < block:
                raise ConfigError(f"target.max_memory['{key}'] is {value!r} ({_show_bytes(limit)}), less than "
                                  f"the model's largest block ({block_name}, {_show_bytes(block)}): nothing "
                                  "could be placed there and every layer would move on (to disk, running "
                                  "many times slower)",
                                  hint="a bare number is bytes; write the unit, e.g. '20GiB'")


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


def _meta_model(directory: Path, dtype: torch.dtype) -> Any:
    """The model of ``directory``'s config.json on the meta device (no memory, no weights read)."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(directory, local_files_only=True)
        with init_empty_weights():
            return AutoModelForCausalLM.from_config(config, dtype=dtype)
    except Exception as exc:  # transformers raises many types for a config it cannot build
        raise CheckpointError(f"cannot build the model of {directory / 'config.json'}: {type(exc).__name__}: "
                              f"{str(exc).strip()[:200]}", hint="the directory needs the config.json that "
                                                                "save_pretrained wrote") from None


def _weights(model: Any) -> list[tuple[str, torch.Tensor]]:
    return [*model.named_parameters(), *model.named_buffers()]


def _module_sizes(model: Any) -> dict[str, int]:
    from accelerate.utils import compute_module_sizes

    return dict(compute_module_sizes(model))


def _is_layer(name: str) -> bool:
    head, _, tail = name.rpartition(".layers.")
    return bool(head) and tail.isdigit()


def _largest_block(model: Any, sizes: dict[str, int]) -> tuple[str, int]:
    """The largest module accelerate never splits across devices (a decoder layer), or the largest weight."""
    keep = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [(name, sizes.get(name, 0)) for name, module in model.named_modules() if type(module).__name__ in keep]
    if not blocks:
        blocks = [(name, sizes.get(name, 0)) for name, _ in _weights(model)]
    return max(blocks, key=lambda item: item[1], default=("the model", 0))


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
