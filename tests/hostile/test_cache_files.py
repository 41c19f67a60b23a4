"""Hostile cache files (issue 28, classes 1 and 2; issue 27, one rule for every cached measurement).

Every file the product keeps in its cache (the `budget: auto` memory, the cost profile, the `cpu_linear` choice)
follows one rule (`specframe.files.cache`): regular files only, links never followed on read or write, anything
else set aside with a notice; plausible numbers; concurrent writers merged; only quiet measurements written, a
better one never replaced by a worse one, and nothing lost by a run that is killed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from specframe import notices
from specframe.cost.kernel_choice import choice_key, choice_path, load_choice
from specframe.cost.measure import load_profile, profile_path
from specframe.cost.profile import CostProfile
from specframe.cost.setup import target_profile_key
from specframe.files.cache import read_cache_json, update_cache_json
from specframe.testing.load_window import fix_machine_load

from .probe import DEADLINE_S, ROOT, assert_clean, child, command, toy_pipe, toy_pipeline

VICTIM = "root:x:0:0:root:/root:/bin/bash\n"  # a copy of /etc/passwd: what a link in the cache points at


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    fix_machine_load(monkeypatch)  # a quiet machine unless a test says otherwise
    monkeypatch.setattr(notices, "_NOTIFIED", set())  # notices are shown once per process: once per test here
    return tmp_path / "cache"


def auto_pipe(tmp_path: Path) -> Any:
    return toy_pipe(tmp_path, budget="auto")


def cached_files(cache: Path) -> dict[str, Path]:
    """The profile and memory files a first `budget: auto` request left in the cache."""
    files = {p.name: p for p in (cache / "profiles").glob("*.json")}
    memory = [p for name, p in files.items() if ".memory-" in name]
    profile = [p for name, p in files.items() if ".memory-" not in name and not name.startswith("cpu-linear")]
    assert len(memory) == 1 and len(profile) == 1, sorted(files)
    return {"memory": memory[0], "profile": profile[0]}


def first_request(tmp_path: Path, cache: Path) -> dict[str, Path]:
    auto_pipe(tmp_path).generate("what is two and two", 12)
    return cached_files(cache)


@pytest.mark.parametrize("which", ["memory", "profile"])
def test_a_link_in_the_cache_is_set_aside_and_what_it_points_at_is_never_written(
        tmp_path: Path, cache: Path, which: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = first_request(tmp_path, cache)[which]
    victim = tmp_path / "passwd-copy"
    victim.write_text(VICTIM)
    path.unlink()
    path.symlink_to(victim)
    result = auto_pipe(tmp_path).generate("name three colours", 12)  # a new pipeline reads the cache
    assert result.tokens
    assert victim.read_text() == VICTIM  # not overwritten with cache JSON
    assert path.is_file() and not path.is_symlink()  # the new cache file replaced the link
    aside = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".set-aside-")]
    assert len(aside) == 1 and aside[0].is_symlink() and os.readlink(aside[0]) == str(victim)
    err = " ".join(capsys.readouterr().err.split())
    assert "was a symbolic link, not a regular file" in err and str(aside[0]) in err


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_link_or_pipe_at_the_kernel_choice_is_set_aside(tmp_path: Path, cache: Path, kind: str) -> None:
    from specframe.cost.kernel_choice import KernelTimings, choose_linear_kernels

    key = choice_key(model="abc", dtype="float32")
    path = choice_path(key)
    path.parent.mkdir(parents=True)
    victim = tmp_path / "passwd-copy"
    victim.write_text(VICTIM)
    if kind == "link":
        path.symlink_to(victim)
    else:
        os.mkfifo(path)
    notes: list[str] = []
    timings = KernelTimings(default_ms={1: 55.5, 17: 130.0}, onednn_ms={1: 61.7, 17: 100.2})
    choice = choose_linear_kernels(key, lambda: timings, notes.append)
    assert choice.measured and choice.cached and victim.read_text() == VICTIM
    assert path.is_file() and not path.is_symlink() and json.loads(path.read_text())["key"] == key
    assert len(notes) == 1 and "not a regular file: moved it to" in notes[0] and "measuring again" in notes[0]


@pytest.mark.parametrize("which", ["memory", "profile"])
def test_a_named_pipe_in_the_cache_does_not_block_the_run(tmp_path: Path, cache: Path, which: str) -> None:
    path = first_request(tmp_path, cache)[which]
    path.unlink()
    os.mkfifo(path)
    pipeline = toy_pipeline(tmp_path / "toy.yaml", budget="auto")
    outcome = child(f"run(['run', {str(pipeline)!r}, '--prompt', 'hi', '--max-new-tokens', '6'])",
                    env={"SPECFRAME_CACHE": str(cache)}, timeout=60)
    assert_clean(outcome, code=0, says=("was a named pipe, not a regular file",))
    assert not path.exists() or path.is_file()


@pytest.mark.parametrize("kind", ["directory", "socket"])
def test_a_directory_or_socket_in_the_cache_is_set_aside(tmp_path: Path, cache: Path, kind: str,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = first_request(tmp_path, cache)["profile"]
    path.unlink()
    if kind == "directory":
        path.mkdir()
        (path / "mine.txt").write_text("kept")
    else:
        monkeypatch.chdir(path.parent)  # a socket's path must be short
        server = socket.socket(socket.AF_UNIX)
        server.bind(path.name)
        server.close()
    auto_pipe(tmp_path).generate("hi", 6)
    err = " ".join(capsys.readouterr().err.split())
    assert f"was a {kind}, not a regular file" in err
    aside = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".set-aside-")]
    assert len(aside) == 1
    if kind == "directory":
        assert (aside[0] / "mine.txt").read_text() == "kept"  # nothing of the user's is deleted


def test_a_link_planted_between_the_read_and_the_write_is_replaced_not_followed(tmp_path: Path) -> None:
    path = tmp_path / "profiles" / "x.json"
    victim = tmp_path / "victim"
    victim.write_text(VICTIM)

    def merge(current: Any) -> Any:
        path.symlink_to(victim)  # another process plants a link after the read
        return {"format": 1}

    notes: list[str] = []
    assert update_cache_json(path, merge, what="test file", notify=notes.append) == path
    assert victim.read_text() == VICTIM and not path.is_symlink() and json.loads(path.read_text()) == {"format": 1}


def test_a_link_at_the_lock_file_is_not_followed(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    victim = tmp_path / "victim"
    victim.write_text(VICTIM)
    (tmp_path / ".x.json.lock").symlink_to(victim)
    assert update_cache_json(path, lambda _: {"a": 1}, what="test file", notify=lambda _: None) == path
    assert victim.read_text() == VICTIM and json.loads(path.read_text()) == {"a": 1}


@pytest.mark.parametrize("content", [b"\xff\xfe{}", b"{" * 10, b"x" * (5 << 20)], ids=["not-utf8", "bad", "huge"])
def test_an_unreadable_cache_file_is_ignored_with_a_notice_and_replaced(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    notes: list[str] = []
    assert read_cache_json(path, what="test file", notify=notes.append) is None
    assert len(notes) == 1 and str(path) in notes[0] and "starting afresh" in notes[0]
    update_cache_json(path, lambda current: {"a": 1}, what="test file", notify=notes.append)
    assert json.loads(path.read_text()) == {"a": 1} and len(notes) == 1


def test_a_writer_killed_mid_write_loses_nothing_and_its_leftovers_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"kept": true}')
    outcome = child(f"""
        import os, signal
        from pathlib import Path
        from specframe.files.cache import update_cache_json
        os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)  # killed after the temporary file is written
        update_cache_json(Path({str(path)!r}), lambda current: {{"new": 1}}, what="test file", notify=print)
        """)
    assert outcome.code == -signal.SIGKILL
    assert json.loads(path.read_text()) == {"kept": True}
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # what the killed writer left
    update_cache_json(path, lambda current: {**current, "next": 1}, what="test file", notify=lambda _: None)
    assert json.loads(path.read_text()) == {"kept": True, "next": 1}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_concurrent_writers_merge_under_the_lock(tmp_path: Path) -> None:
    """Two processes add 30 entries each to one cache file at the same time: all 60 are kept."""
    path = tmp_path / "x.json"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from specframe.files.cache import update_cache_json
        def add(cur):
            return {{"items": (cur or {{}}).get("items", []) + [sys.argv[1]]}}
        for i in range(30):
            update_cache_json(Path({str(path)!r}), add, what="test file", notify=print)
        """)
    procs = [subprocess.Popen([sys.executable, "-c", script, name]) for name in ("a", "b")]
    for proc in procs:
        assert proc.wait(DEADLINE_S) == 0
    items = json.loads(path.read_text())["items"]
    assert sorted(items) == ["a"] * 30 + ["b"] * 30


