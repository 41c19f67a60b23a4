"""The machine's load during a measurement: load average and the CPU time *other* processes used, from ``/proc``.

A speed measurement on a shared machine is only as good as the machine was quiet. :class:`LoadWindow` samples, at
the start and the end of a measurement,

* ``/proc/loadavg`` (1-minute load average), and
* ``/proc/stat`` (first line: the busy CPU time of the whole machine, ``user + nice + system + irq + softirq +
  steal`` ticks; idle and iowait excluded) together with this process's own CPU time (``os.times``, all threads),

and reports a :class:`MachineLoad`: the load averages, and ``other_cpu_s`` = the machine's busy CPU seconds in the
window minus this process's, i.e. the CPU time every other process took while we measured.

**Contended** means other processes kept, on average, more than :data:`CONTENDED_OTHER_CPUS` of one core busy
during the window (``other_cpu_s / wall_s > 0.25``). Background daemons of an idle machine stay far below that
(< 0.05); another job running next to the measurement uses 0.5 to 1 core or more, which on a 2-core machine
takes the second core the BLAS threads, memory bandwidth and caches would otherwise have. Windows shorter than
:data:`MIN_WINDOW_S` are too coarse for the 10 ms tick counters and fall back to the load average: contended when
the higher 1-minute load of the two readings exceeds one (our own running thread) by :data:`CONTENDED_EXTRA_LOAD`.

Where ``/proc`` is missing (macOS, Windows) or unreadable, the fields are None and ``contended`` is None
("unknown"); nothing fails.

Example::

    with LoadWindow() as window:
        result = pipe.generate(ids, 64)
    window.load.contended        # False on a quiet machine
    window.load.to_dict()        # {"loadavg_before": 0.12, "loadavg_after": 0.31, "other_cpu_s": 0.02, ...}
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Average number of cores other processes may keep busy before a window counts as contended.
CONTENDED_OTHER_CPUS = 0.25
#: Load-average excess over our own thread that marks contention when the window is too short for tick counts.
CONTENDED_EXTRA_LOAD = 0.5
#: Shorter windows are judged by the load average (``/proc/stat`` counts 10 ms ticks).
MIN_WINDOW_S = 0.5
#: ``/proc/stat`` ``cpu`` columns counted as busy: user nice system idle iowait irq softirq steal.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)

ProcReader = Callable[[str], "str | None"]


def read_proc(name: str) -> str | None:
    """``/proc/<name>`` as text, or None where it does not exist or cannot be read."""
    try:
        return (Path("/proc") / name).read_text()
    except OSError:
        return None


def own_cpu_seconds() -> float:
    """CPU seconds (user + system, every thread) this process has used."""
    t = os.times()
    return t.user + t.system


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class LoadSample:
    """One reading: monotonic time, 1-minute load, machine busy CPU seconds, this process's CPU seconds."""

    wall: float
    loadavg: float | None
    busy_cpu_s: float | None
    own_cpu_s: float


