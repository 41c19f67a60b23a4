"""The schema of a result line, checked whenever a result file is read (``report``, or ``bench`` resuming).

Only the fields that readers use are checked, strictly (``"12"`` is not an integer, ``true`` is not a count);
other fields pass through, so files from a newer specframe with extra fields still read. A record that fails is
an error naming the file, the line and the field; it never reaches a table as a wrong number.

Beyond types and ranges (times up to :data:`MAX_TURN_NS`, so ``10**400`` is refused before any arithmetic), a
record must agree with itself:

* ``choices[0].new_tokens[0]`` is the length of ``tokens`` (speeds count it), and no more tokens than
  ``max_new_tokens``; the rounds' committed tokens (``accept_lengths``) add up to no more than ``tokens`` holds;
* ``prefill_ns`` is at most ``total_ns``, and the stage times (``stage_ns``, measured inside the turn) add up to no
  more than :data:`STAGE_SLACK` times ``total_ns``;
* ``sampling`` (when present) holds the record's ``temperature``;
* ``sibling_continuation`` (when present) has depths in range and no more continued than observed nodes;
* ``path_order`` (when present) has one list per round, at least as long as the round's ``accepted`` (it is recorded
  before any trimming), each order below the round's ``tree_nodes``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specframe.config.bounds import MAX_DRAFT_DEPTH, MAX_TREE_NODES

#: Longest plausible turn in nanoseconds (11.6 days: a million tokens at a second each).
MAX_TURN_NS = 10**15
#: The stage timers run inside the turn's clock; a sum beyond this multiple of it is not a measurement.
STAGE_SLACK = 1.5

#: A count: a non-negative integer.
Count = Annotated[int, Field(ge=0)]
#: A duration in nanoseconds.
Nanoseconds = Annotated[int, Field(ge=0, le=MAX_TURN_NS)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class ChoiceSchema(_Strict):
    """``choices[0]`` of a record (Spec-Bench's answer format; one turn per line)."""

    turns: list[str] = Field(min_length=1)
    new_tokens: list[Count] = Field(min_length=1)
    accept_lengths: list[Count]


class SamplingSchema(_Strict):
    """``sampling`` of a record (absent in files written before it existed)."""

    temperature: float = Field(ge=0)
    top_k: int = Field(ge=0)
    top_p: float = Field(gt=0, le=1)


class MachineSchema(_Strict):
    """``machine`` of a record (absent in files written before it existed)."""

    cpu: str
    cores: int | None = Field(default=None, ge=1)
    gpu: str | None = None


class MachineLoadSchema(_Strict):
    """``machine_load`` of a record (:class:`specframe.metrics.machine_load.MachineLoad`; absent in older files)."""

    loadavg_before: float | None = Field(default=None, ge=0)
    loadavg_after: float | None = Field(default=None, ge=0)
    other_cpu_s: float | None = Field(default=None, ge=0)
    wall_s: float = Field(default=0.0, ge=0)
    cpus: int = Field(default=1, ge=1)
    contended: bool | None = None


#: A size in bytes (up to a petabyte).
Bytes = Annotated[int, Field(ge=0, le=10**15)]


class MemoryFieldSchema(_Strict):
    """``memory`` of a record (:meth:`specframe.metrics.memory.MemoryProfile.at`; absent in older files)."""

    target_bytes: Bytes
    drafter_bytes: Bytes
    heads: dict[str, Bytes]
    kv_bytes_per_token: Bytes | None
    drafter_state_bytes_per_token: Bytes | None
    context_tokens: Count
    kv_bytes: Bytes | None
    drafter_state_bytes: Bytes | None


class RecordSchema(_Strict):
    """The fields of :func:`specframe.bench.record.build_record` that readers depend on."""

    method: str
    dataset: str
    question_id: int | str
    turn: int = Field(ge=0)
    choices: list[ChoiceSchema] = Field(min_length=1)
    target_hash: str
    config_hash: str
    baseline: bool
    reference: bool = False  # transformers' generate() (absent in files written before it existed)
    base_method: str
    sweep: dict[str, Any]
    temperature: float = Field(ge=0)
    sampling: SamplingSchema | None = None
    machine: MachineSchema | None = None
    machine_load: MachineLoadSchema | None = None
    seed: int
    request_seed: int | None = Field(None, ge=0)  # absent in files written before it existed
    max_new_tokens: int = Field(ge=1)
    tokens: list[Count]
    prefill_ns: Nanoseconds
    total_ns: Annotated[int, Field(gt=0, le=MAX_TURN_NS)]
    accepted: list[Annotated[int, Field(ge=0, le=MAX_DRAFT_DEPTH)]]
    tree_nodes: list[Annotated[int, Field(ge=0, le=MAX_TREE_NODES)]]
    stage_ns: dict[str, Nanoseconds]
    #: Rows [depth, rank, continued, total] (:mod:`specframe.metrics.siblings`; absent in older files).
    sibling_continuation: list[Annotated[list[Count], Field(min_length=4, max_length=4)]] | None = None
    #: Per round, the score order of each accepted node (:mod:`specframe.tree.score_order`; absent in older files).
    path_order: list[list[Annotated[int, Field(ge=0, le=MAX_TREE_NODES)]]] | None = None
    memory: MemoryFieldSchema | None = None

    @model_validator(mode="after")
    def _consistent(self) -> RecordSchema:
        rounds = len(self.accepted)
        choice = self.choices[0]
        if len(self.tree_nodes) != rounds or len(choice.accept_lengths) != rounds:
            raise ValueError(f"accepted, tree_nodes and choices[0].accept_lengths must have one entry per round, "
                             f"got {rounds}, {len(self.tree_nodes)} and {len(choice.accept_lengths)}")
        if choice.new_tokens[0] != len(self.tokens):
            raise ValueError(f"choices[0].new_tokens says {choice.new_tokens[0]} tokens but the record holds "
                             f"{len(self.tokens)}")
        if len(self.tokens) > self.max_new_tokens:
            raise ValueError(f"the record holds {len(self.tokens)} tokens, more than max_new_tokens "
                             f"({self.max_new_tokens})")
        if sum(choice.accept_lengths) > len(self.tokens):
            raise ValueError(f"the rounds commit {sum(choice.accept_lengths)} tokens (choices[0].accept_lengths) but "
                             f"the record holds {len(self.tokens)}")
        if self.prefill_ns > self.total_ns:
            raise ValueError(f"prefill_ns ({self.prefill_ns}) is more than total_ns ({self.total_ns})")
        stages = sum(self.stage_ns.values())
        if stages > STAGE_SLACK * self.total_ns:
            raise ValueError(f"the stage times add up to {stages} ns, {stages / self.total_ns:.1f}x total_ns "
                             f"({self.total_ns}); they are measured inside the turn")
        for row in self.sibling_continuation or []:
            depth, _, continued, total = row
            if not 1 <= depth <= MAX_DRAFT_DEPTH or continued > total:
                raise ValueError(f"sibling_continuation row {row} is not [depth 1..{MAX_DRAFT_DEPTH}, rank, continued, "
                                 "total] with continued <= total")
        if self.path_order is not None:
            if len(self.path_order) != rounds:
                raise ValueError(f"path_order must have one list per round, got {len(self.path_order)} for {rounds} "
                                 "rounds")
            for r, (order, accepted, nodes) in enumerate(zip(self.path_order, self.accepted, self.tree_nodes,
                                                             strict=True)):
                if len(order) < accepted or any(o >= nodes for o in order):
                    raise ValueError(f"path_order of round {r}, {order}, does not fit its {accepted} accepted of "
                                     f"{nodes} verified nodes (one order below {nodes} per accepted node)")
        if self.sampling is not None and self.sampling.temperature != self.temperature:
            raise ValueError(f"sampling.temperature ({self.sampling.temperature}) is not the record's temperature "
                             f"({self.temperature})")
        return self


def record_problem(record: Any) -> str | None:
    """None if ``record`` is a valid result record, else what is wrong with it (one line)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not a result record object"
    try:
        RecordSchema.model_validate(record)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(record)"
        if not err["loc"]:
            return err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            return f"field '{field}' is missing"
        shown = repr(err.get("input"))
        shown = shown if len(shown) <= 60 else shown[:40] + f"... ({len(shown)} characters)"
        return f"field '{field}' is {shown}: {err['msg'].lower()}"
    return None
