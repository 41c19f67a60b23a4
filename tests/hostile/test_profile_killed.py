"""`specframe profile` killed at any point of its run leaves the cached profile it would replace byte-identical
(issue 38, item 7: an interrupted run once left the cache with 0 verify points where it had 8).

The run is one whose measurement *would* replace the cached profile (it covers it: the same sizes) on a quiet
machine, so the cache's write path is really taken; a complete run is checked to replace it. The child process
stops itself at each point of interest and the test kills it there, with SIGKILL and with SIGTERM:

* the first forward of the verify-curve measurement (nothing may have been cleared before the measurement ends);
* every file-system operation that can change something in the profile directory (an ``open`` for writing, a
  rename, a removal, a ``chmod`` or a truncation, seen through :func:`sys.addaudithook` before it runs): the lock
  file's creation, the temporary file's, its ``chmod``, the rename over the cache file. A writer that truncated or
  cleared the cache file before its last such operation is caught at the next one.

After each kill the old file is byte-identical and reads back as the same plausible profile.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from specframe.cost.measure import load_profile, profile_path
from specframe.cost.profile import CostProfile
from specframe.cost.setup import target_profile_key
from specframe.files.cache import update_cache_json

from .probe import DEADLINE_S, ROOT, toy_pipe, toy_pipeline

pytestmark = pytest.mark.slow

#: The cached profile: the sizes a toy pipeline of budget 8 measures (1 to 9 tokens), so a new measurement covers
#: it (:meth:`CostProfile.covers`) and replaces it when the run completes.
OLD = {1: 25.0, 2: 26.0, 3: 27.5, 5: 29.5, 9: 34.0}

#: The child: the toy `specframe profile` on a machine it is told is quiet, with the measured times replaced by a
#: steady curve (the real forwards still run), stopping (a marker on stderr, then a
#: long sleep) at the ``STOP_AT``-th point (0: the first measured forward; k >= 1: the k-th write operation in the
#: profile directory; -1: never). It prints the number of write operations it saw when it ends.
CHILD = textwrap.dedent("""
    import atexit, os, sys, time
    sys.path.insert(0, os.environ["REPO_ROOT"])
    from specframe.files import cache
    from specframe.testing.load_window import FixedLoadWindow
    from specframe.testing.toy import ToyTarget

    cache.LoadWindow = FixedLoadWindow  # quiet: a complete measurement is cached
    STOP = int(os.environ["STOP_AT"])
    PROFILES = os.path.realpath(os.path.join(os.environ["SPECFRAME_CACHE"], "profiles"))
    WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    seen = [0]

    def stop(what):
        print(f"stopped at {what}", file=sys.stderr, flush=True)
        time.sleep(600)

    def in_profiles(path):
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        return isinstance(path, str) and os.path.realpath(os.path.dirname(os.path.abspath(path))) == PROFILES

    def hook(event, args):
        if event == "open":
            touched = args[0] if args[2] & WRITING or (args[1] or "r") != "r" else None
            paths = [touched]
        elif event == "os.rename":
            paths = [args[0], args[1]]
        elif event in ("os.remove", "os.chmod", "os.truncate"):
            paths = [args[0]]
        else:
            return
        if any(in_profiles(p) for p in paths):
            seen[0] += 1
            if seen[0] == STOP:
                stop(f"{event} {paths}")

    forward = ToyTarget.forward_tree
    forwards = [0]

    def stopping_forward(self, tree):
        forwards[0] += 1
        if STOP == 0 and forwards[0] == 1:
            stop("the first measured forward")
        return forward(self, tree)

    ToyTarget.forward_tree = stopping_forward
    from specframe.cost import measure as cost_measure
    curve, batches = cost_measure.measure_verify_curve, cost_measure.measure_batch_costs

    def steady_curve(*args, **kwargs):  # the real measurement, its times replaced by a plausible, monotone curve
        return {n: 10.0 * n for n in curve(*args, **kwargs)}  # (a loaded machine's noise cannot refuse it)

    def steady_batches(*args, **kwargs):  # likewise for C(B, n) at every batch size
        return {b: {k: 10.0 * b * (k + 1) for k in at} for b, at in batches(*args, **kwargs).items()}

    cost_measure.measure_verify_curve = steady_curve
    cost_measure.measure_batch_costs = steady_batches
    atexit.register(lambda: print(f"write operations: {seen[0]}", file=sys.stderr, flush=True))
    sys.addaudithook(hook)
    from specframe.cli import run_cli
    from tests.bench.toy_plugin import toy_host
    sys.exit(run_cli(["profile", os.environ["PIPELINE"], "--reps", "2"], host=toy_host()))
    """)


def start(cache: Path, pipeline: Path, stop_at: int) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SPECFRAME_CACHE": str(cache), "STOP_AT": str(stop_at),
           "PIPELINE": str(pipeline), "REPO_ROOT": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", CHILD], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, cwd=ROOT, env=env)


def fresh_cache(tmp_path: Path, name: str, key: dict, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A cache directory holding only the old profile; its root and the profile's path."""
    cache = tmp_path / name
    monkeypatch.setenv("SPECFRAME_CACHE", str(cache))  # where profile_path looks
    path = profile_path(key)
    update_cache_json(path, lambda _: CostProfile(key=key, verify_ms=OLD).to_json(), what="cost profile",
                      notify=print)
    return cache, path


def test_profile_killed_at_any_point_leaves_the_cached_profile_byte_identical(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = toy_pipeline(tmp_path / "toy.yaml")
    pipe = toy_pipe(tmp_path)
    key = target_profile_key(pipe.target, pipe.config)

    # A complete run replaces the old profile: the write path the kills interrupt is the one really taken.
    cache, path = fresh_cache(tmp_path, "complete", key, monkeypatch)
    old = path.read_bytes()
    proc = start(cache, pipeline, -1)
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, err[-2000:]
    assert path.read_bytes() != old, "the complete run kept the old profile: the kills below would test nothing"
    replaced = load_profile(path, key, print)
    assert replaced is not None and sorted(replaced.verify_ms) == sorted(OLD)
    writes = int(err.rsplit("write operations: ", 1)[1].split()[0])
    assert writes >= 3, err[-2000:]  # at least the lock file, the temporary file and the rename

    for stop_at in range(writes + 1):
        for sig in (signal.SIGKILL, signal.SIGTERM):
            cache, path = fresh_cache(tmp_path, f"stop-{stop_at}-{sig.name}", key, monkeypatch)
            old = path.read_bytes()
            proc = start(cache, pipeline, stop_at)
            assert proc.stderr is not None
            lines = []
            for line in proc.stderr:
                lines.append(line)
                if line.startswith("stopped at"):
                    break
            else:
                proc.wait(DEADLINE_S)
                pytest.fail(f"the child ended before point {stop_at}: {''.join(lines)[-2000:]}")
            proc.send_signal(sig)
            proc.wait(DEADLINE_S)
            assert proc.returncode == -sig, (stop_at, sig, lines[-1])
            assert path.read_bytes() == old, f"killed ({sig.name}) at {lines[-1].strip()}: the cached profile changed"
            kept = load_profile(path, key, print)
            assert kept is not None and kept.verify_ms == OLD
            shutil.rmtree(cache)
