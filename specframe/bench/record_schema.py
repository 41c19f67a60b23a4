"""The schema of a result line, checked whenever a result file is read (``report``, or ``bench`` resuming).

Only the fields that readers use are checked, strictly (``"12"`` is not an integer, ``true`` is not a count);
other fields pass through, so files from a newer specframe with extra fields still read. A record that fails is
an error naming the file, the line and the field; it never reaches a table as a wrong number.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specframe.config.bounds import MAX_DRAFT_DEPTH, MAX_TREE_NODES

#: A count or duration: a non-negative integer.
Count = Annotated[int, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class ChoiceSchema(_Strict):
    """``choices[0]`` of a record (Spec-Bench's answer format; one turn per line)."""

    turns: list[str] = Field(min_length=1)
    new_tokens: list[Count] = Field(min_length=1)
    accept_lengths: list[Count]


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
    seed: int
    request_seed: int | None = Field(None, ge=0)  # absent in files written before it existed
    max_new_tokens: int = Field(ge=1)
    tokens: list[Count]
    prefill_ns: int = Field(ge=0)
    total_ns: int = Field(gt=0)
    accepted: list[Annotated[int, Field(ge=0, le=MAX_DRAFT_DEPTH)]]
    tree_nodes: list[Annotated[int, Field(ge=0, le=MAX_TREE_NODES)]]
    stage_ns: dict[str, Count]

    @model_validator(mode="after")
    def _consistent(self) -> RecordSchema:
        rounds = len(self.accepted)
        if len(self.tree_nodes) != rounds or len(self.choices[0].accept_lengths) != rounds:
            raise ValueError(f"accepted, tree_nodes and choices[0].accept_lengths must have one entry per round, "
                             f"got {rounds}, {len(self.tree_nodes)} and {len(self.choices[0].accept_lengths)}")
        if self.prefill_ns > self.total_ns:
            raise ValueError(f"prefill_ns ({self.prefill_ns}) is more than total_ns ({self.total_ns})")
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
        return f"field '{field}' is {err.get('input')!r}: {err['msg'].lower()}"
    return None
