"""The one rule for every file the product keeps in its cache (cost profiles, `budget: auto` memories, the
`cpu_linear` choice): what may be read, what may be written, and when.

A cache file is not the user's input: nobody hands it to us, so whatever sits at its path is either a file this
module wrote or something that must not be trusted or touched.

* **Regular files only, links never followed.** :func:`read_cache_json` opens the path with ``O_NOFOLLOW`` and
  ``O_NONBLOCK`` (a named pipe cannot block the run) and checks the open file with ``fstat``. A symbolic link, a
  named pipe, a device, a socket or a directory at the path is *set aside*: renamed (the link itself, never its
  target) to ``<name>.set-aside-<time>`` beside it, with a notice naming both paths, and the caller starts
  afresh. A file that is too large, not UTF-8 or not strict JSON is ignored with a notice and replaced by the
  next write. Directories above the cache file (``$SPECFRAME_CACHE`` itself may be a link) are the user's
  choice and are followed.
* **Atomic replace that follows no link.** :func:`update_cache_json` writes a new temporary file (created
  exclusively, so a link planted in its place fails the creation instead of being followed), ``fsync``\\ s it and
  renames it over the path: ``rename`` replaces a link planted meanwhile instead of writing through it. A run
  killed at any moment leaves the old file or the new one, never a part; a temporary file left by a killed
  writer is removed by the next writer.
* **Concurrent writers merge.** The read-merge-write of :func:`update_cache_json` runs under an exclusive
  ``flock`` on ``.<name>.lock`` beside the file, so each writer merges into what the previous one wrote (its
  ``merge`` function says what is kept: a profile that covers the cached one, the requests of both runs, ...);
  the lock is waited for at most :data:`LOCK_WAIT_S` seconds (a writer holds it for milliseconds), then the
  write is skipped with a notice.
* **Only quiet measurements.** A number that comes from timing (a verify curve, kernel timings, a drafted
  round's milliseconds) is cached only when the measurement was not contended: :func:`busy_reason` reads the
  :class:`~specframe.metrics.machine_load.MachineLoad` of the measurement window opened by :func:`measuring`
  and says why not. The measurement is still used by the run that took it.
* **Plausible numbers.** Every number read back is range-checked by the module that owns the file's format
  (:meth:`specframe.cost.profile.CostProfile.problem`, :mod:`specframe.cost.memory`,
  :mod:`specframe.cost.kernel_choice`); what fails is ignored with a notice.

Example::

    data = read_cache_json(path, what="cost profile", notify=print)        # None: missing or set aside
    update_cache_json(path, lambda current: new if better(new, current) else None, what="cost profile",
                      notify=print)
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from specframe.errors import SpecframeError
from specframe.files.read import MiB, decode_text, describe_os_error, parse_json
from specframe.files.write import OutputError, describe_write_error, ensure_dir, umask_mode
from specframe.metrics.machine_load import LoadWindow, MachineLoad

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

Notify = Callable[[str], None]
#: Seconds a writer waits for another writer's lock before skipping its write (writers hold it for milliseconds).
LOCK_WAIT_S = 10.0
#: Largest cache file read (real ones are a few kilobytes; a memory of 128 requests is about 100 KiB).
MAX_CACHE_BYTES = 4 * MiB

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class _Unusable(Exception):
    """What sits at a cache path cannot be read as a cache file (the reason is the message)."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def set_aside(path: Path, kind: str, *, what: str, notify: Notify, then: str = "starting afresh") -> None:
    """Rename what is at ``path`` (a link itself, never its target) out of the way, with a notice."""
    aside = path.with_name(f"{path.name}.set-aside-{time.time_ns()}")
    try:
        os.rename(path, aside)
    except OSError as exc:
        notify(f"ignoring the {what} {path}: it is {kind}, not a regular file, and it cannot be moved aside "
               f"({describe_os_error(exc)}); remove it so the cache can be used")
        return
    notify(f"the {what} {path} was {kind}, not a regular file: moved it to {aside} (nothing is read or written "
           f"through it); {then}")


