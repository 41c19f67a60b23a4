"""`cpu_linear: auto`'s choice from measured timings, and its cache (injected timings: nothing is timed here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specframe.cost import kernel_choice
from specframe.cost.kernel_choice import (
    KernelTimings,
    choice_key,
    choice_path,
    choose_linear_kernels,
    decide,
    measure_kernels,
)
from specframe.cpu_linear import ALWAYS, NEVER, UNBOUNDED, LinearKernels
from specframe.files import cache as cache_files
from specframe.testing.load_window import FixedLoadWindow


def timings(default: dict[int, float], onednn: dict[int, float]) -> KernelTimings:
    return KernelTimings(default_ms=default, onednn_ms=onednn)


def test_one_kernel_everywhere_when_it_wins_at_every_measured_size() -> None:
    amd = timings({1: 42.0, 4: 50.0, 17: 97.0}, {1: 23.7, 4: 26.0, 17: 43.9})  # docs/benchmarks.md, 1 thread
    assert decide(amd) == ALWAYS and decide(amd).name == "onednn"
    blas = timings({1: 10.0, 4: 11.0, 17: 12.0}, {1: 12.0, 4: 13.0, 17: 15.0})
    assert decide(blas) == NEVER and decide(blas).name == "default" and not decide(blas).uses_onednn


def test_a_tie_within_the_margin_keeps_the_default_kernels() -> None:
    assert decide(timings({1: 10.0, 17: 20.0}, {1: 9.9, 17: 19.9})) == NEVER  # 1 % faster: not worth the copy


def test_winners_that_change_once_dispatch_by_rows_at_the_measured_crossing() -> None:
    # The Intel Xeon of the issue: BLAS faster for one row, oneDNN for sixteen.
    intel = timings({1: 55.5, 4: 70.0, 17: 130.0}, {1: 61.7, 4: 66.0, 17: 100.2})
    rule = decide(intel)
    # gains (0.98 default - oneDNN): q=1 -> -7.31, q=4 -> +2.6: they cross at 1 + 3 * 7.31 / 9.91 = 3.2.
    assert rule == LinearKernels(low=4, high=UNBOUNDED) and rule.name == "by_rows"
    assert not rule.packed(1) and not rule.packed(3) and rule.packed(4) and rule.packed(64)
    assert "default BLAS below 4 rows" in rule.describe()
    crossing_early = timings({1: 55.5, 4: 70.0, 17: 130.0}, {1: 61.7, 4: 50.0, 17: 100.2})
    assert decide(crossing_early).low == 2  # the gain crosses 0 at 1.85: oneDNN from 2 rows
    reverse = timings({1: 40.0, 4: 50.0, 17: 80.0}, {1: 30.0, 4: 48.0, 17: 95.0})  # oneDNN only for few rows
    rule = decide(reverse)
    assert rule.low == 1 and 4 < rule.high <= 17 and rule.packed(4) and not rule.packed(17)
    assert "oneDNN prepacked below" in rule.describe()


def test_noisy_winners_fall_back_to_the_smaller_total() -> None:
    noisy = timings({1: 10.0, 4: 20.0, 17: 30.0}, {1: 9.0, 4: 21.0, 17: 25.0})  # oneDNN, BLAS, oneDNN
    assert decide(noisy) == ALWAYS  # 55 ms against 60 ms summed
    assert decide(timings({1: 10.0, 4: 20.0, 17: 30.0}, {1: 9.0, 4: 25.0, 17: 29.0})) == NEVER


def test_measurement_alternates_the_kernels_and_keeps_medians(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0]
    cost = {NEVER: {1: 5.0, 17: 9.0}, ALWAYS: {1: 6.0, 17: 7.0}}  # ms per forward under each rule
    state = {"rule": ALWAYS, "log": []}
    monkeypatch.setattr(kernel_choice.time, "perf_counter_ns", lambda: clock[0])

    def use(rule: LinearKernels) -> None:
        state["rule"] = rule

    def forward(q: int) -> None:
        state["log"].append((state["rule"], q))
        jitter = 3.0 if len(state["log"]) % 7 == 0 else 0.0  # an outlier now and then; the median ignores it
        clock[0] += int((cost[state["rule"]][q] + jitter) * 1e6)

    result = measure_kernels(forward, use, rows=(1, 17), reps=3)
    assert result.default_ms == {1: 5.0, 17: 9.0} and result.onednn_ms == {1: 6.0, 17: 7.0}
    assert [rule for rule, _ in state["log"][:4]] == [NEVER, ALWAYS, NEVER, ALWAYS]  # interleaved
    assert len(state["log"]) == 2 * 2 * (3 + 1) and state["rule"] == ALWAYS  # warm-ups included; packed again


class FakeWindow(FixedLoadWindow):
    """This file's own subclass, so that setting ``contended`` on it leaves other tests alone."""


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    monkeypatch.setattr(cache_files, "LoadWindow", FakeWindow)
    return tmp_path


INTEL = timings({1: 55.5, 4: 70.0, 17: 130.0}, {1: 61.7, 4: 66.0, 17: 100.2})


class Measure:
    def __init__(self, result: KernelTimings) -> None:
        self.result, self.calls = result, 0

    def __call__(self) -> KernelTimings:
        self.calls += 1
        return self.result


