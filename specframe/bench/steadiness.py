"""Is the machine as fast at the end of a run as at its start? A fixed probe, timed between the phases of a run.

The quiet rule (:mod:`specframe.bench.quiet`) sees what runs *inside* the machine. A virtual machine can also
lose speed to what runs outside it: another guest on the same physical core, the host's frequency or memory
bandwidth. None of that shows in the load, in ``/proc/stat`` or (on every hypervisor) in steal time, and a run
whose machine slowed measures its later cells on a slower machine than its denominator (the slowdowns seen on
this project's guests are in docs/concepts/benchmark-protocol.md).

So every measured run times a fixed **probe** at its start, at its end and wherever a script calls
``RunProtocol.probe()`` between phases (nothing is measured while it runs): a compute part (float32 matrix
products that fit in cache) and a memory part (summing a 64 MiB tensor), the minimum over :data:`PROBE_REPEATS`
tries, in milliseconds. A run is **steady** when its slowest probe is within :data:`STEADY_DRIFT` (15 %) of its
fastest. The probe takes about 0.1 s.

**The fixed probe is not enough on its own**: decoding has slowed by more than a quarter while it held (the docs
record the case). What a decode step depends on (a float32 model streamed per token through a last-level cache
shared with other guests, the dispatch of a few hundred small kernels) can change while a synthetic probe does
not. So a run also times a
**reference workload**: a fixed piece of its own work (:func:`reference_probe`: the plain loop decoding a fixed
prompt for a fixed number of tokens), registered once its model is loaded (``RunProtocol.set_reference``) and
timed beside the fixed probe at every later probe point. A run is steady only when both series are within
:data:`STEADY_DRIFT`; a run that recorded the fixed probe but no reference workload is **not shown steady**
(:func:`judge_steady`), since its one probe is known to miss the slowdown that matters.

Worked example: fixed probe 21.0, 21.4, 20.8 ms -> drift 3 %; reference 1,010, 1,420 ms -> +41 %: not steady (the
docs' table for that run would compare cells measured on two different machines).

Files written before the probe existed carry no probes and are judged by the load alone; their status lines say
that their steadiness was not checked (:func:`specframe.bench.published.status_line`).

**Interleaved runs are judged block by block.** A guest's speed can move by a fifth within half an hour, with
nothing in the guest to show it, so a run that measures
its denominator first and its methods an hour later compares two machines, and one that must stay within 15 % for
an hour or more rarely can. A script that **interleaves** its sides instead (``RunProtocol.interleave``: the
corrector ablation decodes each prompt with the plain loop, ``generate()`` and every method, in an order rotated
per prompt, before the next prompt) times the reference workload and the fixed probe at the two ends of each
**block** (one prompt's decodes): every ratio it reports compares decodes of one block, so the drift between
blocks falls on both sides of it alike, and the rotation spreads the drift within a block over every side. Such a
run is steady when **every block** is: the reference workload within :data:`STEADY_DRIFT` at the block's two ends
(each the fastest of a few tries, so a dip in the middle of a block is not seen; the fixed probe is recorded, but
its own noise at a block's scale is about that bound: :func:`judge_blocks`). A block whose machine moved more than
that is measured again after a fresh opening timing, up to :data:`BLOCK_TRIES` times (its earlier decodes are
dropped; the record lists them under ``retried``); one that never held is kept and fails the run. Absolute speeds
(tokens per second) of such a run are means over blocks timed on a moving machine: the status line gives the
reference's spread across the run.

Worked example: reference 1,190 / 1,210 / 1,305 / 1,320 ms at four block boundaries (+11 % across the run):
blocks 0-1 (+2 %), 1-2 (+8 %) and 2-3 (+1 %) all hold, the run is steady block by block; had block 1-2 read
1,210 -> 1,420 ms (+17 %) it would have been measured again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

#: Largest relative spread (slowest / fastest - 1) of a steady run's probes.
STEADY_DRIFT = 0.15
#: Tries per probe; the minimum is kept (the least disturbed).
PROBE_REPEATS = 5
#: Tries per reference workload (each takes about a second: the minimum of a few is enough).
REFERENCE_REPEATS = 3
#: Tries per block of an interleaved run before a block whose machine moved is kept as it is (and fails the run).
BLOCK_TRIES = 3


def probe_ms(repeats: int = PROBE_REPEATS) -> float:
    """The fixed workload's time in milliseconds, the fastest of ``repeats`` tries, on the torch threads the
    benchmark set (see the module docstring)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    square = torch.randn(192, 192, generator=generator)  # [192, 192]: 144 KiB, in cache
    big = torch.randn(16 * 1024 * 1024, generator=generator)  # [16M]: 64 MiB, past the caches
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product = square
        for _ in range(24):
            product = square @ product
        big.sum()
        best = min(best, time.perf_counter() - start)
        del product
    return round(best * 1000, 2)


