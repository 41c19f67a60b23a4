"""The process group of a ``torchrun`` launch: rank, world size, and the few collectives specframe needs.

specframe never launches processes or moves data itself: ``torchrun`` (``python -m torch.distributed.run``)
starts the ranks and sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
:func:`from_env` joins the group through ``torch.distributed`` (NCCL when CUDA is present, gloo otherwise) and
pins each rank to its local GPU. Without those variables (a plain ``specframe ...``) the context is a single
rank and no process group is created.

Errors must not leave a rank waiting in a collective for a peer that gave up, so every check that can fail
goes through :meth:`DistContext.agree`: all ranks exchange their error (or None) and all raise the first one.

The launch environment is checked before anything waits: ``WORLD_SIZE`` > 1 needs ``RANK``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT`` (what ``torchrun`` sets), each a valid value; anything else is a one-screen
:class:`DistributedError` saying how to launch. Joining the group waits for the other ranks at most
``SPECFRAME_RENDEZVOUS_TIMEOUT`` seconds (default :data:`DEFAULT_RENDEZVOUS_S`), says what it waits for when
that takes more than a few seconds, and names the missing ranks when it gives up; collectives afterwards wait
up to :data:`DEFAULT_TIMEOUT` (a slow shard is not a dead peer).
"""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

import torch

from specframe.errors import SpecframeError

#: How long a collective waits for the slowest rank (a bench shard may take hours; a dead peer fails faster).
DEFAULT_TIMEOUT = datetime.timedelta(hours=12)
#: Seconds joining the process group waits for the other ranks (``SPECFRAME_RENDEZVOUS_TIMEOUT`` overrides it).
DEFAULT_RENDEZVOUS_S = 300
RENDEZVOUS_ENV = "SPECFRAME_RENDEZVOUS_TIMEOUT"
#: Seconds of waiting after which a rank says what it is waiting for.
WAIT_NOTICE_S = 5.0
#: Variables torchrun sets for every rank; a distributed launch without them was not started by torchrun.
LAUNCH_VARS = ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
LAUNCH_HINT = ("start every rank with torchrun, which sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and "
               "MASTER_PORT: torchrun --nproc-per-node N -m specframe ...; or unset WORLD_SIZE for one process")


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
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise DistributedError(f"environment variable {name}={raw!r} is not a whole number",
                               hint=LAUNCH_HINT) from None


def rendezvous_timeout() -> datetime.timedelta:
    """``SPECFRAME_RENDEZVOUS_TIMEOUT`` seconds (1 to a week), default :data:`DEFAULT_RENDEZVOUS_S`."""
    raw = os.environ.get(RENDEZVOUS_ENV, "").strip()
    if not raw:
        return datetime.timedelta(seconds=DEFAULT_RENDEZVOUS_S)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not 1 <= seconds <= 7 * 24 * 3600:  # NaN fails too
        raise DistributedError(f"{RENDEZVOUS_ENV}={raw!r} is not a number of seconds from 1 to 604800",
                               hint=f"e.g. {RENDEZVOUS_ENV}=600 to wait ten minutes for the other ranks")
    return datetime.timedelta(seconds=seconds)


def check_launch() -> DistContext:
    """This process's place in the launch from the environment, refusing an inconsistent one (see the module
    docstring); nothing is joined or waited for."""
    world = _env_int("WORLD_SIZE", 1)
    if world < 1 or world > 1 << 20:
        raise DistributedError(f"WORLD_SIZE={world} is not a number of ranks", hint=LAUNCH_HINT)
    if world == 1:
        rank, local = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
        if rank != 0:
            raise DistributedError(f"RANK={rank} does not fit WORLD_SIZE=1", hint=LAUNCH_HINT)
        return DistContext(rank=0, world_size=1, local_rank=max(local, 0))
    missing = [name for name in LAUNCH_VARS if not os.environ.get(name, "").strip()]
    if missing:
        raise DistributedError(f"WORLD_SIZE={world} is set but {', '.join(missing)} "
                               f"{'is' if len(missing) == 1 else 'are'} not: this process was not started by "
                               "torchrun, and would wait for ranks that never come", hint=LAUNCH_HINT)
    rank, local, port = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0), _env_int("MASTER_PORT", 0)
    if not 0 <= rank < world:
        raise DistributedError(f"RANK={rank} does not fit WORLD_SIZE={world} (ranks are 0 .. {world - 1})",
                               hint=LAUNCH_HINT)
    if not 0 <= local < world:
        raise DistributedError(f"LOCAL_RANK={local} does not fit WORLD_SIZE={world}", hint=LAUNCH_HINT)
    if not 1 <= port <= 65535:
        raise DistributedError(f"MASTER_PORT={port} is not a TCP port (1 to 65535)", hint=LAUNCH_HINT)
    rendezvous_timeout()
    return DistContext(rank=rank, world_size=world, local_rank=local)


def from_env(*, timeout: datetime.timedelta = DEFAULT_TIMEOUT, backend: str | None = None) -> DistContext:
    """The launch's context; joins the process group when ``WORLD_SIZE`` > 1 (idempotent).

    ``backend`` None picks NCCL when CUDA is present and gloo otherwise; work that stays on the CPU (the
    trainer) asks for gloo. ``timeout`` bounds collectives; joining is bounded by :func:`rendezvous_timeout`.
    """
    ctx = check_launch()
    if not ctx.distributed:
        return ctx
    import torch.distributed as dist

    if not dist.is_initialized():
        join = rendezvous_timeout()
        use_cuda = torch.cuda.is_available()
        if use_cuda:
            torch.cuda.set_device(ctx.local_rank % torch.cuda.device_count())  # "cuda" below means this rank's GPU
        _join(backend or ("nccl" if use_cuda else "gloo"), ctx, join=join, timeout=timeout)
        atexit.register(_destroy)  # a group left open aborts the process at exit (its threads are still joinable)
    return ctx


def _join(backend: str, ctx: DistContext, *, join: datetime.timedelta, timeout: datetime.timedelta) -> None:
    """Rendezvous (waiting at most ``join`` for the other ranks, with a notice after a few seconds), then the
    process group with ``timeout`` for its collectives."""
    import torch.distributed as dist
    from torch.distributed import rendezvous

    address = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    waiting = (f"rank {ctx.rank} of {ctx.world_size} is waiting for the other {ctx.world_size - 1} rank(s) at "
               f"{address} (up to {join.total_seconds():.0f} s; {RENDEZVOUS_ENV} changes it)")
    notice = threading.Timer(WAIT_NOTICE_S, lambda: print(f"specframe: {waiting}", file=sys.stderr, flush=True))
    notice.daemon = True
    notice.start()
    try:
        store, _, _ = next(rendezvous("env://", ctx.rank, ctx.world_size, timeout=join))
        store.set_timeout(join)  # the group's first exchange also waits for every rank
        dist.init_process_group(backend=backend, store=store, rank=ctx.rank, world_size=ctx.world_size,
                                timeout=timeout)
        store.set_timeout(timeout)  # later exchanges (a lazily created NCCL communicator) wait like collectives
    except (RuntimeError, ValueError, OSError) as exc:  # torch's store and network errors derive from these
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DistributedError(f"rank {ctx.rank} of {ctx.world_size} could not join the other ranks at {address} "
                               f"within {join.total_seconds():.0f} s ({reason})",
                               hint=f"start all {ctx.world_size} ranks (torchrun --nproc-per-node N starts them "
                                    f"together); a slower start needs {RENDEZVOUS_ENV}=SECONDS") from None
    finally:
        notice.cancel()


def _destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