@dataclass(frozen=True)
class MachineLoad:
    """The machine's load over one measurement window (see the module docstring)."""

    loadavg_before: float | None
    loadavg_after: float | None
    other_cpu_s: float | None  # CPU seconds other processes used in the window
    wall_s: float
    cpus: int
    contended: bool | None  # None: unknown (no /proc)

    @property
    def other_cpus(self) -> float | None:
        """Average number of cores other processes kept busy."""
        if self.other_cpu_s is None or self.wall_s <= 0:
            return None
        return self.other_cpu_s / self.wall_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> MachineLoad | None:
        """The record field back (None for records written before it existed, or a malformed one)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})
        except TypeError:
            return None

    @staticmethod
    def merge(loads: list[MachineLoad]) -> MachineLoad | None:
        """One window spanning several consecutive ones (first load before, last after, summed CPU and time)."""
        if not loads:
            return None
        others = [x.other_cpu_s for x in loads]
        verdicts = [x.contended for x in loads]
        contended = True if any(v is True for v in verdicts) else (None if None in verdicts else False)
        return MachineLoad(loads[0].loadavg_before, loads[-1].loadavg_after,
                           None if None in others else round(sum(o for o in others if o is not None), 4),
                           round(sum(x.wall_s for x in loads), 4), loads[-1].cpus, contended)


def load_average(proc: ProcReader = read_proc) -> float | None:
    """The 1-minute load average, or None where ``/proc/loadavg`` cannot be read."""
    text = proc("loadavg")
    try:
        return float(text.split()[0]) if text else None
    except (ValueError, IndexError):
        return None


def refuse_when_busy(max_load: float) -> float | None:
    """The 1-minute load average, after refusing (exit status 2, with the reason) when it is above ``max_load``:
    the one check every benchmark script makes before it measures anything."""
    load = load_average()
    if load is not None and load > max_load:
        print(f"the machine is busy (1-minute load average {load:.2f} > {max_load}); wait for a quiet machine: "
              "a speed figure measured now would share the cores with other jobs", file=sys.stderr)
        raise SystemExit(2)
    return load


def busy_cpu_seconds(proc: ProcReader, ticks_per_s: float) -> float | None:
    """The machine's busy CPU seconds so far (``/proc/stat``'s ``cpu`` line, :data:`_BUSY_COLUMNS`), or None."""
    text = proc("stat")
    if not text:
        return None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            try:
                values = [int(v) for v in fields[1:]]
                return sum(values[i] for i in _BUSY_COLUMNS if i < len(values)) / ticks_per_s
            except ValueError:
                return None
    return None


def ticks_per_second() -> float:
    """The kernel's clock ticks per second (``/proc`` CPU times count them)."""
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100.0


class LoadWindow:
    """Context manager measuring :class:`MachineLoad` over its body; the result is ``.load``.

    Args:
        proc: reads ``/proc/<name>`` (a fake in tests); default :func:`read_proc`.
        own_cpu: this process's CPU seconds; default :func:`own_cpu_seconds`.
        clock: monotonic seconds; default :func:`time.monotonic`.
        cpus: CPUs usable by this process; default :func:`usable_cpus`.
    """

    def __init__(self, proc: ProcReader | None = None, own_cpu: Callable[[], float] | None = None,
                 clock: Callable[[], float] | None = None, cpus: int | None = None) -> None:
        self._proc = proc or read_proc
        self._own_cpu = own_cpu or own_cpu_seconds
        self._clock = clock or time.monotonic
        self._cpus = cpus or usable_cpus()
        self._ticks = ticks_per_second()
        self._start: LoadSample | None = None
        self.load: MachineLoad | None = None

    def sample(self) -> LoadSample:
        return LoadSample(self._clock(), load_average(self._proc), busy_cpu_seconds(self._proc, self._ticks),
                          self._own_cpu())

    def __enter__(self) -> LoadWindow:
        self._start = self.sample()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._start is not None:
            self.load = self.finish(self._start, self.sample())

    def finish(self, start: LoadSample, end: LoadSample) -> MachineLoad:
        """The window's :class:`MachineLoad` from its two samples."""
        wall = max(end.wall - start.wall, 0.0)
        other = None
        if start.busy_cpu_s is not None and end.busy_cpu_s is not None:
            other = max((end.busy_cpu_s - start.busy_cpu_s) - (end.own_cpu_s - start.own_cpu_s), 0.0)
        contended: bool | None = None
        if other is not None and wall >= MIN_WINDOW_S:
            contended = other / wall > CONTENDED_OTHER_CPUS
        else:
            loads = [x for x in (start.loadavg, end.loadavg) if x is not None]
            contended = max(loads) > 1.0 + CONTENDED_EXTRA_LOAD if loads else None
        return MachineLoad(start.loadavg, end.loadavg, None if other is None else round(other, 4),
                           round(wall, 4), self._cpus, contended)
