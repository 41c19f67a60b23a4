"""Which result files the docs may present as published measurements, and the line each table carries about it.

A figure is **published** when its run followed the measurement protocol (docs/concepts/benchmark-protocol.md):

* it ran under the quiet rule (:func:`specframe.bench.quiet.judge` on the file's ``protocol.quiet`` record), when it
  is a timed file: a file of counts (τ, acceptance rates; ``timed=False``) quotes no time, so the load is only
  recorded and shown (it can reach the counts only through the linear kernel ``cpu_linear: auto`` measures and
  picks, whose last-bit differences may flip a greedy near-tie; the plain loop it is checked against runs on the
  same kernels);
* a per-set report read the held-out ``report`` split with at least :data:`MIN_PROMPTS` prompts per set;
* no ``budget: auto`` controller learnt from the passes it measured: a run that never froze its controllers
  records :data:`NOT_FROZEN` (``protocol.controller``), and its request memory recalled prompts it then measured
  (scripts without a controller, or that learn online over prompts each measured once, record that instead);
* a timed file names its CPU (``machine.cpu``, or ``protocol.cpu`` as the recorder writes it): a speed means
  nothing without the machine it was measured on;
* it was no smoke run.

:data:`RESULT_FILES` lists every result file the README and ``docs/benchmarks.md`` render, with the script that
writes it and whether the docs call it published (a ``pending`` file may be absent: its table then says "not
measured yet"); ``tests/benchmarks/test_published.py`` checks each claim against
the file (:func:`verdict`), so a file cannot be called published unless it meets the protocol, and one that meets
it is not left unlabelled. Every rendered table carries :func:`status_line`: the CPU, the load at the start and
through the run, the split and prompt count, the commit, and "not under the quiet rule" with the reason where the
file does not meet it (the files measured before the rule: they stay as what they are, labelled, until re-measured
with ``bash benchmarks/rerun_docs_tables.sh``). Runs kept only for the record are in a ``superseded/`` folder
beside their table's file (``docs/benchmarks/batch-decoding/superseded/``), rendered nowhere.

Example::

    verdict(load("docs/benchmarks/auto-budget/results.json"))
    # Verdict(published=False, reasons=["no load recorded during the run (written before the quiet rule)"])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specframe.bench.quiet import MEASURE_PROCESS_TREE, judge

#: Fewest prompts per set of a published per-set speed report.
MIN_PROMPTS = 20
#: ``protocol.controller`` of a run that never froze its ``budget: auto`` controllers
#: (:class:`specframe.bench.learned_state.ControllerFreeze`) nor said why none was needed.
NOT_FROZEN = {"memory": "not frozen"}


@dataclass(frozen=True)
class ResultFile:
    """A result file the docs render (``key``: the sub-report inside it, if any)."""

    path: str
    script: str
    per_set: bool  # a report per prompt set (split and prompt count apply)
    published: bool = False  # what the docs claim; checked against the file
    key: str | None = None
    pending: bool = False  # may be absent: the docs then say "not measured yet" (its run is still to be made)
    timed: bool = True  # quotes times or speeds (the quiet rule applies); False: counts only (τ, acceptance)


RESULT_FILES: tuple[ResultFile, ...] = (
    ResultFile("docs/benchmarks/auto-budget/results.json", "auto_budget", per_set=True, published=True),
    ResultFile("checkpoints/smollm2-135m/eval.json", "smollm2_eval", per_set=True, published=True),
    ResultFile("checkpoints/smollm2-135m/eval.json", "corrector_ablation", per_set=True, key="corrector_ablation",
               published=True),
    ResultFile("docs/benchmarks/batch-decoding/results.json", "batch_decoding", per_set=True, published=True),
    ResultFile("docs/benchmarks/loop-overhead/tiny.json", "loop_overhead", per_set=False, published=True),
    ResultFile("docs/benchmarks/loop-overhead/tiny-before.json", "loop_overhead", per_set=False),
    ResultFile("docs/benchmarks/loop-overhead/smollm2-before.json", "loop_overhead", per_set=False),
    ResultFile("docs/benchmarks/loop-overhead/smollm2-after.json", "loop_overhead", per_set=False, published=True),
    ResultFile("docs/benchmarks/loop-overhead/smollm2.json", "loop_overhead", per_set=False, published=True),
    ResultFile("docs/benchmarks/draft-vocab/results.json", "draft_vocab", per_set=True, published=True),
    ResultFile("docs/benchmarks/linear-kernels/results.json", "linear_kernels", per_set=False,
               published=True),
    ResultFile("docs/benchmarks/vllm-peer/peer.json", "vllm_peer", per_set=True, published=True),
    ResultFile("docs/benchmarks/tree-baselines/results.json", "corrector_ablation", per_set=True, published=True),
    ResultFile("docs/benchmarks/siblings/smollm2.json", "sibling_acceptance", per_set=True, published=True,
               timed=False),
    ResultFile("docs/benchmarks/simulator/validation.json", "simulator_validation", per_set=True, published=True),
    ResultFile("docs/benchmarks/pctree-shapes/tune.json", "pctree_shapes", per_set=True, timed=False),
)


@dataclass(frozen=True)
class Verdict:
    published: bool
    reasons: list[str] = field(default_factory=list)  # why not (empty when published)


def sub_report(report: Mapping[str, Any], key: str | None) -> Mapping[str, Any]:
    return report if key is None else report[key]


def start_load(report: Mapping[str, Any]) -> float | None:
    """The 1-minute load at the start, in whichever field the file's script wrote it."""
    protocol = report.get("protocol") or {}
    quiet = protocol.get("quiet") or {}
    for value in (quiet.get("start"), report.get("load_before"), report.get("loadavg_at_start")):
        if isinstance(value, (int, float)):
            return float(value)
    return None


