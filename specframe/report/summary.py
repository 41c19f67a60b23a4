"""From result records to per-(method, dataset) statistics, each method paired with its AR baseline and with
transformers' ``generate()`` (the ``hf_generate`` reference, :mod:`specframe.reference`).

A record is paired with the baseline record of the same target (``target_hash``), dataset, question and turn that
ran under the same conditions: the same sampling settings (``sampling``, or ``temperature`` in older files) and the
same machine (``machine``: CPU model, cores, GPU; records written before the field existed pair only with each
other). Records without a partner count for τ but not for speedup; a record whose only partners ran under other
conditions is *set aside* from the speedups, and :attr:`Summary.set_aside` says how many and why (``report`` prints
it), so a T = 0.7 method is never timed against a greedy baseline, nor one machine against another. The same
pairing against the reference's records (``reference: true``) gives each cell its speedups over ``generate()``
(``CellStats.versus_reference``), beside those over the plain loop; files without reference records leave them
empty. ``ALL`` pools every dataset of a method (used by the per-depth and stage tables); the main table's average
column is the mean of the per-dataset cells, as in the papers. A cell counts the records behind it (its own and
their baseline partners) that were measured under contention (``machine_load.contended``; records without the field
count as quiet).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specframe.bench.results import ResultsFileError
from specframe.metrics.acceptance import DepthRates, depth_rates, tau_per_response, tau_pooled
from specframe.metrics.machine_load import MachineLoad
from specframe.metrics.memory import pooled_memory
from specframe.metrics.siblings import SiblingTable
from specframe.metrics.speedup import (
    Estimate,
    PairedRun,
    aggregate_estimate,
    geomean_estimate,
    tpot_speedup,
)

ALL = "all"
Record = dict[str, Any]


@dataclass(frozen=True)
class SummaryOptions:
    baseline: str | None = None  # baseline method name; default: records flagged `baseline`
    resamples: int = 2000  # bootstrap resamples
    confidence: float = 0.95
    seed: int = 0  # bootstrap seed
    max_depth: int | None = None  # per-depth rates up to this depth (default: deepest accepted)


@dataclass
class Versus:
    """Speedups of a cell's records over their partners in one reference method, and output equality."""

    aggregate: Estimate = field(default_factory=lambda: Estimate(math.nan))
    geomean: Estimate = field(default_factory=lambda: Estimate(math.nan))
    tpot: float = math.nan
    identical: tuple[int, int] | None = None  # (outputs equal to the partner's, pairs) at temperature 0
    contended: int = 0  # partner records measured under contention


@dataclass
class CellStats:
    """Statistics of one method on one dataset (or ``ALL``)."""

    method: str
    dataset: str
    responses: int
    rounds: int
    new_tokens: int
    seconds: float
    tau_per_response: float
    tau_pooled: float
    depth: DepthRates
    nodes_per_round: float
    stage_ns: dict[str, int]
    speedup_aggregate: Estimate = field(default_factory=lambda: Estimate(math.nan))
    speedup_geomean: Estimate = field(default_factory=lambda: Estimate(math.nan))
    speedup_tpot: float = math.nan
    identical: tuple[int, int] | None = None  # (outputs equal to the baseline's, pairs) at temperature 0
    contended: int = 0  # records behind the cell (own + baseline partners) measured under contention
    versus_reference: Versus = field(default_factory=lambda: Versus())  # against transformers' generate()
    siblings: SiblingTable = field(default_factory=lambda: SiblingTable({}))  # continuation by depth and rank
    memory: dict[str, Any] | None = None  # parameters and mean per-request state (specframe.metrics.memory)
    plain_reasons: dict[str, int] = field(default_factory=dict)  # rounds without a verified draft node, by reason

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else math.nan

    @property
    def round_seconds(self) -> float:
        """Mean wall time of a round from the per-stage timers (prefill excluded)."""
        return sum(self.stage_ns.values()) / 1e9 / self.rounds if self.rounds and self.stage_ns else math.nan


