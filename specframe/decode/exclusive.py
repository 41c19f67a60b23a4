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
:class:`~specframe.errors.GenerationError` instead. A callback that hands the nested call to *another* thread and
joins it waits just as long (the other thread waits for the lock the callback's caller holds), and no lock can
see the join. So the pipeline runs its user callbacks inside :meth:`TargetLock.callback`, and a waiter whose
lock holder has been inside one callback for :data:`CALLBACK_PATIENCE_S` seconds stops waiting with a
GenerationError that names the likely cause. Callbacks that return promptly (a stream callback printing text)
never meet the limit: the clock restarts at each callback, and waiting behind the decode itself is unlimited.

Example::

    with exclusive(pipe.target, "generate()"):
        ...  # the only decode on this target until the block ends
"""

from __future__ import annotations

import threading
import time
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


#: Seconds a waiter waits while the lock's holder stays inside one user callback (module docstring).
CALLBACK_PATIENCE_S = 5.0
#: How often a waiter looks at the holder's callback state.
_POLL_S = 0.05


class TargetLock:
    """A lock that knows the thread holding it (so a call from inside a callback of that thread is refused) and
    whether that thread is inside a user callback (so a wait on a callback that waits for the waiter ends)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._callbacks = 0  # callbacks entered so far by holders (a new one restarts a waiter's clock)
        self._in_callback = False

    @contextmanager
    def callback(self) -> Iterator[None]:
        """Mark the holder as inside a user callback for the block (O(1); called by the lock's holder)."""
        self._callbacks += 1
        self._in_callback = True
        try:
            yield
        finally:
            self._in_callback = False

    def _acquire(self, what: str) -> None:
        """Take the lock, waiting as long as the holder decodes, but not on a holder stuck in one callback."""
        seen, since = -1, 0.0
        while not self._lock.acquire(timeout=_POLL_S):
            if not self._in_callback:
                seen = -1
                continue
            now = time.monotonic()
            if self._callbacks != seen:
                seen, since = self._callbacks, now
            elif now - since > CALLBACK_PATIENCE_S:
                raise GenerationError(
                    f"{what} waited {CALLBACK_PATIENCE_S:g} s for a decode on the same target whose stream or "
                    "on_finish callback has not returned; a callback that waits for this call (a nested generate "
                    "handed to another thread and joined) would wait forever",
                    hint="collect what the callback needs and decode after the running call returns, or use a "
                         "pipeline on another target object")

    @contextmanager
    def hold(self, what: str) -> Iterator[None]:
        me = threading.get_ident()
        if self._owner == me:
            raise GenerationError(f"{what} was called while this thread is decoding on the same target (from a "
                                  "stream or on_finish callback?); it would wait for itself",
                                  hint="collect what the callback needs and decode after the running call returns, "
                                       "or use a pipeline on another target object")
        self._acquire(what)
        self._owner = me
        try:
            yield
        finally:
            self._owner = None
            self._in_callback = False
            self._lock.release()


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
