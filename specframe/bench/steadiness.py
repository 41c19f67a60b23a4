"""Is the machine as fast at the end of a run as at its start? A fixed probe, timed between the phases of a run.

The quiet rule (:mod:`specframe.bench.quiet`) sees what runs *inside* the machine. A virtual machine can also
lose speed to what runs outside it: another guest on the same physical core, the host's frequency or memory
bandwidth. None of that shows in the load, in ``/proc/stat`` or (on every hypervisor) in steal time. On this
project's 2-core KVM guest a report-split run slowed by half within an hour (the plain loop at 18.0 tokens/s on
math at its start, a fresh process decoding the same prompts at 8.9 an hour later) while the load stayed at
the benchmark's own 1.00: every later cell of that run was measured on a slower machine than its denominator.

So every measured run times a fixed **probe** at its start, at its end and wherever a script calls
``RunProtocol.probe()`` between phases (nothing is measured while it runs): a compute part (float32 matrix
products that fit in cache) and a memory part (summing a tensor larger than the caches), the minimum over
:data:`PROBE_REPEATS` tries, in milliseconds. A run is **steady** when its slowest probe is within
:data:`STEADY_DRIFT` (15 %) of its fastest. The probe takes about 0.1 s.

Worked example: probes 21.0, 21.4, 20.8 ms -> drift 21.4 / 20.8 - 1 = 3 %: steady; 21.0 at the start, 43.5 at the
end -> 109 %: not steady (the docs' table for that run would compare cells measured on two different machines).

Files written before the probe existed carry no probes and are judged by the load alone (their status lines
say which commit measured them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

#: Largest relative spread (slowest / fastest - 1) of a steady run's probes.
STEADY_DRIFT = 0.15
#: Tries per probe; the minimum is kept (the least disturbed).
PROBE_REPEATS = 5


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


def drift(probes: Sequence[float]) -> float | None:
    """Slowest over fastest probe, minus 1 (None with fewer than two probes)."""
    values = [p for p in probes if p > 0]
    return None if len(values) < 2 else max(values) / min(values) - 1


def judge_steady(probes: Sequence[float] | None) -> tuple[bool, str]:
    """Whether the probes of a run say the machine kept its speed, and why (a record without probes: yes, not
    judged)."""
    spread = drift(probes or [])
    if spread is None:
        return True, "no probes recorded"
    if spread > STEADY_DRIFT:
        listed = ", ".join(f"{p:.1f}" for p in probes or [])
        return False, (f"the machine's speed drifted during the run: the fixed probe took {listed} ms "
                       f"(+{spread:.0%} > {STEADY_DRIFT:.0%}): another guest or the host took the core")
    return True, f"steady: probes within {spread:.0%}"