@dataclass
class MethodInfo:
    name: str
    base_method: str
    sweep: dict[str, Any]
    baseline: bool
    temperature: float
    reference: bool = False


@dataclass(frozen=True)
class SetAside:
    """Records of a method left out of its speedups against ``against``, and why."""

    method: str
    against: str  # "the baseline" or "generate()"
    reason: str
    records: int


@dataclass
class Summary:
    methods: list[MethodInfo]
    datasets: list[str]
    cells: dict[tuple[str, str], CellStats]
    baseline_names: list[str]
    reference_names: list[str] = field(default_factory=list)
    reference_kernels: list[str] = field(default_factory=list)  # how generate() ran (the records' notes)
    set_aside: list[SetAside] = field(default_factory=list)
    implausible: list[str] = field(default_factory=list)  # per method: records whose times no run produces

    def cell(self, method: str, dataset: str) -> CellStats | None:
        return self.cells.get((method, dataset))


def _key(record: Record) -> tuple[str, str, str, int]:
    return record["target_hash"], record["dataset"], str(record["question_id"]), int(record["turn"])


def _sampling(record: Record) -> tuple[float, int, float]:
    """(temperature, top_k, top_p); older records hold the temperature only (no filtering then)."""
    given = record.get("sampling") or {}
    return (float(record["temperature"]), int(given.get("top_k", 0)), float(given.get("top_p", 1.0)))


def _machine(record: Record) -> tuple[str, int | None, str | None] | None:
    """(CPU model, cores, GPU), or None for records written before the field existed."""
    given = record.get("machine")
    return None if not isinstance(given, dict) else (str(given.get("cpu")), given.get("cores"), given.get("gpu"))


def _describe_sampling(value: tuple[float, int, float]) -> str:
    t, k, p = value
    text = "greedy" if t == 0 else f"T = {t:g}"
    return text + (f", top-k {k}" if k and t else "") + (f", top-p {p:g}" if p < 1 and t else "")


def _describe_machine(value: tuple[str, int | None, str | None] | None) -> str:
    if value is None:
        return "an unnamed machine (a record written before records named their machine)"
    cpu, cores, gpu = value
    return f"{cpu} ({cores} cores{', ' + gpu if gpu else ''})"


def _unlike(record: Record, partner: Record) -> str | None:
    """Why ``partner`` (same prompt) cannot be paired with ``record``, or None when it ran under the same conditions."""
    if _sampling(record) != _sampling(partner):
        return f"ran {_describe_sampling(_sampling(record))}, its partner {_describe_sampling(_sampling(partner))}"
    if _machine(record) != _machine(partner):
        return f"ran on {_describe_machine(_machine(record))}, its partner on {_describe_machine(_machine(partner))}"
    return None


Partners = dict[tuple[str, str, str, int], list[Record]]


def partner_of(record: Record, partners: Partners) -> tuple[Record | None, str | None]:
    """The partner of ``record`` (same prompt, same conditions), or None with why the prompt's partners do not pair
    (None as well when there is no partner at all)."""
    candidates = partners.get(_key(record), [])
    reason = None
    for candidate in candidates:
        reason = _unlike(record, candidate)
        if reason is None:
            return candidate, None
    return None, reason


def _tokens(record: Record) -> int:
    return int(record["choices"][0]["new_tokens"][0])


def _seconds(record: Record) -> float:
    return float(record["total_ns"]) / 1e9


def is_contended(record: Record) -> bool:
    """Whether the record's machine-load field says it was measured under contention."""
    load = MachineLoad.from_dict(record.get("machine_load"))
    return bool(load is not None and load.contended)


def _tpot(record: Record) -> float | None:
    decoded = _tokens(record) - 1  # the prefill's token is not decoded
    return (record["total_ns"] - record["prefill_ns"]) / 1e9 / decoded if decoded > 0 else None


def _pairs(records: Sequence[Record], partners: Partners) -> list[tuple[Record, Record]]:
    found = ((r, partner_of(r, partners)[0]) for r in records)
    return [(r, p) for r, p in found if p is not None]


