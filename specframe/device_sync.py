"""Device-correct timing and host-synchronisation accounting for the decode loop.

On an accelerator, kernels run asynchronously: reading the host clock right after a stage returns measures the
kernel *launches*, not the work. :class:`StageClock` synchronises the device before every reading, and only
when per-stage timing is wanted (a synchronisation costs latency of its own), so an untimed decode pays nothing.

A *host synchronisation* is any read of a device value by Python (``.item()``, ``int(t)``, ``bool(t)``,
``.tolist()``, ``.cpu()``, ``.to("cpu")`` from an accelerator) or an operation whose output size depends on
device data (``nonzero``, boolean indexing, ``masked_select``, ``unique``). :class:`HostSyncCounter` counts
them with a ``TorchFunctionMode``, so the count is the same on a CPU (where they are free) as on a GPU (where
each one stalls the launch queue); ``torch.cuda.set_sync_debug_mode`` is the accelerator's own check
(``benchmarks/accelerator_check.py``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def _cuda_sync(device: torch.device) -> None:
    torch.cuda.synchronize(device)


def _xpu_sync(device: torch.device) -> None:
    torch.xpu.synchronize(device)


def _mps_sync(device: torch.device) -> None:
    torch.mps.synchronize()


#: How each device type waits for its queued work ("cpu" and "meta" run synchronously).
SYNCHRONIZERS: dict[str, Callable[[torch.device], None]] = {"cuda": _cuda_sync, "xpu": _xpu_sync, "mps": _mps_sync}


def synchronize(device: torch.device | str) -> None:
    """Wait until ``device`` has finished its queued work (a no-op on CPU)."""
    dev = torch.device(device)
    sync = SYNCHRONIZERS.get(dev.type)
    if sync is not None:
        sync(dev)


class StageClock:
    """``clock()`` returns ``time.perf_counter_ns()``; in a timed round it first waits for ``devices``.

    ``devices`` are every device the pipeline's stages run on (target shards, drafter, corrector), so a stage
    on a second GPU is timed correctly too. On a CPU every round is timed exactly for free. On an accelerator a
    synchronisation stalls the launch queue, so with ``sync`` the clock waits only in one round out of ``every``
    (:meth:`start_round` says which); the other rounds' readings are launch times and are not recorded.
    """

    def __init__(self, devices: tuple[torch.device, ...], *, sync: bool, every: int = 16) -> None:
        self.devices = tuple(d for d in dict.fromkeys(torch.device(x) for x in devices) if d.type in SYNCHRONIZERS)
        self.sync = sync and bool(self.devices)
        self.every = max(1, every)
        self._round = -1
        self._waiting = self.sync

    def start_round(self) -> bool:
        """Begin a round; True when its stage times are exact (always without accelerators)."""
        self._round += 1
        if not self.devices:
            return True
        self._waiting = self.sync and self._round % self.every == 0
        return self._waiting

    def __call__(self) -> int:
        if self._waiting:
            for device in self.devices:
                synchronize(device)
        return time.perf_counter_ns()


#: Tensor methods that read a device value into Python.
_READS = frozenset({"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy", "equal",
                    "allclose"})
#: Operations whose output shape depends on the data (the host must wait for the count).
_DATA_DEPENDENT = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere"})


def _name(func: Any) -> str:
    return str(getattr(func, "__name__", func))


def _is_sync(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if name in _READS or name in _DATA_DEPENDENT:
        return True
    if name == "to":
        target = kwargs.get("device", args[1] if len(args) > 1 else None)
        # A copy to the host from an accelerator (a same-device `.to` is free, and device-to-device is async).
        source = args[0] if args else None
        return (isinstance(target, str | torch.device) and torch.device(target).type == "cpu"
                and isinstance(source, torch.Tensor) and source.device.type != "cpu")
    if name == "__getitem__" and len(args) > 1:
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index)
    return False


class HostSyncCounter(TorchFunctionMode):
    """Counts the host synchronisations of the torch code run inside ``with HostSyncCounter() as c:``.

    ``c.total`` is the count and ``c.by_op`` the count per operation name. Counting slows every torch call, so
    it is for tests, the demo's diagnostic column and the accelerator check, never for timed runs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.by_op: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_op.values())

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = _name(func)
        if _is_sync(name, args, kwargs):
            self.by_op[name] += 1
        return func(*args, **kwargs)