def test_profile_killed_mid_measurement_leaves_the_cached_profile(tmp_path: Path, cache: Path) -> None:
    """`specframe profile` stopped by a timeout's kill (or Ctrl-C) while it measures: the 8-point profile in the
    cache is untouched (issue 27: it had been left with 0 points)."""
    pipeline = toy_pipeline(tmp_path / "toy.yaml")
    key = target_profile_key(toy_pipe(tmp_path).target, toy_pipe(tmp_path).config)
    good = CostProfile(key=key, verify_ms={1: 25.0, 2: 26.0, 3: 27.5, 5: 29.5, 9: 34.0, 17: 45.0, 33: 70.0, 65: 120.0})
    update_cache_json(profile_path(key), lambda _: good.to_json(), what="cost profile", notify=print)
    before = profile_path(key).read_bytes()
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from specframe.testing.toy import ToyTarget
        forward = ToyTarget.forward_tree
        def slow(self, tree):
            print("measuring", file=sys.stderr, flush=True)
            time.sleep(0.05)
            return forward(self, tree)
        ToyTarget.forward_tree = slow
        from specframe.cli import run_cli
        from tests.bench.toy_plugin import toy_host
        sys.exit(run_cli(["profile", {str(pipeline)!r}, "--reps", "20"], host=toy_host()))
        """)
    for sig in (signal.SIGKILL, signal.SIGINT, signal.SIGTERM):
        proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                env={**os.environ, "OMP_NUM_THREADS": "1", "SPECFRAME_CACHE": str(cache)})
        assert proc.stderr is not None and "measuring" in proc.stderr.readline()
        proc.send_signal(sig)
        proc.wait(DEADLINE_S)
        assert profile_path(key).read_bytes() == before, sig
        assert load_profile(profile_path(key), key, print).verify_ms == good.verify_ms


def test_implausible_calibration_counts_are_refused_and_never_written_back(
        tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memory = first_request(tmp_path, cache)["memory"]
    data = json.loads(memory.read_text())
    shape = data["calibration"]["seen"]
    data["calibration"] = {"seen": [[1e300] * len(row) for row in shape],
                           "accepted": [[1e300] * len(row) for row in shape]}  # "always accepted", forever
    memory.write_text(json.dumps(data))
    auto_pipe(tmp_path).generate("hi", 8)
    err = " ".join(capsys.readouterr().err.split())
    assert "ignoring the budget: auto memory" in err and "calibration.seen" in err
    saved = json.loads(memory.read_text())["calibration"]
    assert max(max(row) for row in saved["seen"]) < 1e6  # learnt afresh, the poisoned counts are gone


@pytest.mark.parametrize("timings", [
    {"default_ms": {"1": 50.0, "17": 120.0}, "onednn_ms": {"1": 1e-300, "17": 1e-300}},
    {"default_ms": {"1": 50.0, "17": 120.0}, "onednn_ms": {"1": 0.01, "17": 0.02}},
    {"default_ms": {"1": 1e300, "17": 1e300}, "onednn_ms": {"1": 50.0, "17": 120.0}},
], ids=["1e-300", "5000x faster", "1e300"])
def test_kernel_timings_that_cannot_be_measurements_are_refused(cache: Path, timings: dict) -> None:
    key = choice_key(model="abc", dtype="float32")
    path = choice_path(key)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "key": key, **timings}))
    notes: list[str] = []
    assert load_choice(path, key, notes.append) is None
    assert len(notes) == 1 and "measuring again" in notes[0]


def test_two_runs_saving_one_memory_leave_a_readable_file_with_the_last_runs_calibration(
        tmp_path: Path, cache: Path) -> None:
    """Two runs of one pipeline at once (both read the memory before either saved): the file afterwards is a whole
    memory, the calibration of the run that saved last."""
    first, second = auto_pipe(tmp_path), auto_pipe(tmp_path)
    second.prepare_auto_budget(torch.tensor([[1, 2, 3]]))  # reads the memory before the first run saves
    first.generate("what is two and two", 12)
    second.generate("def sieve(n): return [p for p in range(n)]", 12)
    saved = json.loads(cached_files(cache)["memory"].read_text())
    assert saved["format"] == 3 and saved["calibration"] == second.auto_budget.estimator.state()


def test_profiles_at_one_and_two_threads_keep_a_file_each(tmp_path: Path, cache: Path) -> None:
    before = torch.get_num_threads()
    try:
        keys = []
        for threads in (1, 2, 1):
            torch.set_num_threads(threads)
            pipe = auto_pipe(tmp_path)
            pipe.generate("hi", 6)
            keys.append(target_profile_key(pipe.target, pipe.config))
    finally:
        torch.set_num_threads(before)
    paths = [profile_path(k) for k in keys]
    assert paths[0] == paths[2] != paths[1] and all(p.is_file() for p in paths)
    assert ".1-threads." in paths[0].name and ".2-threads." in paths[1].name


def test_a_profile_measured_on_a_busy_machine_is_used_but_not_cached(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    window = fix_machine_load(monkeypatch, contended=True)
    pipe = auto_pipe(tmp_path)
    assert pipe.generate("hi", 6).tokens  # the measurement is used by the run
    key = target_profile_key(pipe.target, pipe.config)
    assert not profile_path(key).exists()
    assert "not caching the cost profile" in " ".join(capsys.readouterr().err.split())
    window.contended = False
    auto_pipe(tmp_path).generate("hi", 6)
    cached = profile_path(key).read_bytes()
    window.contended = True  # what a busy run learns online does not replace the quiet measurement
    busy = auto_pipe(tmp_path)
    busy.generate("what is two and two", 12)
    assert profile_path(key).read_bytes() == cached
    saved = json.loads(cached_files(cache)["memory"].read_text())
    assert saved["calibration"] == busy.auto_budget.estimator.state()  # acceptance is not a timing: remembered
    assert "draft_ms" not in saved  # and the memory holds no timing


def test_profile_command_on_a_busy_machine_prints_but_does_not_cache(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fix_machine_load(monkeypatch, contended=True)
    pipeline = toy_pipeline(tmp_path / "toy.yaml")
    outcome = command(capsys, "profile", str(pipeline), "--reps", "1")
    assert_clean(outcome, code=0, says=("not caching the cost profile", "other processes used the CPUs"))
    assert not list((cache / "profiles").glob("*.json"))
