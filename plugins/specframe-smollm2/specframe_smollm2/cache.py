"""Where the converted SmolLM2 target lives, and the checksum manifest that proves a conversion is complete.

The directory is ``$SPECFRAME_CACHE/smollm2-135m-instruct`` (default ``~/.cache/specframe/smollm2-135m-instruct``).
A conversion writes every file into a temporary sibling directory, then ``manifest.json`` listing each file's size
and SHA-256, verifies it, and moves the directory into place with one ``os.replace``. So the final directory either
does not exist or holds a complete conversion; :func:`verify_manifest` detects later damage (a truncated or edited
file, a missing one).

Example::

    directory = target_dir()                    # ~/.cache/specframe/smollm2-135m-instruct
    verify_manifest(directory)                  # raises CheckpointError naming the bad file
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from specframe.errors import CheckpointError
from specframe.files import path_problem
from specframe.tensor_files import read_json_object

MODEL_NAME = "smollm2-135m-instruct"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "specframe-target-manifest/1"
SETUP_HINT = "run `specframe setup-target` (or `make setup`) to convert the target into the cache"


def cache_root() -> Path:
    """``$SPECFRAME_CACHE`` when set, else ``~/.cache/specframe``."""
    env = os.environ.get("SPECFRAME_CACHE", "").strip()
    return Path(env).expanduser() if env else Path("~/.cache/specframe").expanduser()


def target_dir(root: Path | None = None) -> Path:
    """The converted model's directory."""
    return (root or cache_root()) / MODEL_NAME


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(directory: Path, source: dict[str, str]) -> dict:
    """List every file of ``directory`` (size + SHA-256) in ``manifest.json``; return the manifest."""
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST):
        rel = path.relative_to(directory).as_posix()
        files[rel] = {"bytes": path.stat().st_size, "sha256": file_digest(path)}
    manifest = {"format": MANIFEST_FORMAT, "model": MODEL_NAME, "source": source, "files": files}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def read_manifest(directory: Path) -> dict:
    """The parsed manifest of ``directory``; a missing or unreadable one is a CheckpointError."""
    path = directory / MANIFEST
    problem = path_problem(directory, directory=True)
    if problem is not None:
        raise CheckpointError(f"the SmolLM2 target cache {directory} {problem}", hint=SETUP_HINT)
    if not os.path.lexists(path):
        raise CheckpointError(
            f"the SmolLM2 target cache {directory} has no {MANIFEST}: the conversion did not finish",
            hint="run `specframe setup-target --force` to convert it again",
        )
    try:  # the one guarded JSON reader (size, UTF-8, strict JSON, nesting)
        manifest = read_json_object(path, what="target manifest")
    except CheckpointError as exc:
        raise CheckpointError(f"cannot read {path}: {exc.message}", where=exc.where,
                              hint="run `specframe setup-target --force` to convert it again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT or \
            not isinstance(manifest.get("files"), dict):
        raise CheckpointError(f"{path} is not a specframe target manifest ({MANIFEST_FORMAT})",
                              hint="run `specframe setup-target --force` to convert it again")
    return manifest


def verify_manifest(directory: Path, *, checksums: bool = True) -> dict:
    """Check that every listed file exists with its size (and SHA-256 when ``checksums``); return the manifest."""
    manifest = read_manifest(directory)
    problems = []
    root = directory.resolve()
    for rel, entry in manifest["files"].items():
        path = directory / rel
        if not isinstance(entry, dict) or not (directory / rel).resolve().is_relative_to(root):
            raise CheckpointError(f"{directory / MANIFEST} lists {rel!r} with {entry!r}: not a file entry inside "
                                  f"{directory}", hint="run `specframe setup-target --force` to convert it again")
        if not path.is_file():
            problems.append(f"{rel} is missing")
        elif path.stat().st_size != entry.get("bytes"):
            problems.append(f"{rel} has {path.stat().st_size} bytes, the manifest says {entry.get('bytes')}")
        elif checksums and file_digest(path) != entry.get("sha256"):
            problems.append(f"{rel} does not match its SHA-256 checksum")
    if problems:
        raise CheckpointError(
            f"the SmolLM2 target cache {directory} is corrupted: " + "; ".join(problems),
            hint="run `specframe setup-target --force` to convert it again",
        )
    return manifest