def _versus(records: Sequence[Record], partners: Partners, options: SummaryOptions, itself: bool) -> Versus:
    """Speedups of ``records`` over their partners (1 by definition when they are the partners: ``itself``)."""
    pairs = _pairs(records, partners)
    if itself:
        return Versus(Estimate(1.0, n=len(pairs)), Estimate(1.0, n=len(pairs)), 1.0) if pairs else Versus()
    if not pairs:
        return Versus()
    runs = [PairedRun(_tokens(r), _seconds(r), _tokens(b), _seconds(b)) for r, b in pairs]
    boot = {"resamples": options.resamples, "confidence": options.confidence, "seed": options.seed}
    tpots = [(_tpot(r), _tpot(b)) for r, b in pairs]
    tpots = [(m, b) for m, b in tpots if m is not None and b is not None]
    identical = None
    if all(r["temperature"] == 0 for r, _ in pairs):
        identical = (sum(r["tokens"] == b["tokens"] for r, b in pairs), len(pairs))
    return Versus(aggregate_estimate(runs, **boot), geomean_estimate(runs, **boot),
                  tpot_speedup([m for m, _ in tpots], [b for _, b in tpots]), identical,
                  sum(is_contended(b) for _, b in pairs))


def _cell(method: str, dataset: str, records: Sequence[Record], partners: Partners, options: SummaryOptions,
          is_baseline: bool, references: Partners, is_reference: bool) -> CellStats:
    committed = [r["choices"][0]["accept_lengths"] for r in records]
    accepted = [a for r in records for a in r["accepted"]]
    rounds = sum(len(c) for c in committed)
    stage_ns: dict[str, int] = {}
    for r in records:
        for stage, ns in r["stage_ns"].items():
            stage_ns[stage] = stage_ns.get(stage, 0) + int(ns)
    nodes = sum(sum(r["tree_nodes"]) for r in records)
    stats = CellStats(method=method, dataset=dataset, responses=len(records), rounds=rounds,
                      new_tokens=sum(_tokens(r) for r in records), seconds=sum(_seconds(r) for r in records),
                      tau_per_response=tau_per_response(committed), tau_pooled=tau_pooled(committed),
                      depth=depth_rates(accepted, options.max_depth),
                      nodes_per_round=nodes / rounds if rounds else math.nan, stage_ns=stage_ns,
                      siblings=SiblingTable.from_rows(r.get("sibling_continuation") or [] for r in records),
                      memory=pooled_memory(r.get("memory") for r in records))
    pairs = _pairs(records, partners)
    behind = {id(r): r for r in records} | ({} if is_baseline else {id(b): b for _, b in pairs})
    stats.contended = sum(is_contended(r) for r in behind.values())
    for r in records:  # absent in files written before the reasons were recorded
        for reason, n in (r.get("plain_reasons") or {}).items():
            stats.plain_reasons[str(reason)] = stats.plain_reasons.get(str(reason), 0) + int(n)
    stats.versus_reference = _versus(records, references, options, is_reference)
    versus = _versus(records, partners, options, is_baseline)  # the baseline itself: speedup 1 by definition
    stats.speedup_aggregate, stats.speedup_geomean = versus.aggregate, versus.geomean
    stats.speedup_tpot, stats.identical = versus.tpot, versus.identical
    return stats


