"""`RoundCounters`: what each round of the decode loop costs the host, counted, for tests of an engine's round.

Per round (:func:`specframe.decode.rounds.run_round`, as the decode loop calls it) it records a `RoundCount`:

* ``reads``: device-to-host reads, counted by :class:`specframe.device_sync.HostSyncCounter` (the same count on a
  CPU as on a GPU);
* ``copies``: host-to-device copies: tensors built from Python data (``torch.tensor``, ``torch.as_tensor``) and
  host tensors moved to another device (``.to``, ``copy_``). On a CPU target nothing moves, but each of these is a
  copy over the bus when the target sits on an accelerator, so the count is the accelerator's; ``target_copies``
  are those the target's own ``forward_tree`` and ``commit`` made;
* ``kv_allocations``: allocations of the target's KV memory during the round (the target's rows expose
  ``kv_allocations``, as the ``hf`` adapter's lean engine does; None for rows that do not);
* ``shapes``: the ``[B, N]`` tree shapes the round's target forwards ran.

Example::

    with RoundCounters() as counters:
        pipe.generate_batch(prompts, 24, batch_size=8)
    assert all(r.reads == 1 for r in counters.rounds)
    assert counters.kv_allocations_after_admission == 0
    print(counters.distinct_shapes)          # {(8, 8), (7, 8), ...}: what a capture would have to cover

The counters wrap ``run_round`` in :mod:`specframe.decode.loop` while the ``with`` block runs and restore it after;
counting slows every torch call, so they are for tests, never for timed runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

import specframe.decode.loop as loop
from specframe.device_sync import HostSyncCounter

#: Factories that copy Python (host) data into a tensor.
_FROM_HOST = frozenset({"tensor", "as_tensor"})


class TransferCounter(HostSyncCounter):
    """:class:`HostSyncCounter` that also counts host-to-device copies (``copies``; see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.copies = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _FROM_HOST and args and not isinstance(args[0], torch.Tensor):
            self.copies += 1
        elif name == "to" and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu":
            target = kwargs.get("device", args[1] if len(args) > 1 else None)
            if isinstance(target, str | torch.device) and torch.device(target).type != "cpu":
                self.copies += 1
        elif name == "copy_" and len(args) > 1 and isinstance(args[1], torch.Tensor) \
                and args[1].device.type == "cpu" and isinstance(args[0], torch.Tensor) \
                and args[0].device.type != "cpu":
            self.copies += 1
        return super().__torch_function__(func, types, args, kwargs)


@dataclass(frozen=True)
class RoundCount:
    """One round's counts (see the module docstring)."""

    reads: int
    copies: int
    target_copies: int  # the copies the target's forward_tree and commit made
    kv_allocations: int | None
    shapes: tuple[tuple[int, int], ...]
    rows: int  # rows in flight during the round


@dataclass
class RoundCounters:
    """Counts every round of the decode loop run inside ``with RoundCounters() as counters:``."""

    rounds: list[RoundCount] = field(default_factory=list)

    def __enter__(self) -> RoundCounters:
        self._inner = loop.run_round
        loop.run_round = self._counted
        return self

    def __exit__(self, *exc: object) -> None:
        loop.run_round = self._inner

    @property
    def distinct_shapes(self) -> set[tuple[int, int]]:
        """Every tree shape a target forward ran in the counted rounds."""
        return {s for r in self.rounds for s in r.shapes}

    @property
    def kv_allocations_after_admission(self) -> int | None:
        """KV-memory allocations inside rounds (admissions are outside them); None: the rows do not count them."""
        counts = [r.kv_allocations for r in self.rounds]
        return None if not counts or None in counts else sum(c for c in counts if c is not None)

    def _counted(self, session: Any, rows: list[Any]) -> None:
        target = session.target
        before = getattr(target, "kv_allocations", None)
        shapes: list[tuple[int, int]] = []
        counter = TransferCounter()
        target_copies = 0
        forward, commit = target.forward_tree, target.commit

        def recorded_forward(tree: Any) -> Any:
            nonlocal target_copies
            shapes.append((int(tree.tokens.shape[0]), int(tree.tokens.shape[1])))
            start = counter.copies
            try:
                return forward(tree)
            finally:
                target_copies += counter.copies - start

        def recorded_commit(*args: Any, **kwargs: Any) -> Any:
            nonlocal target_copies
            start = counter.copies
            try:
                return commit(*args, **kwargs)
            finally:
                target_copies += counter.copies - start

        target.forward_tree, target.commit = recorded_forward, recorded_commit
        try:
            with counter:
                self._inner(session, rows)
        finally:
            del target.forward_tree, target.commit  # the class's methods again
        after = getattr(target, "kv_allocations", None)
        allocations = None if before is None or after is None else after - before
        self.rounds.append(RoundCount(reads=counter.total, copies=counter.copies, target_copies=target_copies,
                                      kv_allocations=allocations, shapes=tuple(shapes), rows=len(rows)))
