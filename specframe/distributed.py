"""The process group of a ``torchrun`` launch: rank, world size, and the few collectives specframe needs.

specframe never launches processes or moves data itself: ``torchrun`` (``python -m torch.distributed.run``)
starts the ranks and sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
:func:`from_env` joins the group through ``torch.distributed`` (NCCL when CUDA is present, gloo otherwise) and
pins each rank to its local GPU. Without those variables (a plain ``specframe ...``) the context is a single
rank and no process group is created.

Errors must not leave a rank waiting in a collective for a peer that gave up, so every check that can fail
goes through :meth:`DistContext.agree`: all ranks exchange their error (or None) and all raise the first one.
"""

from __future__ import annotations

import atexit
import datetime
import os
from dataclasses import dataclass
from typing import Any

import torch

from specframe.errors import ConfigError, SpecframeError

#: How long a collective waits for the slowest rank (a bench shard may take hours; a dead peer fails faster).
DEFAULT_TIMEOUT = datetime.timedelta(hours=12)


class DistributedError(SpecframeError):
    """Another rank failed, or the launch environment is inconsistent."""


@dataclass(frozen=True)
class DistContext:
    """This process's place in the launch (``world_size == 1``: not distributed)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def agree(self, error: SpecframeError | None) -> None:
        """Exchange each rank's error; raise the first one on every rank (nothing when all succeeded)."""
        if not self.distributed:
            if error is not None:
                raise error
            return
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.world_size
        payload = None if error is None else (type(error).__name__, error.message, error.where, error.hint)
        dist.all_gather_object(gathered, payload)
        for rank, item in enumerate(gathered):
            if item is None:
                continue
            if rank == self.rank and error is not None:
                raise error
            _, message, where, hint = item
            raise DistributedError(f"rank {rank}: {message}", where=where, hint=hint)

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (every rank gets the same answer)."""
        if not self.distributed:
            return flag
        import torch.distributed as dist

        value = torch.tensor([1.0 if flag else 0.0])
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def mean(self, value: float) -> float:
        """The mean of ``value`` over the ranks."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        total = torch.tensor([float(value)], dtype=torch.float64)
        dist.all_reduce(total)
        return float(total.item()) / self.world_size

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer",
                          hint="launch with torchrun, which sets RANK, WORLD_SIZE and LOCAL_RANK") from None


def from_env(*, timeout: datetime.timedelta = DEFAULT_TIMEOUT, backend: str | None = None) -> DistContext:
    """The launch's context; joins the process group when ``WORLD_SIZE`` > 1 (idempotent).

    ``backend`` None picks NCCL when CUDA is present and gloo otherwise; work that stays on the CPU (the
    trainer) asks for gloo.
    """
    world = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local = _env_int("LOCAL_RANK", rank)
    if world < 1 or not 0 <= rank < world:
        raise ConfigError(f"RANK={rank} does not fit WORLD_SIZE={world}", hint="launch with torchrun")
    ctx = DistContext(rank=rank, world_size=world, local_rank=local)
    if not ctx.distributed:
        return ctx
    import torch.distributed as dist

    if not dist.is_initialized():
        use_cuda = torch.cuda.is_available()
        if use_cuda:
            torch.cuda.set_device(local % torch.cuda.device_count())  # "cuda" below means this rank's GPU
        chosen = backend or ("nccl" if use_cuda else "gloo")
        dist.init_process_group(backend=chosen, timeout=timeout)
        atexit.register(_destroy)  # a group left open aborts the process at exit (its threads are still joinable)
    return ctx


def _destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