def test_the_choice_is_measured_once_then_read_from_the_cache(cache: Path) -> None:
    key = choice_key(model="abc", dtype="float32")
    notes: list[str] = []
    measure = Measure(INTEL)
    first = choose_linear_kernels(key, measure, notes.append)
    assert first.measured and measure.calls == 1 and first.kernels == LinearKernels(low=4)
    assert first.path == choice_path(key) and first.path.parent == cache / "profiles"
    saved = json.loads(first.path.read_text())
    assert saved["key"] == key and saved["decision"] == {"low": 4, "high": None} and saved["default_ms"]["1"] == 55.5
    again = choose_linear_kernels(key, measure, notes.append)
    assert not again.measured and measure.calls == 1 and again.kernels == first.kernels and notes == []
    assert key["cpu"] and key["torch"] and key["threads"] >= 1 and key["rows"] == [1, 4, 17]


def test_a_choice_of_another_thread_count_or_torch_has_its_own_file(cache: Path) -> None:
    """Runs at 1 and 2 threads (the demo picks the idle cores) keep a choice each instead of replacing each other's."""
    key = choice_key(model="abc", dtype="float32")
    choose_linear_kernels(key, Measure(INTEL), lambda _: None)
    other = {**key, "threads": key["threads"] + 1, "torch": "0.0"}
    assert choice_path(other) != choice_path(key)
    notes: list[str] = []
    measure = Measure(timings({1: 1.0, 17: 2.0}, {1: 0.5, 17: 1.0}))
    choice = choose_linear_kernels(other, measure, notes.append)
    assert measure.calls == 1 and choice.kernels == ALWAYS and notes == []
    assert json.loads(choice.path.read_text())["key"]["threads"] == key["threads"] + 1
    again = Measure(INTEL)
    assert choose_linear_kernels(key, again, notes.append).kernels == LinearKernels(low=4) and again.calls == 0
    assert choice_path({**key, "model": "other"}) != choice_path(key)


def test_a_file_measured_under_another_key_at_the_path_is_measured_again_with_a_notice(cache: Path) -> None:
    key = choice_key(model="abc", dtype="float32")
    first = choose_linear_kernels(key, Measure(INTEL), lambda _: None)
    data = json.loads(first.path.read_text())
    data["key"] = {**key, "threads": key["threads"] + 1, "torch": "0.0"}  # a file copied from another machine
    first.path.write_text(json.dumps(data))
    notes: list[str] = []
    measure = Measure(INTEL)
    choose_linear_kernels(key, measure, notes.append)
    assert measure.calls == 1 and len(notes) == 1 and "another threads, torch" in notes[0]
    assert json.loads(first.path.read_text())["key"] == key


@pytest.mark.parametrize("content", [
    b"{not json", b"\xff\xfe", b"[]",
    json.dumps({"format": 1, "key": {}, "default_ms": {"1": -2.0}, "onednn_ms": {"1": 1.0}}).encode(),
    json.dumps({"format": 1, "key": {}, "default_ms": {"1": 2.0}, "onednn_ms": {"4": 1.0}}).encode(),
    json.dumps({"format": 2, "key": {}}).encode(),
], ids=["syntax", "not-utf8", "array", "negative-time", "no-common-size", "other-format"])
def test_a_corrupt_cache_file_is_measured_again_with_a_notice(cache: Path, content: bytes) -> None:
    key = choice_key(model="abc", dtype="float32")
    path = choice_path(key)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    notes: list[str] = []
    measure = Measure(INTEL)
    choice = choose_linear_kernels(key, measure, notes.append)
    assert measure.calls == 1 and choice.kernels == LinearKernels(low=4)
    assert len(notes) == 1 and str(path) in notes[0] and "measuring again" in notes[0]
    assert json.loads(path.read_text())["key"] == key  # replaced by the new measurement


def test_a_choice_measured_on_busy_cores_is_used_but_not_cached(cache: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured while another job kept 1.6 cores busy: the run uses the choice and says so; nothing is cached, so
    the next run measures again (on a quiet machine it is then cached)."""
    key = choice_key(model="abc", dtype="float32")
    monkeypatch.setattr(FakeWindow, "contended", True)
    notes: list[str] = []
    measure = Measure(INTEL)
    busy = choose_linear_kernels(key, measure, notes.append)
    assert busy.measured and busy.kernels == LinearKernels(low=4) and not busy.path.exists() and not busy.cached
    assert len(notes) == 1 and "1.6 cores busy" in notes[0] and "not caching" in notes[0]
    monkeypatch.setattr(FakeWindow, "contended", False)
    quiet = choose_linear_kernels(key, measure, notes.append)
    assert quiet.measured and measure.calls == 2 and quiet.path.exists() and quiet.cached and len(notes) == 1


def test_an_unwritable_cache_is_a_notice_not_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cache_files, "LoadWindow", FakeWindow)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SPECFRAME_CACHE", str(blocker))
    notes: list[str] = []
    choice = choose_linear_kernels(choice_key(model="abc", dtype="float32"), Measure(INTEL), notes.append)
    assert choice.kernels == LinearKernels(low=4) and len(notes) == 1 and "could not save" in notes[0]
