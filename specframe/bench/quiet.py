"""The quiet-machine rule: the one definition every benchmark script, test and docs table uses.

A speed figure means what it says only when the benchmark had the cores it asked for. The rule reads the Linux
1-minute load average (``/proc/loadavg``: the exponentially smoothed count of runnable threads) and subtracts
the threads the benchmark itself keeps busy; what is left is the **excess** load, other processes' share:

* **at the start** the excess must be below :data:`QUIET_EXCESS` (0.3). Nothing of the benchmark has run yet
  (only its imports), so its own share is counted as 0 there;
* **during the run** a background :class:`LoadSampler` reads the load every :data:`SAMPLE_EVERY_S` seconds (the
  kernel updates it every 5 s); the largest reading minus the benchmark's threads must stay below 0.3 too.

A run is **quiet** when both hold. 0.3 is a third of a core: a daemon's blips stay far below it, another job
(a test suite, a compiler, a second benchmark) keeps a core busy and exceeds it within a minute. On 2 cores a
load of 0.9 before the start is most of the second core: such a run is not quiet.

The record a run writes (:meth:`QuietRecord.to_dict`, the ``protocol.quiet`` field of every result JSON) holds the
start load, the maximum and mean of the samples, their count, the benchmark's threads and the CPU time other
processes used over the run (:mod:`specframe.metrics.machine_load`, informational). :func:`judge` applies the
rule to such a record, so a published file is checked against the same rule as a run
(``tests/benchmarks/test_published.py``); a file without one (written before the rule) is not quiet.

Worked example (2 cores, 1 benchmark thread): start load 0.12 -> excess 0.12 < 0.3; samples 0.4, 0.8, 1.05,
1.21 -> max excess 1.21 - 1 = 0.21 < 0.3: quiet. Start 0.85: excess 0.85, refused before any work.

Example::

    refuse_unless_quiet(threads=1)             # exit status 2 with the reason when the start is not quiet
    with LoadSampler(threads=1) as sampler:
        measure()
    record = sampler.record()                  # QuietRecord(start=0.12, during_max=1.21, ..., quiet=True)
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from specframe.metrics.machine_load import LoadWindow, load_average, read_proc

#: Largest excess 1-minute load (the load minus the benchmark's own threads) of a quiet machine.
QUIET_EXCESS = 0.3
#: Seconds between two load readings during a run (the kernel refreshes the load average every 5 s).
SAMPLE_EVERY_S = 5.0
#: The rule in one line, recorded with every run and quoted by the docs.
RULE = (f"1-minute load minus the benchmark's own threads below {QUIET_EXCESS} at the start and at every "
        f"{SAMPLE_EVERY_S:g}-second sample of the run")


def excess(load: float, threads: int) -> float:
    """Other processes' share of the 1-minute ``load`` when the benchmark keeps ``threads`` threads busy."""
    return load - threads


@dataclass(frozen=True)
class QuietRecord:
    """The loads of one run under the rule (see the module docstring)."""

    threads: int  # threads the benchmark keeps busy while it measures
    start: float | None  # 1-minute load before any work (None: no /proc/loadavg)
    during_max: float | None  # largest 1-minute load sampled during the run
    during_mean: float | None
    samples: int
    other_cpus: float | None  # mean cores other processes kept busy over the run (/proc/stat), informational
    wall_s: float
    rule: str = RULE
    threshold: float = QUIET_EXCESS

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "quiet": judge(asdict(self))[0]}


