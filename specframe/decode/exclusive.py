"""One decode at a time per target: concurrent calls on pipelines that share a target are serialised.

A target holds per-call state while it decodes (its KV cache, the layer taps a drafter reads from the model's
decoder layers, the rows in flight), and pipelines made by ``Pipeline.with_stage`` share the target object and its
model. Two threads decoding on it at once would mix that state, so every use of a target that changes it (a decode
call, the `budget: auto` verify-curve measurement, `specframe profile`'s measurement, the ``generate()`` reference)
holds the target's lock (:func:`exclusive`): concurrent calls **wait their turn**, in the way a model server queues
requests, and each runs as if it were alone (its output is what it would be alone). The lock belongs to the target
object, so it covers every pipeline built on it; pipelines on different target objects run in parallel.

A wait lasts as long as the calls ahead of it take: each is bounded by its own ``max_new_tokens`` and the target's
context. A server that needs a deadline runs one target object per worker, or bounds its own queue.

A call made while the same thread already holds the lock (a ``stream`` or ``on_finish`` callback that calls
``generate`` on a pipeline of the same target) would wait for itself forever; it is refused with a
:class:`~specframe.errors.GenerationError` instead.

Example::

    with exclusive(pipe.target, "generate()"):
        ...  # the only decode on this target until the block ends
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from specframe.errors import GenerationError

#: Attribute that holds a target's lock.
_ATTRIBUTE = "_specframe_exclusive"
_CREATING = threading.Lock()
#: Locks of targets that take no new attributes (``__slots__``).
_BY_OBJECT: weakref.WeakKeyDictionary[Any, TargetLock] = weakref.WeakKeyDictionary()


class TargetLock:
    """A lock that knows the thread holding it (so a call from inside a callback of that thread is refused)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    @contextmanager
    def hold(self, what: str) -> Iterator[None]:
        me = threading.get_ident()
        if self._owner == me:
            raise GenerationError(f"{what} was called while this thread is decoding on the same target (from a "
                                  "stream or on_finish callback?); it would wait for itself",
                                  hint="collect what the callback needs and decode after the running call returns, "
                                       "or use a pipeline on another target object")
        with self._lock:
            self._owner = me
            try:
                yield
            finally:
                self._owner = None


def target_lock(target: Any) -> TargetLock:
    """The lock of ``target`` (created on first use; kept on the object)."""
    lock = getattr(target, _ATTRIBUTE, None)
    if isinstance(lock, TargetLock):
        return lock
    with _CREATING:
        lock = getattr(target, _ATTRIBUTE, None)
        if isinstance(lock, TargetLock):
            return lock
        lock = TargetLock()
        try:
            setattr(target, _ATTRIBUTE, lock)
        except (AttributeError, TypeError):
            lock = _BY_OBJECT.setdefault(target, lock)
        return lock


@contextmanager
def exclusive(target: Any, what: str) -> Iterator[None]:
    """Hold ``target``'s lock for the block (see the module docstring); ``what`` names the call in errors."""
    with target_lock(target).hold(what):
        yield
