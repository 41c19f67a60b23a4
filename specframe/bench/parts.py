"""A result file measured in parts: which run measured which rows of which prompt kinds, and on which machine.

Some tables take longer to measure than a session lasts (the corrector ablation: every correction head as a chain and
inside DARTree, at three budgets, over four prompt kinds, takes hours on 2 cores even interleaved; the time is in
docs/concepts/benchmark-protocol.md). Such a table is measured in **parts** that each fit: some methods per run
(``--methods``) or some prompt kinds per run (``--kinds``), each part added to the file of the earlier ones by
``--extend``. The file's ``runs`` field lists every part: the kinds and methods it measured, its ``protocol`` record
(:mod:`specframe.bench.quiet`) and its ``machine``.
Two rules keep the parts honest:

* **one kind, one CPU**: the rows of one kind's table sit side by side (each row's speed ratio is against the plain
  loop of its own run, on the same prompts), so every part that measured rows of a kind ran on the same CPU;
  different kinds may come from different machines (each kind's table then names its own CPU, load and commit);
* **the file is judged by its weakest part**: its ``protocol`` is the first part's that fails the measurement
  protocol (:func:`specframe.bench.published.verdict`), else the last part's.

A file written by one run has no ``runs`` field: that run measured every kind and method it holds.

Worked example: ``runs = [{kinds: [math, code], machine: {cpu: "AMD EPYC"}, ...}, {kinds: [chat, translation],
machine: {cpu: "Intel Xeon"}, ...}]`` -> math and code were measured on the EPYC, chat and translation on the Xeon;
:func:`kind_report` of ``chat`` carries the Xeon and the second part's protocol, for the status line under chat's
table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Part:
    """One run of a file measured in parts."""

    kinds: tuple[str, ...]  # the prompt kinds it measured
    methods: tuple[str, ...]  # the method rows it measured (in each of its kinds)
    protocol: Mapping[str, Any] | None  # its measurement record (the JSON's ``protocol``)
    machine: Mapping[str, Any]  # its machine (the JSON's ``machine``: cpu, cores, ...)

    @property
    def cpu(self) -> str | None:
        return self.machine.get("cpu")

    def to_json(self) -> dict[str, Any]:
        return {"kinds": list(self.kinds), "methods": list(self.methods), "protocol": self.protocol,
                "machine": dict(self.machine)}


def methods_of(report: Mapping[str, Any]) -> tuple[str, ...]:
    """Every method label with a row in any kind of ``report``, sorted."""
    return tuple(sorted({c["method"] for kind in report.get("kinds", {}).values() for c in kind["cells"]}))


def parts(report: Mapping[str, Any]) -> list[Part]:
    """The parts of ``report``: its ``runs`` (an entry written before runs named their kinds and machine covers
    every kind of the file, on the file's machine), or the one run that wrote it."""
    kinds = tuple(report.get("kinds", {}))
    machine = report.get("machine") or {}
    runs = report.get("runs") or [{"methods": list(methods_of(report)), "protocol": report.get("protocol")}]
    return [Part(kinds=tuple(run.get("kinds") or kinds), methods=tuple(run.get("methods") or ()),
                 protocol=run.get("protocol"), machine=run.get("machine") or machine) for run in runs]


def kind_parts(report: Mapping[str, Any], kind: str) -> list[Part]:
    """The parts that measured rows of ``kind``."""
    return [part for part in parts(report) if kind in part.kinds]


def split_by_kind(report: Mapping[str, Any]) -> bool:
    """Whether some part of ``report`` measured only some of its kinds (each kind's table then needs its own
    status line)."""
    kinds = set(report.get("kinds", {}))
    return any(set(part.kinds) != kinds for part in parts(report))


def weakest(report: Mapping[str, Any], among: list[Part]) -> Part:
    """The first of ``among`` whose protocol fails the measurement protocol for ``report``'s settings, else the
    last one (what a table built from these parts can claim)."""
    from specframe.bench.published import verdict

    failing = [part for part in among if not verdict({**report, "protocol": part.protocol}).published]
    return (failing or among)[0 if failing else -1]


def kind_report(report: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """``report`` as it stands for one ``kind``: the machine and the weakest protocol of the parts that measured
    it (for that kind's status line)."""
    part = weakest(report, kind_parts(report, kind) or parts(report))
    return {**report, "machine": dict(part.machine), "protocol": part.protocol}
