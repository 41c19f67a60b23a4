"""`RoundRecord` (one verification round) and `GenerationResult` (one request), with τ and throughput.

Definitions (docs/metrics.md):

* a **round** is one target verification forward; it commits ``a_r`` accepted draft tokens plus one bonus;
* **τ** = Σ_r (a_r + 1) / R, the tokens committed per round counting the bonus token and excluding the
  token sampled from the prefill (Spec-Bench trims the last round at EOS or the length limit; so do we);
* **tokens/s** = new tokens / wall time of the request (prefill included); ``decode_tokens_per_s`` excludes
  the prefill and its token.

Example: rounds committing 3, 1 and 4 tokens after a prefill token give 9 new tokens and τ = 8/3 ≈ 2.67.

The decode loop does not build a `RoundRecord` per row per round: each request keeps a `RoundLog`, its rounds
as columns (six integers a round in one array, and a reference to the round's stage times, one dict shared by
every row of the round). Reading the log (``result.rounds``) gives `RoundRecord` objects, built when read.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, overload

STAGES = ("draft", "build", "prune", "target", "verify", "commit")


@dataclass
class RoundRecord:
    """What one round did."""

    nodes: int  # draft nodes verified (root excluded)
    depth: int  # deepest node of the verified tree
    accepted: int  # draft tokens accepted (bonus excluded)
    committed: int  # tokens this round added to the output (after EOS / length trimming)
    stage_ns: dict[str, int] = field(default_factory=dict)  # nanoseconds per stage
    drafted: bool = True  # False: `budget: auto` decoded this round plainly (no draft, the root alone)
    budget: int | None = None  # nodes `budget: auto` chose to verify (None: a fixed budget)
    #: Sibling rank of each node the verifier accepted, depth 1 first (:mod:`specframe.tree.siblings`; before any
    #: EOS or length trimming) and whether the last accepted node (the root when none) had a child in the tree.
    path_ranks: list[int] = field(default_factory=list)
    end_has_children: bool = False
    plain_reason: str | None = None  # why no draft node was verified (`specframe.cost.reasons`; None: some were)
    #: Score order of each accepted node, depth 1 first: its place among the round's verified draft nodes ranked by
    #: path score (:mod:`specframe.tree.score_order`; before any trimming). A replay at a smaller budget ``k`` keeps
    #: the path's prefix whose orders are all below ``k`` (:mod:`specframe.bench.simulate`).
    path_order: list[int] = field(default_factory=list)

    @property
    def round_ns(self) -> int:
        return sum(self.stage_ns.values())


class RoundLog(Sequence[RoundRecord]):
    """One request's rounds, appended in O(1) per round and read as `RoundRecord` objects.

    Storage: ``_ints`` holds :data:`FIELDS` integers per round (``drafted`` and ``end_has_children`` as 0/1,
    ``budget`` -1 for None); ``_ranks`` every round's ``path_ranks`` one after another, round ``i``'s ending at
    ``_rank_ends[i]``, and ``_orders`` their ``path_order`` likewise up to ``_order_ends[i]``; ``_reasons`` each
    round's ``plain_reason`` (a shared string or None); ``_stages`` the round's stage times, a dict the round's rows
    share (read-only here; None when not timed). E.g. after
    ``log.append(4, 3, 2, 3, True, None, None, [0, 1], True)``:
    ``log[0] == RoundRecord(4, 3, 2, 3, {}, True, None, [0, 1], True)``.
    """

    #: The integer columns, in storage order.
    FIELDS = ("nodes", "depth", "accepted", "committed", "drafted", "budget", "end_has_children")
    _WIDTH = len(FIELDS)

    def __init__(self, records: Sequence[RoundRecord] = ()) -> None:
        self._ints = array("q")  # [rounds * len(FIELDS)]
        self._ranks = array("q")  # [sum of the rounds' path lengths]
        self._rank_ends = array("q")  # [rounds]
        self._orders = array("q")  # [sum of the rounds' path lengths]
        self._order_ends = array("q")  # [rounds]
        self._reasons: list[str | None] = []
        self._stages: list[dict[str, int] | None] = []
        for r in records:
            self.append(r.nodes, r.depth, r.accepted, r.committed, r.drafted, r.budget, r.stage_ns or None,
                        r.path_ranks, r.end_has_children, r.plain_reason, r.path_order)

    def append(self, nodes: int, depth: int, accepted: int, committed: int, drafted: bool, budget: int | None,
               stage_ns: dict[str, int] | None, path_ranks: Sequence[int] = (),
               end_has_children: bool = False, plain_reason: str | None = None,
               path_order: Sequence[int] = ()) -> None:
        """Record a round; ``stage_ns`` is kept by reference (the caller does not change it afterwards)."""
        self._ints.extend((nodes, depth, accepted, committed, drafted, -1 if budget is None else budget,
                           end_has_children))
        self._ranks.extend(path_ranks)
        self._rank_ends.append(len(self._ranks))
        self._orders.extend(path_order)
        self._order_ends.append(len(self._orders))
        self._reasons.append(plain_reason)
        self._stages.append(stage_ns)

    def __len__(self) -> int:
        return len(self._stages)

    @overload
    def __getitem__(self, index: int) -> RoundRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[RoundRecord]: ...

    def __getitem__(self, index: int | slice) -> RoundRecord | list[RoundRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self))[index]  # negative indices, and an IndexError past the end
        w = self._WIDTH
        nodes, depth, accepted, committed, drafted, budget, end_has_children = self._ints[w * i : w * i + w]
        stage = self._stages[i]
        first = self._rank_ends[i - 1] if i else 0
        first_order = self._order_ends[i - 1] if i else 0
        return RoundRecord(nodes=nodes, depth=depth, accepted=accepted, committed=committed,
                           stage_ns=dict(stage) if stage else {}, drafted=bool(drafted),
                           budget=None if budget < 0 else budget,
                           path_ranks=self._ranks[first : self._rank_ends[i]].tolist(),
                           end_has_children=bool(end_has_children), plain_reason=self._reasons[i],
                           path_order=self._orders[first_order : self._order_ends[i]].tolist())

    def __iter__(self) -> Iterator[RoundRecord]:
        return (self[i] for i in range(len(self)))

    def column(self, name: str) -> list[int]:
        """One integer column over the rounds (see :data:`FIELDS`), without building records."""
        return self._ints[self.FIELDS.index(name)::self._WIDTH].tolist()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"RoundLog({list(self)!r})"


@dataclass
class GenerationResult:
    """One request's output and measurements."""

    tokens: list[int]  # new tokens, the prefill token first
    text: str | None  # decoded new tokens (None without a tokenizer)
    prompt_len: int
    rounds: Sequence[RoundRecord]  # a RoundLog from the decode loop; any sequence of records otherwise
    prefill_ns: int  # prefill forward + first sample
    total_ns: int  # whole request, prefill included
    stop_reason: str  # "length", "eos", "stop_string" or "context"
    batch_size: int = 1  # the batch size it was decoded under (up to this many rows in flight; 1: alone)
    seed: int | None = None  # the request's seed: passed back as `seed=`, it replays this sample token for token

    @property
    def num_rounds(self) -> int:
        return len(self.rounds)

    @property
    def tau(self) -> float:
        """Mean tokens committed per verification round (bonus included, prefill token excluded)."""
        if not self.rounds:
            return 0.0
        return sum(self.accept_lengths()) / len(self.rounds)

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / (self.total_ns / 1e9) if self.total_ns else 0.0

    @property
    def decode_ns(self) -> int:
        return self.total_ns - self.prefill_ns

    @property
    def decode_tokens_per_s(self) -> float:
        n = len(self.tokens) - 1
        return n / (self.decode_ns / 1e9) if self.decode_ns > 0 else 0.0

    def stage_totals(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for r in self.rounds:
            for k, v in r.stage_ns.items():
                totals[k] = totals.get(k, 0) + v
        return totals

    def accept_lengths(self) -> list[int]:
        """Per-round committed tokens (Spec-Bench's ``accept_lengths``)."""
        if isinstance(self.rounds, RoundLog):
            return self.rounds.column("committed")
        return [r.committed for r in self.rounds]

    def summary(self) -> dict[str, Any]:
        return {
            "new_tokens": len(self.tokens),
            "rounds": self.num_rounds,
            "tau": round(self.tau, 4),
            "tokens_per_s": round(self.tokens_per_s, 3),
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 3),
            "stop_reason": self.stop_reason,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "stage_ns": self.stage_totals(),
        }

    def as_dict(self) -> dict[str, Any]:
        d = self.summary()
        d["tokens"] = self.tokens
        d["text"] = self.text
        d["rounds_detail"] = [asdict(r) for r in self.rounds]
        return d
