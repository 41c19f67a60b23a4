"""The quiet-machine rule: the one definition every benchmark script, test and docs table uses.

A speed figure means what it says only when the benchmark had the cores it asked for. The rule reads the Linux
1-minute load average (``/proc/loadavg``: the exponentially smoothed count of runnable threads) and subtracts
the threads the benchmark itself keeps busy; what is left is the **excess** load, other processes' share:

* **at the start** the excess must be below :data:`QUIET_EXCESS` (0.3). Nothing of the benchmark has run yet
  (only its imports), so its own share is counted as 0 there;
* **during the run** a background :class:`LoadSampler` reads the load every :data:`SAMPLE_EVERY_S` seconds (the
  kernel updates it every 5 s); the largest reading minus the benchmark's threads must stay below 0.3 too.

A run is **quiet** when both hold and its speed probes (:mod:`specframe.bench.steadiness`: what the load cannot
see, another guest on the host), the fixed probe and the run's reference workload (a fixed piece of its own
work), each stayed within 15 % of itself over the whole run (a run that interleaves its sides: the reference
workload at the two ends of each block, :mod:`specframe.bench.steadiness`). 0.3 is a third of a core: a daemon's
blips stay far below it, another job (a test suite, a compiler, a second benchmark) keeps a core busy and exceeds
it within a minute. On 2 cores a load of 0.9 before the start is most of the second core: such a run is not quiet.

The record a run writes (:meth:`QuietRecord.to_dict`, the ``protocol.quiet`` field of every result JSON) holds the
start load, the maximum and mean of the samples, their count, the benchmark's threads and the CPU time other
processes used over the run (:mod:`specframe.metrics.machine_load`, informational). :func:`judge` applies the
rule to such a record, so a published file is checked against the same rule as a run
(``tests/benchmarks/test_published.py``); a file without one (written before the rule) is not quiet.

Worked example (2 cores, 1 benchmark thread): start load 0.12 -> excess 0.12 < 0.3; samples 0.4, 0.8, 1.05,
1.21 -> max excess 1.21 - 1 = 0.21 < 0.3: quiet. Start 0.85: excess 0.85, refused before any work.

**A benchmark of several processes** (``LoadSampler(process_tree=True)``; the vLLM peer, whose engine runs a
front-end, a scheduling loop and a worker as separate processes) cannot name the threads it keeps busy: vLLM's
scheduling loop busy-waits beside the worker, so the load minus the compute threads charges the
benchmark's own processes to "other processes". The same quantity, other processes' share, is then measured
directly instead of inferred: every sample also reads the machine's busy CPU seconds and the CPU seconds of the
benchmark's process tree (:mod:`specframe.metrics.process_tree`), and the share of a window is

    outside = (busy CPU s - tree CPU s, over the window) / window seconds          # mean cores others used

over every trailing :data:`OUTSIDE_WINDOW_S`-second window (the load average's minute; the whole run when it is
shorter), sampled every 5 s. Quiet: the load below 0.3 at the start (nothing of the benchmark runs yet) and the
largest ``outside`` below 0.3 of a core, with no gap between two readings longer than :data:`MAX_GAP_S` (a
stalled sampler would stretch a window and dilute a neighbour's minute). Worked example: over a minute the
machine was busy 70 CPU-s and the tree used 62 -> outside 8 / 60 = 0.13 of a core: quiet; a test suite that took
40 CPU-s of that minute -> outside 48 / 60 = 0.8: not quiet.

Accounting races: a descendant reaped between the reading of its own line and its parent's is counted twice in
that one reading, which misstates only the windows that start or end there (the windows ending 5 s later cover
nearly the same minute from clean readings); a descendant that leaves the tree (an orphan) takes its CPU time out
of it, which can only make the windows across that moment look busier.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from specframe.bench.steadiness import BLOCK_TRIES, judge_blocks, judge_steady
from specframe.metrics.machine_load import LoadWindow, load_average, read_proc
from specframe.metrics.process_tree import machine_and_tree_cpu_seconds

#: Largest excess 1-minute load (the load minus the benchmark's own threads) of a quiet machine.
QUIET_EXCESS = 0.3
#: Seconds between two load readings during a run (the kernel refreshes the load average every 5 s).
SAMPLE_EVERY_S = 5.0
#: The rule in one line, recorded with every run and quoted by the docs.
RULE = (f"1-minute load minus the benchmark's own threads below {QUIET_EXCESS} at the start and at every "
        f"{SAMPLE_EVERY_S:g}-second sample of the run")
#: Seconds of the trailing windows over which a multi-process benchmark's outside CPU share is averaged.
OUTSIDE_WINDOW_S = 60.0
#: The rule for a benchmark of several processes (see the module docstring), recorded in place of :data:`RULE`.
RULE_PROCESS_TREE = (f"1-minute load below {QUIET_EXCESS} at the start; CPU used by processes outside the "
                     f"benchmark's process tree below {QUIET_EXCESS} of a core over every trailing "
                     f"{OUTSIDE_WINDOW_S:g}-second window, sampled every {SAMPLE_EVERY_S:g} s")
#: Longest gap between two readings of a process-tree run that still judges its windows as minutes.
MAX_GAP_S = 4 * SAMPLE_EVERY_S
#: The two ways a run's other-process share is measured (``QuietRecord.measure``).
MEASURE_LOAD, MEASURE_PROCESS_TREE = "load", "process-tree"


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
    measure: str = MEASURE_LOAD  # MEASURE_PROCESS_TREE: judged by ``outside_max``, not ``during_max``
    outside_max: float | None = None  # largest trailing-window mean of cores used outside the process tree
    window_s: float | None = None  # the trailing window of ``outside_max``
    max_gap_s: float | None = None  # the longest gap between two CPU readings (a stalled sampler dilutes windows)
    probes_ms: list[float] | None = None  # the fixed probe's times, start to end (specframe.bench.steadiness)
    reference_ms: list[float] | None = None  # the run's reference workload, timed at each probe once registered
    reference: str | None = None  # what that workload is
    # An interleaved run (steadiness judged block by block): what one block holds; the kept blocks ``k``, each
    # from the k-th to the k+1-th entry of ``reference_ms`` (indices into the reference's series: ``probes_ms``
    # holds one more entry, at the start, so its entries line up with the reference's from index 1 on); and the
    # tries dropped because the reference disagreed at their ends (each block measured again after them).
    pairing: str | None = None
    blocks: list[int] | None = None
    retried: list[int] | None = None

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
    if record.get("measure", MEASURE_LOAD) == MEASURE_PROCESS_TREE:
        verdict = judge_outside(float(start), record.get("outside_max"), record.get("max_gap_s"))
    elif excess(float(during), threads) >= QUIET_EXCESS:
        return False, (f"1-minute load up to {float(during):.2f} during the run with {threads} benchmark "
                       f"thread(s): excess {excess(float(during), threads):.2f} >= {QUIET_EXCESS}")
    else:
        verdict = True, (f"quiet: load {float(start):.2f} at the start, at most {float(during):.2f} during the run "
                         f"({threads} benchmark thread(s))")
    probes, reference, blocks = record.get("probes_ms"), record.get("reference_ms"), record.get("blocks")
    if record.get("pairing") and not (isinstance(blocks, list) and all(isinstance(k, int) for k in blocks)):
        return False, "steadiness not shown: the record declares an interleaved run but holds no list of its blocks"
    steady = judge_steady(probes if isinstance(probes, list) else None,
                          reference if isinstance(reference, list) else None,
                          blocks if record.get("pairing") else None)
    return verdict if not verdict[0] or steady[0] else steady


def judge_outside(start: float, outside_max: Any, max_gap_s: Any) -> tuple[bool, str]:
    """The process-tree rule's verdict once the start is quiet: the largest outside share below the threshold,
    from readings no further apart than :data:`MAX_GAP_S`."""
    if not isinstance(outside_max, (int, float)) or not isinstance(max_gap_s, (int, float)):
        return False, "no CPU time of the processes outside the benchmark's process tree could be read"
    if max_gap_s > MAX_GAP_S:
        return False, (f"the CPU readings were up to {max_gap_s:.0f} s apart (at most {MAX_GAP_S:g} s): the windows "
                       "do not bound a minute")
    if outside_max >= QUIET_EXCESS:
        return False, (f"processes outside the benchmark's process tree used {outside_max:.2f} of a core over a "
                       f"{OUTSIDE_WINDOW_S:g}-second window of the run (>= {QUIET_EXCESS})")
    return True, (f"quiet: load {start:.2f} at the start, processes outside the benchmark's process tree at most "
                  f"{outside_max:.2f} of a core during the run")


def outside_share_max(points: Sequence[tuple[float, float, float]],
                      window_s: float = OUTSIDE_WINDOW_S) -> float | None:
    """The largest mean number of cores used outside the process tree over trailing ``window_s``-second windows.

    ``points``: ``(seconds, machine busy CPU s, tree CPU s)`` readings in time order. Each reading ending a full
    window is paired with the latest reading at least ``window_s`` before it; a run shorter than one window is
    one window from its first reading to its last. A negative difference (a descendant left the tree, see
    :mod:`specframe.metrics.process_tree`) counts as 0 for the tree, so the share errs towards busy.

    Worked example (window 60 s): readings at 0, 30, 60, 90 s with busy 0, 31, 62, 100 CPU-s and tree 0, 30, 60, 90
    -> windows [0, 60]: (62 - 60) / 60 = 0.03; [30, 90]: (69 - 60) / 60 = 0.15 -> 0.15.
    """
    if len(points) < 2:
        return None
    shares: list[float] = []
    start = 0
    for end in range(1, len(points)):
        while start + 1 < end and points[end][0] - points[start + 1][0] >= window_s:
            start += 1
        t0, busy0, tree0 = points[start]
        t1, busy1, tree1 = points[end]
        full = t1 - t0 >= window_s
        if (full or (end == len(points) - 1 and start == 0)) and t1 > t0:
            shares.append(max((busy1 - busy0) - max(tree1 - tree0, 0.0), 0.0) / (t1 - t0))
    return round(max(shares), 3) if shares else None


def start_problem(threads: int, load: float | None) -> str | None:
    """Why the machine is not quiet enough to start (None: it is, or the load cannot be read)."""
    if load is None or excess(load, 0) < QUIET_EXCESS:
        return None
    return (f"the machine is busy: 1-minute load {load:.2f} before the start, the quiet rule allows less than "
            f"{QUIET_EXCESS} there; a figure measured now would share the cores with other jobs")


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


class BlockTry:
    """One try of a block of an interleaved run (:meth:`LoadSampler.block_tries`)."""

    def __init__(self, sampler: LoadSampler, *, last: bool) -> None:
        self.sampler = sampler
        self.last = last
        self.kept: bool | None = None  # None until closed

    def close(self) -> bool:
        """Time the closing probes; True: keep this try's decodes (the reference agreed, or it was the last try)."""
        self.kept = bool(self.sampler.close_block(last_try=self.last) or self.last)
        return self.kept


