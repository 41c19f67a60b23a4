"""The depth x rank acceptance profile: how often the target accepts a child of each sibling rank, per depth.

JetSpec's ``depth_rank_histogram`` (hao-ai-lab/JetSpec, ``jetspec/tree/profile_guided``) caps each depth's
fan-out by an offline table ``h[d][r]``: for a node at depth ``d`` of sibling rank ``r`` (rank 0 = the drafter's
top choice among its parent's children, :mod:`specframe.tree.siblings`), the probability that it is the child the
target accepts, given that its parent was accepted and has children. This module records that table from decode
rounds and reads and writes it as JSON (never pickle); the pruner that uses it is
``specframe_trees.pruners.depth_rank_histogram``.

Counts, per round with accepted nodes ``v_1 .. v_a`` of sibling ranks ``ρ_1 .. ρ_a``
(:attr:`specframe.metrics.records.RoundRecord.path_ranks`):

1. for every depth ``d <= a``: the parent ``v_{d-1}`` (the root for ``d = 1``) was accepted and had children,
   so ``trials[d] += 1`` and ``accepted[d][ρ_d] += 1``;
2. depth ``a + 1``: ``v_a`` was accepted; if it had children (``end_has_children``) the target rejected them
   all, so ``trials[a + 1] += 1`` and no rank is credited;
3. rounds decoded without a draft (``budget: auto``'s plain rounds) are skipped.

The pruner's default rule (``fanout_cap``, JetSpec's) compares the raw rate ``accepted[d][r] / trials[d]`` with
its ``tau``; its ``path_product`` rule reads ``h[d][r] = (accepted[d][r] + s) / (trials[d] + 2 s)`` with ``s`` a
Laplace count: strictly inside ``(0, 1)``, so a path's product of entries strictly falls along every edge.

What the rounds cannot tell: how many children the accepted parent had. A rank-``r`` cell therefore estimates
``P(the accepted child has rank r | parent accepted with children)`` (JetSpec's pruner module documents its table
so: "P(accepted child = rank r)"); JetSpec's collector script instead divides by the rounds in which a rank-``r``
node was present. The two agree for rank 0 (always present when the parent has a child); for higher ranks ours
is lower by the fraction of rounds without a rank-``r`` sibling, which keeps the order of ranks within a depth.

Worked example: rounds with ranks ``[0, 1]`` (its last node has children) and ``[1]`` (a leaf). Round 1 adds a
trial at depth 1 (rank 0 accepted), at depth 2 (rank 1 accepted) and at depth 3 (nothing accepted); round 2 a
trial at depth 1 (rank 1 accepted)::

    trials   = [2, 1, 1]
    accepted = [[1, 1], [0, 1], [0, 0]]       h (s = 1) = [[0.5, 0.5], [0.33, 0.67], [0.33, 0.33]]

File format (``FORMAT``)::

    {"format": "specframe.depth_rank_histogram/1",
     "trials": [t_1, ..., t_D],                      # depth d = index + 1
     "accepted": [[a_10, ..., a_1R], ..., [a_D0, ...]],  # D rows, R ranks each
     "meta": {...}}                                  # pipeline, split, prompts (informational)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specframe.errors import ConfigError
from specframe.files import parse_json, read_text
from specframe.metrics.records import RoundRecord

FORMAT = "specframe.depth_rank_histogram/1"
#: Ranks at or above this are pooled into the last column (a tree rarely gives a node more children).
MAX_RANKS = 16
#: Largest profile file read (a table of a few hundred integers is a few kB).
MAX_BYTES = 1 << 20
_FIX = "record a profile with `specframe profile-acceptance PIPELINE -o OUT.json`"


@dataclass
class DepthRankCounts:
    """Counts of one profile: ``trials[d - 1]`` and ``accepted[d - 1][r]`` for depths ``d = 1 .. D``."""

    trials: list[int] = field(default_factory=list)
    accepted: list[list[int]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def depths(self) -> int:
        return len(self.trials)

    def _grow(self, depth: int) -> None:
        while len(self.trials) < depth:
            self.trials.append(0)
            self.accepted.append([0])

    def add_round(self, path_ranks: Iterable[int], end_has_children: bool) -> None:
        """Count one drafted round (see the module docstring, steps 1-2)."""
        ranks = list(path_ranks)
        for d, r in enumerate(ranks, start=1):
            self._grow(d)
            self.trials[d - 1] += 1
            row, col = self.accepted[d - 1], min(int(r), MAX_RANKS - 1)
            row.extend([0] * (col + 1 - len(row)))
            row[col] += 1
        if end_has_children:
            self._grow(len(ranks) + 1)
            self.trials[len(ranks)] += 1

    def add_rounds(self, rounds: Iterable[RoundRecord]) -> None:
        """Count every drafted round of ``rounds`` (plain rounds are skipped)."""
        for rec in rounds:
            if rec.drafted:
                self.add_round(rec.path_ranks, rec.end_has_children)

    def rates(self, smoothing: float) -> list[list[float]]:
        """``h[d - 1][r] = (accepted + s) / (trials + 2 s)``, every row padded to the widest one."""
        width = max((len(row) for row in self.accepted), default=1)
        return [[((row[r] if r < len(row) else 0) + smoothing) / (t + 2 * smoothing) for r in range(width)]
                for t, row in zip(self.trials, self.accepted, strict=True)]

    def to_json(self) -> dict[str, Any]:
        width = max((len(row) for row in self.accepted), default=1)
        return {"format": FORMAT, "trials": list(self.trials),
                "accepted": [row + [0] * (width - len(row)) for row in self.accepted], "meta": dict(self.meta)}


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where} must be a non-negative integer count, got {value!r}", hint=_FIX)
    return value


def counts_from_json(data: Any, *, source: str) -> DepthRankCounts:
    """Validate a parsed profile; every problem is a `ConfigError` naming the field and the fix."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a depth-rank profile is a JSON object, got {type(data).__name__}", hint=_FIX)
    if data.get("format") != FORMAT:
        raise ConfigError(f"{source}: field 'format' is {data.get('format')!r}, expected {FORMAT!r}", hint=_FIX)
    trials, accepted = data.get("trials"), data.get("accepted")
    if not isinstance(trials, list) or not trials or len(trials) > 4096:
        got = f"a list of {len(trials)}" if isinstance(trials, list) else type(trials).__name__
        raise ConfigError(f"{source}: field 'trials' must be a non-empty list of at most 4096 counts (one per "
                          f"depth), got {got}", hint=_FIX)
    if not isinstance(accepted, list) or len(accepted) != len(trials):
        size = len(accepted) if isinstance(accepted, list) else type(accepted).__name__
        raise ConfigError(f"{source}: field 'accepted' must be a list of {len(trials)} rows (one per depth, as "
                          f"'trials'), got {size}", hint=_FIX)
    rows: list[list[int]] = []
    for d, row in enumerate(accepted, start=1):
        if not isinstance(row, list) or not 1 <= len(row) <= MAX_RANKS:
            raise ConfigError(f"{source}: field 'accepted[{d - 1}]' (depth {d}) must be a list of 1..{MAX_RANKS} "
                              "counts, one per sibling rank", hint=_FIX)
        rows.append([_count(v, f"{source}: field 'accepted[{d - 1}][{r}]'") for r, v in enumerate(row)])
    counted = [_count(t, f"{source}: field 'trials[{d}]'") for d, t in enumerate(trials)]
    for d, (t, row) in enumerate(zip(counted, rows, strict=True)):
        if sum(row) > t:
            raise ConfigError(f"{source}: field 'accepted[{d}]' sums to {sum(row)}, more than trials[{d}] = {t} "
                              "(at most one child is accepted per trial)", hint=_FIX)
    meta = data.get("meta", {})
    if not isinstance(meta, Mapping):
        raise ConfigError(f"{source}: field 'meta' (how the profile was recorded) must be a JSON object, got "
                          f"{type(meta).__name__}", hint=_FIX)
    return DepthRankCounts(counted, rows, dict(meta))


def load_counts(path: str | Path) -> DepthRankCounts:
    """Read a profile file written by :func:`write_counts` (JSON only; a missing or corrupt file is a
    `ConfigError`)."""
    text = read_text(path, what="depth-rank profile", max_bytes=MAX_BYTES, hint=_FIX)
    return counts_from_json(parse_json(text, where=str(path), hint=_FIX), source=str(path))


def dumps(counts: DepthRankCounts) -> str:
    """The profile as JSON text, one depth per line (small enough to read and diff)."""
    data = counts.to_json()
    rows = ",\n  ".join(json.dumps(row) for row in data["accepted"])
    return (f'{{"format": {json.dumps(FORMAT)},\n "trials": {json.dumps(data["trials"])},\n'
            f' "accepted": [\n  {rows}\n ],\n "meta": {json.dumps(data["meta"], sort_keys=True)}}}\n')
