"""The schema of a result line, checked whenever a result file is read (``report``, or ``bench`` resuming).

Only the fields that readers use are checked, strictly (``"12"`` is not an integer, ``true`` is not a count);
other fields pass through, so files from a newer specframe with extra fields still read. A record that fails is
an error naming the file, the line and the field; it never reaches a table as a wrong number.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class ChoiceSchema(_Strict):
    """``choices[0]`` of a record (Spec-Bench's answer format; one turn per line)."""

    turns: list[str] = Field(min_length=1)
    new_tokens: list[int] = Field(min_length=1)
    accept_lengths: list[int]


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
    base_method: str
    sweep: dict[str, Any]
    temperature: float = Field(ge=0)
    seed: int
    max_new_tokens: int = Field(ge=1)
    tokens: list[int]
    prefill_ns: int = Field(ge=0)
    total_ns: int = Field(ge=0)
    accepted: list[int]
    tree_nodes: list[int]
    stage_ns: dict[str, int]


def record_problem(record: Any) -> str | None:
    """None if ``record`` is a valid result record, else what is wrong with it (one line)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not a result record object"
    try:
        RecordSchema.model_validate(record)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(record)"
        if err["type"] == "missing":
            return f"field '{field}' is missing"
        return f"field '{field}' is {err.get('input')!r}: {err['msg'].lower()}"
    return None
