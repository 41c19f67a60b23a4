"""The one writer for outputs: whole files are written atomically, and every failure says what is wrong.

:func:`write_text` / :func:`write_bytes` write a temporary file next to the destination, ``fsync`` it and
``os.replace`` it over the destination, so a reader (or a crash) sees the old file or the new one, never half
of one; :func:`write_all` does the same for several files that form one output (all are written before any
is renamed into place). :func:`ensure_dir` creates an output directory; :func:`check_writable_dir` also
proves it accepts files (for commands that check their outputs before long work). :func:`check_output_file`
vets a path that will be opened for appending (a result file). All of them refuse, with an
:class:`OutputError` that names the path:

* a parent that is a regular file (``--out-dir report.md/sub``), or a directory given as a file;
* an existing destination that is not a regular file (``/dev/full``, a named pipe, a socket): it would be
  replaced (or never written), so write to a file and redirect instead;
* directories that refuse new files (``/proc``, read-only or full file systems, missing permissions).

Example::

    write_text(Path("out/schema.json"), text, what="schema file")
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from specframe.errors import SpecframeError
from specframe.files.read import describe_os_error


class OutputError(SpecframeError):
    """An output file or directory cannot be written."""


_REASONS = {
    errno.ENOSPC: "the file system is full",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a parent of it is a file, not a directory",
    errno.EISDIR: "it is a directory",
    errno.ENOENT: "the directory does not accept new files here",
    errno.EDQUOT: "the disk quota is exceeded",
}


def describe_write_error(exc: OSError) -> str:
    """Why a write failed, in words (``the file system is full``, ``permission denied``, ...)."""
    return _REASONS.get(exc.errno or -1, describe_os_error(exc))


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def ensure_dir(path: str | Path, *, what: str, for_file: Path | None = None) -> Path:
    """Create directory ``path`` (and its parents) or raise an :class:`OutputError` saying why not.

    ``for_file``: the file this directory is created for (named in errors instead of the directory).
    """
    path = Path(path)
    existing = _first_existing(path)
    if not existing.is_dir():
        if for_file is not None:
            raise OutputError(f"cannot write {what} {for_file}: {existing} is a file, not a directory",
                              hint="choose a path whose parent directories are directories")
        kind = "it" if existing == path else f"its parent {existing}"
        raise OutputError(f"cannot create {what} {path}: {kind} is a file, not a directory",
                          hint="choose a directory path that does not run through a file")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {what} {path}: {describe_write_error(exc)}",
                          hint="choose a writable location") from None
    return path


def check_output_file(path: str | Path, *, what: str) -> Path:
    """Refuse a destination that cannot be a regular file; create its parent directory."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path} is a directory", hint="give a file path (e.g. DIR/results.jsonl)")
    if os.path.lexists(path):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise OutputError(f"{what} {path} is a symbolic link to a missing file",
                              hint="remove the link or give another path") from None
        except OSError as exc:
            raise OutputError(f"cannot use {what} {path}: {describe_write_error(exc)}",
                              hint="give a regular file path") from None
        if not stat.S_ISREG(mode):
            raise OutputError(f"{what} {path} is not a regular file (a device, pipe or socket)",
                              hint="write to a regular file, then copy or redirect it")
    ensure_dir(path.parent, what=what, for_file=path)
    return path


def check_writable_dir(path: str | Path, *, what: str) -> Path:
    """Create directory ``path`` and prove that it accepts new files (a temporary file is created and removed),
    so a command can refuse an output directory before the work whose results go there."""
    path = ensure_dir(path, what=what)
    try:
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".specframe-probe.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write into {what} {path}: {describe_write_error(exc)}",
                          hint="choose a writable location") from None
    os.close(fd)
    _remove(tmp)
    return path


def write_bytes(path: str | Path, data: bytes, *, what: str) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file + rename); see the module docstring."""
    return write_with(path, lambda handle: handle.write(data), what=what)


def write_with(path: str | Path, write: Callable[[IO[bytes]], object], *, what: str) -> Path:
    """Write ``path`` atomically through ``write(handle)`` (``torch.save``, a serializer): a unique temporary
    file in the same directory, ``fsync``, the old file's mode (or an ordinary one), then ``os.replace``.
    Readers see the old file or the new one, never a part; a failure is an :class:`OutputError`."""
    return write_all([(Path(path), write)], what=what)[0]


def write_all(files: Sequence[tuple[Path, Callable[[IO[bytes]], object]]], *, what: str) -> list[Path]:
    """Write several files as one output: every file is written to its temporary file (as :func:`write_with`
    does) before the first is renamed into place, so a failure while writing (a full disk, a serializer that
    raises) leaves every old file as it was and no temporary file behind. Only the renames, which do not fail
    on a healthy file system, come after the point of no return."""
    staged: list[tuple[Path, Path, str]] = []  # (as given, rename target, temporary file)
    try:
        for path, write in files:
            staged.append(_stage(Path(path), write, what=what))
        for given, target, tmp in staged:
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise OutputError(f"cannot write {what} {given}: {describe_write_error(exc)}",
                                  hint="free space or choose another location") from None
    except BaseException:
        for _, _, tmp in staged:
            _remove(tmp)
        raise
    return [given for given, _, _ in staged]


def _stage(path: Path, write: Callable[[IO[bytes]], object], *, what: str) -> tuple[Path, Path, str]:
    """Write ``path``'s new content to a synced temporary file next to it; ``(path, target, temporary)``."""
    path = check_output_file(path, what=what)
    target = path.resolve() if path.is_symlink() else path
    mode = _mode_for(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write {what} {path}: {describe_write_error(exc)} ({target.parent})",
                          hint="choose a writable location") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f"cannot write {what} {path}: {describe_write_error(exc)}",
                          hint="free space or choose another location; the old file (if any) is unchanged") from None
    except BaseException:
        _remove(tmp)
        raise
    return path, target, tmp


def write_text(path: str | Path, text: str, *, what: str) -> Path:
    """:func:`write_bytes` of UTF-8 ``text``."""
    return write_bytes(path, text.encode("utf-8"), what=what)


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return umask_mode()


def umask_mode(base: int = 0o666) -> int:
    """``base`` minus the process umask: the mode ``open()`` would give a new file (``0o777`` for a directory)."""
    mask = os.umask(0)
    os.umask(mask)
    return base & ~mask


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
