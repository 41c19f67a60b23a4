"""What a benchmark run has learnt before it measures: a private cache per run, and a controller frozen while it
measures.

``budget: auto`` learns as it serves: its cost profile, its kernel choice and its memory of what drafting paid
(:mod:`specframe.cost.memory`: a calibration and an outlook) live in ``$SPECFRAME_CACHE`` and persist between runs.
A benchmark that shared the user's cache would start from whatever earlier runs (of the same prompts, often) left
there, and say nothing about it; and a controller that kept learning while it was measured would be tuned on the
very prompts it reports. So:

* :func:`private_run_cache` points ``$SPECFRAME_CACHE`` at a directory created for this run (the converted
  targets of the user's cache linked in, read-only models; nothing learnt is carried over), records its path
  and its state (``cold``: empty of learnt files; ``warm``: a cache the user gave with ``--cache DIR`` that holds
  some), and removes the directory it created when the run ends;
* :class:`ControllerFreeze` snapshots every ``budget: auto`` controller after the run's untimed warm-up (on
  ``tune`` prompts) and restores that snapshot before each measured request, with nothing written back to the
  cache: every measured request starts from the same learnt state, so no request is measured after the memory
  has seen it (or any other measured prompt).

Example::

    with private_run_cache(None) as cache:      # cache == {"path": "/tmp/specframe-run-…", "state": "cold", ...}
        warm_up(pipes)                           # tune prompts: the profile is measured, the memory learns
        freeze = ControllerFreeze(pipes)
        for prompt in measured:
            freeze.restore()
            pipe.generate(prompt, 64)
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from specframe.cost.measure import cache_root

CACHE_ENV = "SPECFRAME_CACHE"
#: The cache's folder of learnt files (cost profiles, kernel choices, controller memories).
LEARNT = "profiles"


def learnt_files(root: Path) -> list[str]:
    """The learnt files under ``root`` (relative paths), sorted."""
    folder = root / LEARNT
    return sorted(str(p.relative_to(root)) for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


@contextmanager
def private_run_cache(given: Path | None = None) -> Iterator[dict[str, Any]]:
    """``$SPECFRAME_CACHE`` for the body: ``given`` (kept afterwards), else a new directory with the current cache's
    converted targets linked in (removed afterwards). Yields the record for the result JSON."""
    before = os.environ.get(CACHE_ENV)
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        root, created, linked = given.resolve(), False, []
    else:
        user = cache_root()
        root, created = Path(tempfile.mkdtemp(prefix="specframe-run-cache-")), True
        linked = sorted(p.name for p in user.iterdir() if p.is_dir() and p.name != LEARNT) if user.is_dir() else []
        for name in linked:
            (root / name).symlink_to((user / name).resolve(), target_is_directory=True)
    files = learnt_files(root)
    record = {"path": str(root), "state": "warm" if files else "cold", "learnt_files_at_start": files,
              "created_for_this_run": created, "linked": linked}
    os.environ[CACHE_ENV] = str(root)
    try:
        yield record
    finally:
        if before is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = before
        if created:
            shutil.rmtree(root, ignore_errors=True)  # removes the links, never what they point at


class ControllerFreeze:
    """The ``budget: auto`` controllers of ``pipes`` as they are now, restored by :meth:`restore` (see the module
    docstring). Pipelines without a controller (fixed budgets, or ``auto`` not yet built) are left alone."""

    def __init__(self, pipes: Iterable[Any]) -> None:
        self._frozen: list[tuple[Any, Any]] = []
        for pipe in pipes:
            auto = getattr(pipe, "auto_budget", None)
            if auto is None:
                continue
            snapshot = copy.deepcopy(auto)
            snapshot.memory_file = None  # what a measured request learns is never saved
            self._frozen.append((pipe, snapshot))
        self.restored = 0

    def restore(self) -> None:
        """Every controller back to its snapshot (a fresh copy each time)."""
        for pipe, snapshot in self._frozen:
            pipe.auto_budget = copy.deepcopy(snapshot)
        self.restored += 1

    def record(self) -> dict[str, Any]:
        return {"memory": "frozen" if self._frozen else "no budget: auto controller",
                "controllers": len(self._frozen), "restores": self.restored,
                "learnt_from": "the run's untimed warm-up on tune-split prompts"}