class LoadSampler:
    """Samples the 1-minute load in a background thread while its body runs (a context manager); ``record()``
    gives the :class:`QuietRecord` so far (the sampler keeps running until the body ends).

    ``process_tree=True``: a benchmark of several processes; every sample also reads the machine's and the process
    tree's CPU seconds (``cpu``: the reader, default
    :func:`~specframe.metrics.process_tree.machine_and_tree_cpu_seconds`) and the record is judged by the outside
    share over trailing ``window_s``-second windows (module docstring)."""

    def __init__(self, threads: int, *, start: float | None = None, every_s: float = SAMPLE_EVERY_S,
                 read: Callable[[], float | None] | None = None, process_tree: bool = False,
                 window_s: float = OUTSIDE_WINDOW_S,
                 cpu: Callable[[], tuple[float, float] | None] | None = None,
                 probe: Callable[[], float] | None = None) -> None:
        self.threads = threads
        self._probe = probe
        self._probes: list[float] = []
        self._reference: Callable[[], float] | None = None
        self._reference_what: str | None = None
        self._references: list[float] = []
        self._pairing: str | None = None
        self._blocks: list[int] = []
        self._retried: list[int] = []
        self._read = read or (lambda: load_average(read_proc))
        self.start = start if start is not None else self._read()
        self._every = every_s
        self._samples: list[float] = []
        self._process_tree = process_tree
        self._window_s = window_s
        self._cpu = cpu or machine_and_tree_cpu_seconds
        self._cpu_points: list[tuple[float, float, float]] = []  # (seconds, machine busy CPU s, tree CPU s)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)
        self._window = LoadWindow()
        self._first = self._window.sample()
        self._t0 = time.monotonic()

    def _take(self) -> None:
        with self._lock:  # the sampler thread and record() both take readings: one at a time, in time order
            value = self._read()
            reading = self._cpu() if self._process_tree else None
            now = time.monotonic()
            if value is not None:
                self._samples.append(value)
            if reading is not None:
                self._cpu_points.append((now, *reading))

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._take()

    def probe_now(self) -> None:
        """Time the steadiness probe and the reference workload (each where set) now, between phases of the run:
        nothing is measured meanwhile."""
        if self._probe is not None:
            self._probes.append(self._probe())
        if self._reference is not None:
            self._references.append(self._reference())

    def set_reference(self, probe: Callable[[], float], what: str) -> None:
        """Register the run's reference workload (:func:`specframe.bench.steadiness.reference_probe`; ``what``
        says what it is) and time it at once: it is timed again at every later probe point."""
        self._reference, self._reference_what = probe, what
        self._references.append(probe())

    def interleave(self, what: str) -> None:
        """Declare the run interleaved (``what``: what one block holds, recorded as ``pairing``): its steadiness
        is then judged block by block (:func:`specframe.bench.steadiness.judge_blocks`), each block tried through
        :meth:`block_tries`."""
        if self._reference is None:
            raise RuntimeError("register the reference workload (set_reference) before declaring blocks")
        self._pairing = what

    def open_block(self) -> None:
        """Time both probes before a block whose start is not the previous block's end (nothing measured since)."""
        self.probe_now()

    def close_block(self, *, last_try: bool) -> bool:
        """Time both probes after a block and say whether the reference workload agreed at the block's two ends
        (within :data:`~specframe.bench.steadiness.STEADY_DRIFT`; each end the fastest of a few tries, so a dip in
        the middle of a block is not seen). A block that agreed, or its ``last_try``, is kept as block ``k`` (its
        ends are the reference's ``k``-th and ``k + 1``-th timings); one that did not is recorded as retried (its
        decodes are the caller's to drop). The closing timing opens the next block."""
        if self._pairing is None:
            raise RuntimeError("declare the run interleaved (interleave) before closing blocks")
        self.probe_now()
        k = len(self._references) - 2
        steady = judge_blocks(self._references, [k])[0]
        (self._blocks if steady or last_try else self._retried).append(k)
        return steady

    def block_tries(self) -> Iterator[BlockTry]:
        """The tries of one block: up to :data:`~specframe.bench.steadiness.BLOCK_TRIES`, each to be closed
        (:meth:`BlockTry.close`) once the block's decodes are done; a try that did not hold is dropped and the
        block measured again after a fresh opening timing (so one outlying timing costs one try, not two); the
        last try is kept whatever it says. The first block of a phase is opened by :meth:`open_block`; a kept
        block's closing timing opens the next.

        Example::

            for attempt in sampler.block_tries():
                results = decode_every_side(prompt)
                if attempt.close():
                    keep(results)
        """
        for number in range(BLOCK_TRIES):
            if number:
                self.open_block()
            attempt = BlockTry(self, last=number == BLOCK_TRIES - 1)
            yield attempt
            if attempt.kept is None:
                raise RuntimeError("each try of a block must be closed (attempt.close()) once its decodes are done")
            if attempt.kept:
                return

    def __enter__(self) -> LoadSampler:
        self.probe_now()
        self._t0 = time.monotonic()
        self._first = self._window.sample()
        if self._process_tree:
            reading = self._cpu()
            if reading is not None:
                self._cpu_points.append((self._t0, *reading))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def record(self) -> QuietRecord:
        """The loads so far, a last reading (and a last probe) included."""
        self.probe_now()
        self._take()
        other = self._window.finish(self._first, self._window.sample()).other_cpus
        with self._lock:
            samples = list(self._samples)
            points = list(self._cpu_points)
        tree: dict[str, Any] = {}
        if self._process_tree:
            whole = outside_share_max(points[:1] + points[-1:], window_s=float("inf")) if points else None
            gaps = [b[0] - a[0] for a, b in pairwise(points)]
            tree = {"measure": MEASURE_PROCESS_TREE, "rule": RULE_PROCESS_TREE, "window_s": self._window_s,
                    "outside_max": outside_share_max(points, self._window_s),
                    "max_gap_s": round(max(gaps), 1) if gaps else None}
            other = whole
        return QuietRecord(
            threads=self.threads, start=self.start, during_max=max(samples) if samples else None,
            during_mean=round(sum(samples) / len(samples), 3) if samples else None, samples=len(samples),
            other_cpus=None if other is None else round(other, 3), wall_s=round(time.monotonic() - self._t0, 1),
            probes_ms=list(self._probes) if self._probe is not None else None,
            reference_ms=list(self._references) if self._reference is not None else None,
            reference=self._reference_what, pairing=self._pairing,
            blocks=list(self._blocks) if self._pairing else None,
            retried=list(self._retried) if self._pairing else None, **tree)


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
