"""Sibling-conditional acceptance: how often the next depth is accepted after an accepted node of a given rank.

A drafter whose per-depth marginals do not condition on the path (DFlash, a DDTree over DFlash) proposes depth
``d + 1`` for its own top choice at depth ``d``; when the target accepts a *sibling* (rank ≥ 1) instead, the next
depth is often wrong. A correction head (Domino, DARTree) conditions on the path and should close that gap. This
module counts it for any pipeline, from the per-round ranks the decode loop records
(:attr:`specframe.metrics.records.RoundRecord.path_ranks`, defined in :mod:`specframe.tree.siblings`).

Definition, per round with accepted nodes ``v_1 .. v_a`` (depth 1 .. a) of sibling ranks ``ρ_1 .. ρ_a``:

* every ``v_d`` with ``d < a`` is a **continued** observation at ``(d, ρ_d)``: the target accepted a child of it;
* ``v_a`` is a **stopped** observation at ``(a, ρ_a)`` when it has children in the tree (the target rejected them
  all); a leaf ``v_a`` is not counted (the tree offered nothing to continue with).

``continuation(d, r) = continued(d, r) / (continued(d, r) + stopped(d, r))``: the acceptance rate of depth
``d + 1`` given an accepted depth-``d`` node of rank ``r`` that has children. Counts come from the verifier's
verdict before any EOS or length trimming.

Worked example: rounds with ranks ``[0, 1]`` (last node has children) and ``[1]`` (a leaf) give
``(1, 0)``: 1 continued of 1; ``(2, 1)``: 0 of 1; ``(1, 1)``: not counted (a leaf).

Records store the counts as rows ``[depth, rank, continued, total]`` (:func:`count_rows`), which add up across
records (:func:`merge_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from specframe.metrics.records import RoundRecord

#: Ranks at or above this are pooled in tables and plots ("3+").
RANK_CAP = 3

Counts = dict[tuple[int, int], tuple[int, int]]  # (depth, rank) -> (continued, total)


def round_counts(path_ranks: Sequence[int], end_has_children: bool) -> list[tuple[int, int, bool]]:
    """The observations of one round: ``(depth, rank, continued)`` per counted accepted node."""
    a = len(path_ranks)
    seen = [(d, r, True) for d, r in enumerate(path_ranks[:-1], start=1)]
    if a and end_has_children:
        seen.append((a, path_ranks[-1], False))
    return seen


def count(rounds: Iterable[RoundRecord]) -> Counts:
    """Pooled counts of every round of ``rounds``."""
    counts: dict[tuple[int, int], list[int]] = {}
    for rec in rounds:
        for d, r, went_on in round_counts(rec.path_ranks, rec.end_has_children):
            cell = counts.setdefault((d, r), [0, 0])
            cell[0] += went_on
            cell[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(counts.items())}


def count_rows(rounds: Iterable[RoundRecord]) -> list[list[int]]:
    """The counts as JSON-ready rows ``[depth, rank, continued, total]`` (the bench record's field)."""
    return [[d, r, c, n] for (d, r), (c, n) in count(rounds).items()]


def merge_rows(per_record: Iterable[Sequence[Sequence[int]]], rank_cap: int | None = RANK_CAP) -> Counts:
    """Add the rows of many records; ranks ``>= rank_cap`` are pooled under ``rank_cap`` (None: keep every rank)."""
    merged: dict[tuple[int, int], list[int]] = {}
    for rows in per_record:
        for d, r, c, n in rows:
            key = (int(d), min(int(r), rank_cap) if rank_cap is not None else int(r))
            cell = merged.setdefault(key, [0, 0])
            cell[0] += int(c)
            cell[1] += int(n)
    return {k: (v[0], v[1]) for k, v in sorted(merged.items())}


@dataclass(frozen=True)
class SiblingTable:
    """Continuation rates by depth and sibling rank (ranks ``>= rank_cap`` pooled)."""

    counts: Counts
    rank_cap: int = RANK_CAP

    def rate(self, depth: int, rank: int) -> float:
        continued, total = self.counts.get((depth, rank), (0, 0))
        return continued / total if total else math.nan

    def total(self, depth: int, rank: int) -> int:
        return self.counts.get((depth, rank), (0, 0))[1]

    @property
    def depths(self) -> list[int]:
        return sorted({d for d, _ in self.counts})

    @property
    def ranks(self) -> list[int]:
        return sorted({r for _, r in self.counts})

    def pooled(self, rank_from: int) -> tuple[float, int]:
        """Rate and count over every depth for ranks ``>= rank_from`` when ``rank_from`` > 0, else rank 0."""
        cells = [v for (_, r), v in self.counts.items() if (r >= rank_from if rank_from else r == 0)]
        continued, total = sum(c for c, _ in cells), sum(n for _, n in cells)
        return (continued / total if total else math.nan), total

    @classmethod
    def from_rows(cls, per_record: Iterable[Sequence[Sequence[int]]], rank_cap: int = RANK_CAP) -> SiblingTable:
        return cls(merge_rows(per_record, rank_cap), rank_cap)
