"""Machine-load windows from a fake /proc: other processes' CPU time, the contended flag, missing /proc."""

from __future__ import annotations

import pytest

from specframe.metrics.machine_load import CONTENDED_OTHER_CPUS, LoadWindow, MachineLoad


class FakeMachine:
    """A scripted /proc: each ``advance`` moves the clock and adds busy ticks (100 per second)."""

    def __init__(self, load: float = 0.1) -> None:
        self.t = 0.0
        self.busy_ticks = 1000
        self.own = 5.0
        self.load = load
        self.proc_missing = False

    def proc(self, name: str) -> str | None:
        if self.proc_missing:
            return None
        if name == "loadavg":
            return f"{self.load:.2f} 0.50 0.40 1/100 4242\n"
        if name == "stat":
            return f"cpu  {self.busy_ticks} 0 0 90000 40 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"
        return None

    def advance(self, seconds: float, own_cpu: float, other_cpu: float) -> None:
        self.t += seconds
        self.own += own_cpu
        self.busy_ticks += round((own_cpu + other_cpu) * 100)

    def window(self) -> LoadWindow:
        window = LoadWindow(proc=self.proc, own_cpu=lambda: self.own, clock=lambda: self.t, cpus=2)
        window._ticks = 100.0  # the fake's tick rate, whatever the host's
        return window


def _measure(machine: FakeMachine, seconds: float, own: float, other: float) -> MachineLoad:
    with machine.window() as w:
        machine.advance(seconds, own, other)
    assert w.load is not None
    return w.load


def test_a_quiet_window_is_not_contended() -> None:
    m = FakeMachine(load=0.9)
    load = _measure(m, 4.0, own=4.0, other=0.1)
    assert load.other_cpu_s == 0.1 and load.wall_s == 4.0 and load.cpus == 2
    assert load.loadavg_before == load.loadavg_after == 0.9
    assert load.contended is False


def test_another_job_next_to_the_measurement_is_contention() -> None:
    m = FakeMachine()
    load = _measure(m, 4.0, own=4.0, other=3.0)  # another process kept 0.75 of a core busy
    assert load.other_cpu_s == 3.0 and load.other_cpus == 0.75 > CONTENDED_OTHER_CPUS
    assert load.contended is True


def test_own_threads_do_not_count_as_other_processes() -> None:
    m = FakeMachine()
    load = _measure(m, 2.0, own=3.9, other=0.0)  # two busy threads of our own
    assert load.other_cpu_s == 0.0 and load.contended is False


def test_short_windows_fall_back_to_the_load_average() -> None:
    assert _measure(FakeMachine(load=3.2), 0.1, own=0.1, other=0.0).contended is True
    assert _measure(FakeMachine(load=1.1), 0.1, own=0.1, other=0.0).contended is False


def test_missing_proc_gives_unknown_rather_than_an_error() -> None:
    m = FakeMachine()
    m.proc_missing = True
    load = _measure(m, 3.0, own=3.0, other=2.0)
    assert load.contended is None and load.other_cpu_s is None and load.loadavg_after is None
    assert load.other_cpus is None


def test_record_round_trip_and_merging() -> None:
    m = FakeMachine()
    quiet = _measure(m, 2.0, own=2.0, other=0.0)
    busy = _measure(m, 2.0, own=2.0, other=2.0)
    assert MachineLoad.from_dict(busy.to_dict()) == busy
    assert MachineLoad.from_dict(None) is None
    assert MachineLoad.from_dict({"contended": True}).contended is True  # type: ignore[union-attr]
    merged = MachineLoad.merge([quiet, busy])
    assert merged is not None and merged.contended is True and merged.other_cpu_s == 2.0 and merged.wall_s == 4.0
    assert MachineLoad.merge([]) is None


def test_the_real_proc_reader_degrades_gracefully() -> None:
    with LoadWindow() as w:
        sum(range(1000))
    assert w.load is not None and w.load.wall_s >= 0 and w.load.cpus >= 1


def test_load_average_reads_proc_and_busy_machines_are_refused_with_status_2(monkeypatch, capsys) -> None:
    from specframe.metrics import machine_load

    assert machine_load.load_average(lambda name: "3.25 2.00 1.00 1/99 123") == 3.25
    assert machine_load.load_average(lambda name: None) is None
    assert machine_load.load_average(lambda name: "garbage") is None
    monkeypatch.setattr(machine_load, "load_average", lambda: 1.5)
    assert machine_load.refuse_when_busy(2.0) == 1.5
    with pytest.raises(SystemExit) as info:
        machine_load.refuse_when_busy(0.5)
    assert info.value.code == 2 and "busy" in capsys.readouterr().err