def _read_regular(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of the regular file at ``path``; None when nothing is there; :class:`_Unusable` naming the kind
    of thing that is there otherwise (the path is not followed if it is a link, and a pipe does not block)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):  # nothing there (a parent that is a file is the writer's notice)
        return None
    except OSError as exc:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            mode = 0
        if mode and not stat.S_ISREG(mode):
            raise _Unusable(_kind(mode)) from None
        if exc.errno == errno.ELOOP:
            raise _Unusable("a symbolic link") from None
        raise SpecframeError(f"cannot be read ({describe_os_error(exc)})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Unusable(_kind(info.st_mode))
        if info.st_size > max_bytes:
            raise SpecframeError(f"it is larger than {max_bytes // MiB} MiB, far more than such a file holds")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise SpecframeError(f"it is larger than {max_bytes // MiB} MiB, far more than such a file holds")
        return b"".join(chunks)
    except OSError as exc:
        raise SpecframeError(f"cannot be read ({describe_os_error(exc)})") from None
    finally:
        os.close(fd)


def read_cache_json(path: Path, *, what: str, notify: Notify, max_bytes: int = MAX_CACHE_BYTES,
                    report_unreadable: bool = True, then: str = "starting afresh") -> Any:
    """The JSON value of the cache file ``path``, or None: when it does not exist, when something other than a
    regular file was there (set aside, with a notice) and when it does not read as strict JSON (a notice ending in
    ``then`` unless ``report_unreadable`` is False; the next write replaces it)."""
    report = notify if report_unreadable else _quiet
    try:
        data = _read_regular(path, max_bytes)
    except _Unusable as exc:
        set_aside(path, str(exc), what=what, notify=notify, then=then)
        return None
    except SpecframeError as exc:
        report(f"ignoring the {what} {path}: {exc.message}; {then}")
        return None
    if data is None:
        return None
    try:
        return parse_json(decode_text(data, source=str(path)), where=str(path))
    except SpecframeError as exc:
        report(f"ignoring the {what} {path}: {exc.message}; {then}")
        return None


def busy_reason(load: MachineLoad | None) -> str | None:
    """Why a measurement taken under ``load`` must not be cached (other processes kept the CPUs busy), or None
    (quiet, or unknown where ``/proc`` is missing)."""
    if load is None or not load.contended:
        return None
    busy = load.other_cpus
    return (f"{busy:.1f} cores busy with other work" if busy is not None else
            f"load average {load.loadavg_after}")


@contextmanager
def measuring() -> Iterator[LoadWindow]:
    """The load window of a measurement whose numbers may be cached (``window.load`` after the block)."""
    with LoadWindow() as window:
        yield window


def update_cache_json(path: Path, merge: Callable[[Any], Any], *, what: str, notify: Notify) -> Path | None:
    """Replace the cache file ``path`` by ``merge(current)`` under the file's lock (see the module docstring).

    ``current`` is what :func:`read_cache_json` gives now (None: nothing usable); ``merge`` returns the JSON value
    to write, or None to keep the file as it is (it gives its own notice saying why; what it finds unusable in
    ``current`` was reported when the run read the file and needs no second notice). Returns the path written, or
    None (kept, or not writable: a notice, never an error: the cache is an optimisation).
    """
    try:
        ensure_dir(path.parent, what=f"{what} cache directory")
        with _locked(path, what=what) as locked:
            if not locked:
                notify(f"not saving the {what} {path}: another run held its lock for over {LOCK_WAIT_S:.0f} s")
                return None
            _remove_stale_temporaries(path)
            # What is unreadable was reported when the run read it, and is replaced now: only a thing planted in
            # the meantime (set aside) is worth a notice here.
            value = merge(read_cache_json(path, what=what, notify=notify, report_unreadable=False))
            if value is None:
                return None
            _replace(path, (json.dumps(value, indent=2, sort_keys=True, allow_nan=False) + "\n").encode())
    except (OutputError, _LockError) as exc:
        notify(f"could not save the {what}: {exc}")
        return None
    return path


class _LockError(Exception):
    pass


@contextmanager
def _locked(path: Path, *, what: str) -> Iterator[bool]:
    """Hold the exclusive lock of cache file ``path``; yields False when another writer keeps it too long."""
    lock_path = path.with_name(f".{path.name}.lock")
    fd = _open_lock(lock_path, what=what)
    try:
        if fcntl is None:  # pragma: no cover - Windows: no advisory locks
            yield True
            return
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.02)
        yield True
    finally:
        os.close(fd)  # releases the lock


def _open_lock(lock_path: Path, *, what: str) -> int:
    """The open lock file (a regular file; anything else at its path is set aside once and the open retried)."""
    for attempt in range(2):
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC, umask_mode())
        except OSError as exc:
            try:
                mode = os.lstat(lock_path).st_mode
            except OSError:
                mode = 0
            if attempt or not mode or stat.S_ISREG(mode):
                raise _LockError(f"cannot open its lock file {lock_path}: {describe_os_error(exc)}") from None
            set_aside(lock_path, _kind(mode), what=f"{what} lock file", notify=_quiet)
            continue
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            return fd
        os.close(fd)
        if attempt:
            break
        set_aside(lock_path, _kind(mode), what=f"{what} lock file", notify=_quiet)
    raise _LockError(f"its lock file {lock_path} is not a regular file; remove it")


def _quiet(_: str) -> None:
    """Notices about the lock file: the write's own notice (or success) is what the user needs."""


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def _remove_stale_temporaries(path: Path) -> None:
    """Remove temporary files a killed writer left beside ``path`` (under the lock, no writer is mid-write)."""
    prefix = _temporary_prefix(path)
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
            try:
                os.unlink(entry.path)  # a link is removed itself, never followed
            except OSError:
                pass


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to a new temporary file beside ``path`` and rename it over ``path`` (see the module
    docstring: neither step follows a link)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temporary_prefix(path), suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {describe_write_error(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, umask_mode())
        if os.path.isdir(path) and not os.path.islink(path):  # a directory planted after the read
            raise OutputError(f"cannot write {path}: a directory is there")
        os.replace(tmp, path)
    except OSError as exc:
        _unlink(tmp)
        raise OutputError(f"cannot write {path}: {describe_write_error(exc)}") from None
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