def summarize(records: Sequence[Record], options: SummaryOptions | None = None) -> Summary:
    """Group records by method and dataset (first-appearance order) and compute every statistic."""
    options = options or SummaryOptions()
    methods: dict[str, MethodInfo] = {}
    datasets: list[str] = []
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        name = r["method"]
        if name not in methods:
            methods[name] = MethodInfo(name, r.get("base_method", name), dict(r.get("sweep") or {}),
                                       bool(r.get("baseline")), float(r.get("temperature", 0.0)),
                                       bool(r.get("reference")))
        if r["dataset"] not in datasets:
            datasets.append(r["dataset"])
        groups.setdefault((name, r["dataset"]), []).append(r)
    if options.baseline is not None:
        if options.baseline not in methods:
            raise ResultsFileError(f"no records of baseline method '{options.baseline}'",
                                   hint=f"methods in these files: {', '.join(methods)}")
        baseline_names = [options.baseline]
    else:
        baseline_names = [m.name for m in methods.values() if m.baseline]
    reference_names = [m.name for m in methods.values() if m.reference and m.name not in baseline_names]
    partners: Partners = {}
    references: Partners = {}
    for r in records:
        if r["method"] in baseline_names:
            partners.setdefault(_key(r), []).append(r)
        if r["method"] in reference_names:
            references.setdefault(_key(r), []).append(r)
    ordered = sorted(methods.values(), key=lambda m: (m.name not in baseline_names, m.name not in reference_names))
    cells: dict[tuple[str, str], CellStats] = {}
    for m in ordered:
        roles = (m.name in baseline_names, m.name in reference_names)
        pooled: list[Record] = []
        for ds in datasets:
            group = groups.get((m.name, ds), [])
            if group:
                cells[(m.name, ds)] = _cell(m.name, ds, group, partners, options, roles[0], references, roles[1])
                pooled.extend(group)
        cells[(m.name, ALL)] = _cell(m.name, ALL, pooled, partners, options, roles[0], references, roles[1])
    kernels = list(dict.fromkeys(str(r.get("reference_kernels") or "") for rs in references.values() for r in rs))
    return Summary(methods=ordered, datasets=datasets, cells=cells, baseline_names=baseline_names,
                   reference_names=reference_names, reference_kernels=kernels,
                   set_aside=_set_aside(records, baseline_names, reference_names, partners, references),
                   implausible=implausible_lines(records))


#: Slowest plausible decode: 1e-3 tokens per second is one token every 17 minutes, slower than any model this
#: framework runs on any machine it supports (a CPU-offloaded 70B model still makes ~0.1 token/s).
MIN_TOKENS_PER_S = 1e-3
#: Longest plausible round (one draft + one verify forward): an hour.
MAX_ROUND_NS = 3600 * 10**9


def implausible_lines(records: Sequence[Record]) -> list[str]:
    """One line per method whose records hold times no run produces (:data:`MIN_TOKENS_PER_S`,
    :data:`MAX_ROUND_NS`): the schema bounds each time (``MAX_TURN_NS``) but not its ratio to the work done, and
    a baseline with ``total_ns`` 1e15 printed an 8e8x speedup with intervals. They stay in the tables, flagged."""
    counts: dict[str, list[int]] = {}
    for r in records:
        seconds = _seconds(r)
        rounds = max(len(r["choices"][0].get("accept_lengths") or ()), 1)
        slow = _tokens(r) / seconds < MIN_TOKENS_PER_S if seconds > 0 else False
        if slow or r["total_ns"] / rounds > MAX_ROUND_NS:
            entry = counts.setdefault(r["method"], [0, 0])
            entry[0] += 1
            entry[1] = max(entry[1], r["total_ns"])
    return [f"{method}: {n} record(s) with implausible times (up to total_ns {longest:.3g}: below "
            f"{MIN_TOKENS_PER_S:g} tokens/s or above {MAX_ROUND_NS / 3.6e12:g} h per round); their speedups mean "
            "nothing: check the result file" for method, (n, longest) in counts.items()]


def _set_aside(records: Sequence[Record], baseline_names: list[str], reference_names: list[str],
               partners: Partners, references: Partners) -> list[SetAside]:
    """The records left out of speedups because their prompt's partners ran under other conditions, by reason."""
    counts: dict[tuple[str, str, str], int] = {}
    for r in records:
        checks = []
        if r["method"] not in baseline_names:
            checks.append(("the baseline", partners))
        if r["method"] not in reference_names:
            checks.append(("generate()", references))
        for against, table in checks:
            reason = partner_of(r, table)[1]
            if reason is not None:
                key = (r["method"], against, reason)
                counts[key] = counts.get(key, 0) + 1
    return [SetAside(method, against, reason, n) for (method, against, reason), n in counts.items()]