def cpu_of(report: Mapping[str, Any]) -> str | None:
    """The CPU ``report`` was measured on: its machine record's, else the one its protocol record names."""
    cpu = (report.get("machine") or {}).get("cpu") or (report.get("protocol") or {}).get("cpu")
    return str(cpu) if cpu else None


def verdict(report: Mapping[str, Any], *, per_set: bool = True, timed: bool = True) -> Verdict:
    """Whether ``report`` (a result JSON) meets the measurement protocol (see the module docstring); ``timed``:
    the file quotes times (the quiet rule applies), else counts only."""
    protocol = report.get("protocol") or {}
    reasons = []
    quiet, why = judge(protocol.get("quiet"))
    if timed and not quiet:
        start = start_load(report)
        reasons.append(why if start is None or protocol.get("quiet") else f"{why}; 1-minute load {start:.2f} at the "
                       "start")
    if timed and not cpu_of(report):
        reasons.append("the CPU is not recorded (a speed names the machine it was measured on)")
    if protocol.get("controller") == NOT_FROZEN:
        reasons.append("budget: auto's request memory was not frozen: it learnt from the measured passes and "
                       "recalled their prompts in later ones")
    if report.get("smoke"):
        reasons.append("a smoke run")
    if per_set:
        split = protocol.get("split") or report.get("split")
        if split != "report":
            reasons.append(f"split {split or 'not recorded'}, not report")
        prompts = protocol.get("prompts_per_set") or report.get("n")
        if not isinstance(prompts, int) or prompts < MIN_PROMPTS:
            reasons.append(f"{prompts} prompts per set (at least {MIN_PROMPTS})")
    return Verdict(not reasons, reasons)


def interleaving(quiet: Mapping[str, Any]) -> str:
    """How an interleaved run (:mod:`specframe.bench.steadiness`) met its machine, for the status line: its blocks,
    those measured again, and how far the reference workload moved across the run (what its absolute speeds
    average over); empty for a run that was not interleaved."""
    from specframe.bench.steadiness import drift

    blocks, retried, reference = quiet.get("blocks"), quiet.get("retried") or [], quiet.get("reference_ms") or []
    if not quiet.get("pairing") or not isinstance(blocks, list):
        return ""
    across = drift(reference) if isinstance(reference, list) else None
    moved = f"; the reference workload moved {across:.0%} across the run" if across is not None else ""
    return (f"interleaved: every ratio's sides decoded in the same block ({len(blocks)} blocks, "
            f"{len(retried)} measured again{moved})")


def status_line(report: Mapping[str, Any], *, per_set: bool = True, timed: bool = True) -> str:
    """The provenance line under a table: CPU, loads, split and prompts, commit, and the protocol's verdict."""
    protocol = report.get("protocol") or {}
    quiet = protocol.get("quiet") or {}
    start = start_load(report)
    load = f"1-minute load {start:.2f} at the start" if start is not None else "load at the start not recorded"
    if quiet.get("measure") == MEASURE_PROCESS_TREE and isinstance(quiet.get("outside_max"), (int, float)):
        load += (f"; processes outside the benchmark's process tree used at most {quiet['outside_max']:.2f} of a "
                 "core over any minute of the run")
        if isinstance(quiet.get("during_max"), (int, float)):
            load += f" (the load, its own processes included, up to {quiet['during_max']:.2f})"
    elif quiet.get("during_max") is not None:
        load += f", at most {quiet['during_max']:.2f} during the run ({quiet['threads']} benchmark thread(s))"
    else:
        load += ", not sampled during the run"
    interleaved = interleaving(quiet)
    if interleaved:
        load += f"; {interleaved}"
    elif timed and quiet and not quiet.get("probes_ms") and not quiet.get("reference_ms"):
        load += "; its steadiness was not checked (no speed probe: measured before the protocol timed one)"
    split = protocol.get("split") or report.get("split") or "not recorded"
    prompts = protocol.get("prompts_per_set") or report.get("n")
    commit = protocol.get("commit") or "not recorded"
    cache = (protocol.get("cache") or {}).get("state")
    parts = [f"CPU: {cpu_of(report) or 'not recorded'}", load,
             f"split: {split}" + (f", {prompts} prompts per set" if per_set and prompts else ""),
             f"commit: {commit}", f"cache: {cache or 'the user cache (not recorded)'}"]
    judged = verdict(report, per_set=per_set, timed=timed)
    quiet_ok = judge(protocol.get("quiet"))[0]
    head = "Measured under the protocol" if judged.published else \
        ("**Not a published measurement**" if quiet_ok or not timed else "**Not under the quiet rule**") + \
        " (" + "; ".join(judged.reasons) + ")"
    if judged.published and not timed:
        head += " for counts (τ and acceptance, no times: the quiet rule does not apply" + \
            ("" if quiet_ok else ", and the machine was not quiet") + ")"
    return f"{head}. " + "; ".join(parts) + "."
