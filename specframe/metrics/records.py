"""`RoundRecord` (one verification round) and `GenerationResult` (one request), with τ and throughput.

Definitions (docs/metrics.md):

* a **round** is one target verification forward; it commits ``a_r`` accepted draft tokens plus one bonus;
* **τ** = Σ_r (a_r + 1) / R, the tokens committed per round counting the bonus token and excluding the
  token sampled from the prefill (Spec-Bench trims the last round at EOS or the length limit; so do we);
* **tokens/s** = new tokens / wall time of the request (prefill included); ``decode_tokens_per_s`` excludes
  the prefill and its token.

Example: rounds committing 3, 1 and 4 tokens after a prefill token give 9 new tokens and τ = 8/3 ≈ 2.67.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

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
    plain_reason: str | None = None  # why no draft node was verified (`specframe.cost.reasons`; None: some were)

    @property
    def round_ns(self) -> int:
        return sum(self.stage_ns.values())


@dataclass
class GenerationResult:
    """One request's output and measurements."""

    tokens: list[int]  # new tokens, the prefill token first
    text: str | None  # decoded new tokens (None without a tokenizer)
    prompt_len: int
    rounds: list[RoundRecord]
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
        return sum(r.committed for r in self.rounds) / len(self.rounds)

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
