"""`Row`: one request in flight in the decode loop, with its tokens, text, records and controller state.

A row appends the tokens a round committed up to the request's cap and its first end-of-sequence token, feeds
them to its text (decoded as it grows only to find stop strings or to stream, otherwise once at the end), trims
the last round's credit when a stop string cut tokens, and says why it ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from specframe.cost.auto_budget import RowBudget
from specframe.decode.request import RequestInputs
from specframe.decode.text import request_text
from specframe.interfaces import DecodeState
from specframe.metrics.records import GenerationResult, RoundLog


class Row:
    """See the module docstring."""

    def __init__(self, index: int, inputs: RequestInputs, *, tokenizer: object, eos: set[int],
                 stream: Callable[[str], None] | None) -> None:
        self.index = index
        self.inputs = inputs
        self.eos = eos
        self.new: list[int] = []
        self.text = request_text(tokenizer, inputs.stops, stream)  # decoded per round only if it must be
        self.rounds = RoundLog()  # a few integers per round, not an object
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

    def take(self, tokens: list[int]) -> list[int]:
        """Append ``tokens`` up to the cap and EOS and check for stop strings; return those taken (a stop string
        may then remove some of them again, see :meth:`take_round`).

        The row's `DecodeState` is the loop's: it holds every token the target committed."""
        return self._take(tokens)[0]

    def take_round(self, tokens: list[int], nodes: int, depth: int, accepted: int, drafted: bool,
                   budget: int | None, stage_ns: dict[str, int] | None, path_ranks: Sequence[int] = (),
                   end_has_children: bool = False, plain_reason: str | None = None,
                   path_order: Sequence[int] = ()) -> None:
        """Take a round's ``tokens`` (:meth:`take`) and record the round: ``committed`` is what the request kept
        (after EOS, length and stop-string trimming), ``accepted`` at most that. ``stage_ns`` is the round's
        shared dict of stage times (None when not timed); ``path_ranks`` and ``end_has_children`` the verifier's
        verdict before any trimming (:attr:`specframe.metrics.records.RoundRecord.path_ranks`); ``plain_reason`` why
        the row verified no draft node (None: it verified some); ``path_order`` the accepted nodes' score orders
        (:attr:`specframe.metrics.records.RoundRecord.path_order`)."""
        taken, removed = self._take(tokens)
        committed = len(taken) - (removed or 0)  # tokens, counts and speed never include what the user does not get
        self.rounds.append(nodes, depth, min(accepted, committed), committed, drafted, budget, stage_ns,
                           path_ranks, end_has_children, plain_reason, path_order)

    def _take(self, tokens: list[int]) -> tuple[list[int], int | None]:
        room = self.inputs.cap - len(self.new)
        taken = tokens[: max(room, 0)]
        if self.eos and not self.eos.isdisjoint(taken):  # keep up to the first end-of-sequence token
            taken = taken[: next(i for i, t in enumerate(taken) if t in self.eos) + 1]
        self.new += taken
        removed = self.text.add(taken)
        if removed:  # a stop string: the tokens after the one that completed it are not the user's
            del self.new[len(self.new) - removed:]
        self.reason = "stop_string" if removed is not None else self._stop_reason()
        return taken, removed

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
