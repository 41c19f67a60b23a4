"""Training prompts read from user-given files (JSON Lines or a JSON array), filtered by id and formatted.

A recipe's ``data.prompt_files`` lists sources such as the *train* and *validation* splits of MBPP. Each record is
formatted with ``template`` (``str.format`` over the record's fields; list fields are joined with newlines), so
the same file can be presented as the evaluation protocol presents its own split. The product never picks a
dataset itself: the path comes from the recipe, and a missing file or field is a clear error. ``decontaminate``
drops every prompt that shares a long word n-gram with an evaluation set (MBPP's train split, for one, has
near-copies of test-split problems).

Example (MBPP task ids 511-974 are its validation and train splits; 11-510 is the test split)::

    prompt_files:
      - path: ../shared/data/mbpp/mbpp.jsonl
        id_field: task_id
        id_range: [511, 974]
        template: "{text}\\nYour code should pass these tests:\\n{test_list}"
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from specframe.errors import ConfigError
from specframe.files import MiB, json_lines, parse_json, read_text

#: A training prompt: one user turn, or the user turns of a conversation (the target answers each in turn).
Prompt = str | tuple[str, ...]

#: Largest prompt file accepted (after decompression).
MAX_PROMPT_FILE_BYTES = 512 * MiB


class PromptFile(BaseModel):
    """One prompt source file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(description="JSON Lines (.jsonl, optionally .gz) or a JSON array (.json) of records")
    template: str = Field(description="str.format template over the record's fields, e.g. '{text}'")
    id_field: str | None = Field(None, description="record field holding an integer id (for id_range)")
    id_range: tuple[int, int] | None = Field(None, description="keep records with lo <= id <= hi (inclusive)")
    limit: int | None = Field(None, ge=1, description="keep at most this many records (file order)")


def _records(path: Path) -> list[tuple[str, object]]:
    """``(where, record)`` for every record of a prompt file, read with the project's one text reader."""
    hint = "fix data.prompt_files[].path (relative paths are taken from the working directory)"
    text = read_text(path, what="prompt file", max_bytes=MAX_PROMPT_FILE_BYTES, hint=hint)
    json_hint = "give a .jsonl file with one object per line, or a .json array of objects"
    if path.name.endswith((".json", ".json.gz")):
        data = parse_json(text, where=str(path), hint=json_hint)
        if not isinstance(data, list):
            raise ConfigError(f"prompt file {path} holds a JSON {type(data).__name__}, not an array of records",
                              hint=json_hint)
        return [(f"{path} record {i + 1}", record) for i, record in enumerate(data)]
    return [(f"{path}:{lineno}", record) for lineno, record in json_lines(text, source=str(path), hint=json_hint)]


def _format(source: PromptFile, record: dict, where: str) -> str:
    hint = "fix data.prompt_files[].template (str.format fields, e.g. '{text}'; write {{ and }} for braces)"
    try:
        fields = {n for _, n, _, _ in string.Formatter().parse(source.template) if n}
    except ValueError as exc:
        raise ConfigError(f"template {source.template!r} of {source.path} is not a format string: {exc}",
                          hint=hint) from None
    missing = sorted(fields - set(record))
    if missing:
        raise ConfigError(f"{where}: the template uses field(s) {missing} that the record lacks "
                          f"(it has {sorted(record)})", hint=hint)
    values = {k: "\n".join(map(str, v)) if isinstance(v, list) else v for k, v in record.items()}
    try:
        return source.template.format(**values)
    except (ValueError, IndexError, KeyError, AttributeError) as exc:
        raise ConfigError(f"{where}: template {source.template!r} fails: {exc!r}", hint=hint) from None


def file_prompts(source: PromptFile) -> list[str]:
    """The formatted prompts of ``source`` (see the module docstring)."""
    path = Path(source.path).expanduser()
    out: list[str] = []
    for where, record in _records(path):
        if not isinstance(record, dict):
            raise ConfigError(f"{where} is a {type(record).__name__}, not an object with fields",
                              hint="give a file of JSON objects (one per line, or a JSON array of objects)")
        if source.id_range is not None:
            if source.id_field is None or not isinstance(record.get(source.id_field), int):
                raise ConfigError(f"{where}: id_range needs the integer field {source.id_field!r}",
                                  hint="set data.prompt_files[].id_field to an integer field every record has")
            lo, hi = source.id_range
            if not lo <= record[source.id_field] <= hi:
                continue
        out.append(_format(source, record, where))
        if source.limit is not None and len(out) >= source.limit:
            break
    if not out:
        raise ConfigError(f"prompt file {path} gives no prompts with id_range {source.id_range}",
                          hint="check data.prompt_files[].id_range against the file's ids")
    return out


def words(text: str) -> list[str]:
    """The lower-cased alphanumeric words of ``text``."""
    return re.findall(r"[a-z0-9]+", text.lower())


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """The lower-cased alphanumeric word ``n``-grams of ``text``."""
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def banned_ngrams(sources: Sequence[PromptFile], n: int) -> frozenset[tuple[str, ...]]:
    """Every word ``n``-gram of the prompts of ``sources`` (evaluation sets)."""
    banned: set[tuple[str, ...]] = set()
    for source in sources:
        for text in file_prompts(source):
            banned |= word_ngrams(text, n)
    return frozenset(banned)


def decontaminate(prompts: list[Prompt], sources: Sequence[PromptFile], n: int) -> list[Prompt]:
    """``prompts`` without those sharing a word ``n``-gram with any prompt of ``sources`` (evaluation sets).

    Each turn of a conversation is checked on its own.

    Example: with ``n = 3`` the prompt ``"Write a function to add two numbers"`` is dropped if an evaluation prompt
    contains ``"add two numbers"``.
    """
    banned = banned_ngrams(sources, n)
    turns = [(p,) if isinstance(p, str) else p for p in prompts]
    return [p for p, ts in zip(prompts, turns, strict=True) if not any(word_ngrams(t, n) & banned for t in ts)]
