"""`Row`: one request in flight in the decode loop, with its tokens, text, records and controller state.

A row appends the tokens a round committed up to the request's cap and its first end-of-sequence token, feeds
them to its incremental text (which finds stop strings and streams), trims the last round's credit when a stop
string cut tokens, and says why it ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from specframe.cost.auto_budget import RowBudget
from specframe.decode.request import RequestInputs
from specframe.decode.text import IncrementalText
from specframe.interfaces import DecodeState
from specframe.metrics.records import GenerationResult, RoundRecord


class Row:
    """See the module docstring."""

    def __init__(self, index: int, inputs: RequestInputs, *, tokenizer: object, eos: set[int],
                 stream: Callable[[str], None] | None) -> None:
        self.index = index
        self.inputs = inputs
        self.eos = eos
        self.new: list[int] = []
        self.text = IncrementalText(tokenizer, inputs.stops, stream)
        self.rounds: list[RoundRecord] = []
        self.state: DecodeState | None = None
        self.budget: RowBudget | None = None  # `budget: auto` state of this request
        self.t_start = time.perf_counter_ns()
        self.prefill_ns = 0
        self.reason: str | None = None

    @property
    def root_position(self) -> int:
        """Absolute position of the row's root token (its last committed token)."""
        return self.inputs.prompt_len + len(self.new) - 1

    def start(self, first: int, state: DecodeState) -> None:
        """The prefill's token was drawn; the row now decodes rounds."""
        self.state = state
        self.take([first])

    def take(self, tokens: list[int], record: RoundRecord | None = None) -> list[int]:
        """Append ``tokens`` up to the cap and EOS, check for stop strings, record the round; return those kept.

        The row's `DecodeState` is the loop's: it holds every token the target committed."""
        room = self.inputs.cap - len(self.new)
        taken: list[int] = []
        for t in tokens[: max(room, 0)]:
            taken.append(t)
            if t in self.eos:
                break
        self.new += taken
        removed = self.text.add(taken)
        if record is not None:  # a length or EOS cut keeps the accepted drafts that made it
            record.committed = len(taken)
            record.accepted = min(record.accepted, record.committed)
            self.rounds.append(record)
        if removed:  # a stop string: tokens, counts and speed never include what the user does not get
            del self.new[len(self.new) - removed:]
            if record is not None:
                kept = record.committed - removed
                record.committed, record.accepted = kept, min(record.accepted, kept)
        self.reason = "stop_string" if removed is not None else self._stop_reason()
        return taken

    def _stop_reason(self) -> str | None:
        if self.new and self.new[-1] in self.eos:
            return "eos"
        if len(self.new) >= self.inputs.cap:
            return "length" if self.inputs.cap == self.inputs.max_new else "context"
        return None

    def result(self, batch_size: int) -> GenerationResult:
        """The request's outcome (after it ended), decoded with up to ``batch_size`` rows in flight."""
        text = self.text.finish()
        return GenerationResult(tokens=self.new, text=text, prompt_len=self.inputs.prompt_len, rounds=self.rounds,
                                prefill_ns=self.prefill_ns, total_ns=time.perf_counter_ns() - self.t_start,
                                stop_reason=self.reason or "length", batch_size=batch_size,
                                seed=self.inputs.seed)
