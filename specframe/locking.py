"""Advisory locks that refuse a second writer: one ``flock`` mechanism for result files and training work dirs.

:func:`lock_exclusive` takes a non-blocking exclusive POSIX ``flock`` on an open file; when another process holds
it, the caller gets a :class:`~specframe.errors.SpecframeError` naming the path instead of two writers
interleaving. The lock lives as long as the handle stays open. Where ``fcntl`` does not exist (Windows) nothing
is locked.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from specframe.errors import SpecframeError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class LockedError(SpecframeError):
    """Another process holds the lock on a file or directory this run wants to write."""


def lock_exclusive(handle: IO[Any], path: Path, *, error: type[SpecframeError] = LockedError,
                   message: str = "", hint: str = "") -> None:
    """Lock ``handle`` (an open file) for this process, or close it and raise ``error``."""
    if fcntl is None:
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise error(message or f"{path} is being written by another process",
                    hint=hint or "wait for that run to finish") from None


def hold_lock(path: Path, *, message: str = "", hint: str = "") -> IO[bytes]:
    """Open (creating it) and lock the lock file ``path``; close the returned handle to release it."""
    try:
        handle = open(path, "a+b")
    except OSError as exc:
        raise LockedError(f"cannot create the lock file {path}: {exc.strerror}",
                          hint="give a writable directory") from None
    lock_exclusive(handle, path, message=message, hint=hint)
    return handle
