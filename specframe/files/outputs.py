"""Output directories that a command replaces: the one rule for who may overwrite what.

A command that writes a model directory (``specframe vllm-export -o``, ``specframe train``'s ``output:``)
replaces the files in it. That is only safe when the directory holds what *this kind of command* wrote before,
so every such output carries a marker file, :data:`MARKER_FILE`, written with the output (inside the same atomic
directory rename for a new directory, before the weights for an existing one)::

    {"kind": "vllm-export", "source": "/abs/path/of/the/drafter"}

:func:`check_output_dir` is called before any work (before tensors are prepared) and refuses, with an
:class:`~specframe.files.write.OutputError` naming the directory and the fix:

* a path that cannot become a directory: a dangling symbolic link, a regular file, a parent that is a file, a
  name longer than the file system allows, a directory that does not accept new files;
* the command's own input (paths are compared after resolving symbolic links), or a directory that contains it;
* a non-empty directory without the marker (another model: the converted target's ``config.json`` is not ours);
* a directory whose marker names another kind of command (a drafter export over a Markov-head checkpoint).

An empty or missing directory is always fine. Example::

    check_output_dir(out, kind="vllm-export", what="export directory", inputs={"the drafter": drafter})
    write_checkpoint_dir(out, config, tensors, extra_files={MARKER_FILE: marker_text("vllm-export", drafter)})
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from specframe.files.write import OutputError, describe_write_error

#: The marker file of a directory a specframe command wrote (hidden, so model loaders never see it).
MARKER_FILE = ".specframe-output.json"
#: Longest file name (bytes) the common Linux file systems accept.
NAME_MAX = 255


def marker_text(kind: str, source: str | Path) -> str:
    """The marker's JSON text: which command wrote the directory (``kind``) and from what (``source``)."""
    return json.dumps({"kind": kind, "source": str(source)}, indent=2) + "\n"


def read_marker(directory: Path) -> dict[str, str] | None:
    """The marker of ``directory`` as ``{"kind", "source"}``; None when there is none. A marker that is not a JSON
    object with a string ``kind`` counts as one of an unknown kind (so the directory is refused, not replaced)."""
    path = directory / MARKER_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"kind": "(unreadable marker)", "source": ""}
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        return {"kind": "(unreadable marker)", "source": ""}
    return {"kind": data["kind"], "source": str(data.get("source", ""))}


def check_output_dir(path: str | Path, *, kind: str, what: str,
                     inputs: Mapping[str, str | Path | None] | None = None) -> Path:
    """Refuse ``path`` as the output directory of a ``kind`` command unless it is new, empty or an earlier
    ``kind`` output (see the module docstring); ``inputs`` name the command's inputs (``{"the drafter": dir}``).
    Creates nothing; returns ``path``."""
    path = Path(path).expanduser()
    _check_names(path, what)
    if os.path.islink(path) and not path.exists():
        raise OutputError(f"{what} {path} is a symbolic link to a missing directory ({os.readlink(path)})",
                          hint="remove the link, or point it at an existing directory")
    existing = _first_existing(path)
    if not existing.is_dir():
        where = "it" if existing == path else f"its parent {existing}"
        raise OutputError(f"cannot use {what} {path}: {where} is a file, not a directory",
                          hint="give a directory path that does not run through a file")
    _check_inputs(path, what, inputs or {})
    if path.is_dir():
        _check_owner(path, kind=kind, what=what)
    _check_accepts_files(existing, path, what)
    return path


def _check_names(path: Path, what: str) -> None:
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise OutputError(f"{what} {str(path)[:80]}...: the name {part[:40]}... is {size} bytes long; file "
                              f"systems allow at most {NAME_MAX}", hint="choose a shorter directory name")


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def _check_inputs(path: Path, what: str, inputs: Mapping[str, str | Path | None]) -> None:
    resolved = path.resolve()
    for name, value in inputs.items():
        if value is None:
            continue
        source = Path(value).expanduser().resolve()
        if source == resolved:
            raise OutputError(f"{what} {path} is {name} ({value}): writing there would replace the command's own "
                              "input", hint="give the output its own directory (e.g. a new one under runs/)")
        if resolved in source.parents:
            raise OutputError(f"{what} {path} contains {name} ({value}): writing there could replace it",
                              hint="give the output its own directory (e.g. a new one under runs/)")


def _check_owner(path: Path, *, kind: str, what: str) -> None:
    marker = read_marker(path)
    if marker is not None:
        if marker["kind"] == kind:
            return
        source = f" from {marker['source']}" if marker["source"] else ""
        raise OutputError(f"{what} {path} holds the output of `{marker['kind']}`{source}, not of `{kind}`; "
                          "it is not replaced", hint="give a new or empty directory (or delete that one first)")
    try:
        entries = sorted(entry.name for entry in path.iterdir())
    except OSError as exc:
        raise OutputError(f"cannot use {what} {path}: {describe_write_error(exc)}",
                          hint="choose a readable, writable directory") from None
    if entries:
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        model = " (a config.json: another model)" if "config.json" in entries else ""
        raise OutputError(f"{what} {path} already holds files ({shown}){model} that no earlier `{kind}` wrote "
                          f"(no {MARKER_FILE}); they are not replaced",
                          hint=f"give a new or empty directory, or delete {path} first if you mean to replace it")


def _check_accepts_files(existing: Path, path: Path, what: str) -> None:
    """Prove that the directory the output will be created in accepts new files (a temporary file there)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=existing, prefix=".specframe-probe.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write {what} {path}: {existing} does not accept new files "
                          f"({describe_write_error(exc)})", hint="choose a writable location") from None
    os.close(fd)
    try:
        os.unlink(tmp)
    except OSError:
        pass