def reference_probe(work: Callable[[], object], repeats: int = REFERENCE_REPEATS) -> Callable[[], float]:
    """A probe timing ``work`` (a fixed piece of the run's own work), the fastest of ``repeats`` tries, in ms."""

    def timed() -> float:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            work()
            best = min(best, time.perf_counter() - start)
        return round(best * 1000, 2)

    return timed


def drift(probes: Sequence[float]) -> float | None:
    """Slowest over fastest probe, minus 1 (None with fewer than two probes)."""
    values = [p for p in probes if p > 0]
    return None if len(values) < 2 else max(values) / min(values) - 1


def interval_drift(series: Sequence[float], k: int) -> float | None:
    """The drift between the ``k``-th and ``k + 1``-th values of ``series`` (None when either is missing)."""
    return drift(series[k:k + 2]) if 0 <= k and k + 1 < len(series) else None


def judge_blocks(reference: Sequence[float] | None, blocks: Sequence[int]) -> tuple[bool, str]:
    """An interleaved run's steadiness (module docstring): block ``k`` spans the reference workload's ``k``-th to
    ``k + 1``-th timing; every block within :data:`STEADY_DRIFT`. The fixed probe is recorded beside it but does
    not judge a block: at a block's scale its own noise is about the bound (6.4-8.3 ms within one minute of a
    smoke run whose reference moved 4 %), and it is not what decoding feels."""
    reference = list(reference or [])
    if len(reference) < 2 or not blocks:
        return False, "steadiness not shown: an interleaved run without a reference workload timed around its blocks"
    worst = 0.0
    for k in blocks:
        spread = interval_drift(reference, k)
        if spread is None:
            return False, f"steadiness not shown: block {k} has no reference timing on both sides"
        if spread > STEADY_DRIFT:
            return False, (f"the machine's speed moved within a block: the reference workload took "
                           f"{reference[k]:.1f} then {reference[k + 1]:.1f} ms around block {k} "
                           f"(+{spread:.0%} > {STEADY_DRIFT:.0%})")
        worst = max(worst, spread)
    across = drift(reference) or 0.0
    return True, (f"steady within every block: {len(blocks)} interleaved blocks each within {worst:.0%} (the "
                  f"reference moved {across:.0%} across the run, on both sides of every ratio alike)")


def judge_steady(probes: Sequence[float] | None, reference: Sequence[float] | None = None,
                 blocks: Sequence[int] | None = None) -> tuple[bool, str]:
    """Whether the probes of a run say the machine kept its speed, and why: both series (the fixed probe and the
    reference workload) within :data:`STEADY_DRIFT`, over the whole run, or within each of ``blocks`` for an
    interleaved run (:func:`judge_blocks`). A record without either: yes, not judged (written before the probe);
    with the fixed probe but no reference workload, or a reference timed once: no, not shown (module
    docstring)."""
    if blocks is not None:
        return judge_blocks(reference, blocks)
    for name, series in (("the fixed probe", probes or []), ("the reference workload", reference or [])):
        spread = drift(series)
        if spread is not None and spread > STEADY_DRIFT:
            listed = ", ".join(f"{p:.1f}" for p in series)
            return False, (f"the machine's speed drifted during the run: {name} took {listed} ms "
                           f"(+{spread:.0%} > {STEADY_DRIFT:.0%}): another guest or the host took the core")
    if not probes and not reference:
        return True, "no probes recorded"
    if not reference:
        return False, ("steadiness not shown: the run timed the fixed probe but not a reference workload of its "
                       "own (the fixed probe alone missed a 28 % slowdown of decoding)")
    if drift(reference) is None:
        return False, "steadiness not shown: the reference workload was timed only once"
    spreads = [drift(probes or []) or 0.0, drift(reference) or 0.0]
    return True, f"steady: probes within {max(spreads):.0%}"