def judge(record: Mapping[str, Any] | None) -> tuple[bool, str]:
    """Whether the run behind ``record`` (a :class:`QuietRecord` as a dict, from a result file) was quiet under the
    rule, and why (the reason names the numbers)."""
    if not isinstance(record, Mapping):
        return False, "no load recorded during the run (written before the quiet rule)"
    try:
        threads = int(record["threads"])
        start, during = record["start"], record["during_max"]
        samples = int(record["samples"])
    except (KeyError, TypeError, ValueError):
        return False, "the load record is incomplete"
    if start is None or during is None or samples < 1:
        return False, "no load average could be read (no /proc/loadavg)"
    if excess(float(start), 0) >= QUIET_EXCESS:
        return False, f"1-minute load {float(start):.2f} at the start (>= {QUIET_EXCESS})"
    if excess(float(during), threads) >= QUIET_EXCESS:
        return False, (f"1-minute load up to {float(during):.2f} during the run with {threads} benchmark "
                       f"thread(s): excess {excess(float(during), threads):.2f} >= {QUIET_EXCESS}")
    return True, (f"quiet: load {float(start):.2f} at the start, at most {float(during):.2f} during the run "
                  f"({threads} benchmark thread(s))")


def start_problem(threads: int, load: float | None) -> str | None:
    """Why the machine is not quiet enough to start (None: it is, or the load cannot be read)."""
    if load is None or excess(load, 0) < QUIET_EXCESS:
        return None
    return (f"the machine is busy: 1-minute load {load:.2f} before the start, the quiet rule allows less than "
            f"{QUIET_EXCESS} ({RULE}); a figure measured now would share the cores with other jobs")


def refuse_unless_quiet(threads: int, *, wait_s: float = 0.0, sleep: Callable[[float], None] = time.sleep,
                        read: Callable[[], float | None] | None = None) -> float | None:
    """The 1-minute load at the start, after waiting up to ``wait_s`` seconds for it to fall under the rule; exit
    status 2 with the reason when it does not. ``read``: the load reader (default :func:`load_average`)."""
    deadline = time.monotonic() + wait_s
    while True:
        load = (read or load_average)()
        problem = start_problem(threads, load)
        if problem is None:
            return load
        if time.monotonic() >= deadline:
            print(f"error: {problem}\nhint: wait for a quiet machine (or pass --wait-quiet SECONDS)", file=sys.stderr)
            raise SystemExit(2)
        sleep(SAMPLE_EVERY_S)


class LoadSampler:
    """Samples the 1-minute load in a background thread while its body runs (a context manager); ``record()``
    gives the :class:`QuietRecord` so far (the sampler keeps running until the body ends)."""

    def __init__(self, threads: int, *, start: float | None = None, every_s: float = SAMPLE_EVERY_S,
                 read: Callable[[], float | None] | None = None) -> None:
        self.threads = threads
        self._read = read or (lambda: load_average(read_proc))
        self.start = start if start is not None else self._read()
        self._every = every_s
        self._samples: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)
        self._window = LoadWindow()
        self._first = self._window.sample()
        self._t0 = time.monotonic()

    def _take(self) -> None:
        value = self._read()
        if value is not None:
            with self._lock:
                self._samples.append(value)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._take()

    def __enter__(self) -> LoadSampler:
        self._t0 = time.monotonic()
        self._first = self._window.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def record(self) -> QuietRecord:
        """The loads so far, a last reading included."""
        self._take()
        other = self._window.finish(self._first, self._window.sample()).other_cpus
        with self._lock:
            samples = list(self._samples)
        return QuietRecord(
            threads=self.threads, start=self.start, during_max=max(samples) if samples else None,
            during_mean=round(sum(samples) / len(samples), 3) if samples else None, samples=len(samples),
            other_cpus=None if other is None else round(other, 3), wall_s=round(time.monotonic() - self._t0, 1))


def main(argv: list[str] | None = None) -> int:
    """``python -m specframe.bench.quiet [--wait SECONDS]``: exit 0 when the machine is quiet enough to start a
    benchmark, 2 (with the reason) when it is not within ``--wait`` seconds; for shell scripts."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a quiet machine (default: 0)")
    args = ap.parse_args(argv)
    load = refuse_unless_quiet(0, wait_s=max(args.wait, 0.0))
    print(f"quiet: 1-minute load {load if load is not None else 'unknown'} ({RULE})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
