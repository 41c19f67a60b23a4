"""Benchmark prompts: the `Sample` record, reading published data files, and deterministic subsampling.

A :class:`Sample` is one benchmark question with its user turns already formatted with the paper's prompt
template. Multi-turn sets (MT-Bench, the MT-Bench part of Spec-Bench) carry two turns; the second turn is
answered in a conversation that holds the method's own first answer (see :mod:`specframe.bench.conversation`).

Subsampling (:func:`select_samples`): when a set holds more records than requested, the records at
``numpy.random.default_rng(seed).permutation(len(records))[:n]`` are taken, in that order. This is exactly the
permutation ``datasets.Dataset.shuffle(seed=seed)`` draws, so the papers' ``shuffle(seed=0).select(range(n))``
picks the same questions when the file keeps the published record order. A set no larger than ``n`` is used
whole, in file order, as the papers' scripts do.

Example: 1,319 GSM8K records with ``n = 128, seed = 0`` give the 128 records whose indices are the first 128
entries of ``default_rng(0).permutation(1319)``; asking for 200 of AIME25's 30 gives all 30 in file order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specframe.errors import ConfigError
from specframe.files import MiB, json_lines, parse_json, read_text

QuestionId = int | str


class DatasetError(ConfigError):
    """A benchmark data file is missing, unreadable or not in the published format."""


@dataclass(frozen=True)
class Sample:
    """One benchmark question, its user turns formatted with the dataset's prompt template."""

    dataset: str  # registry name, e.g. "gsm8k"
    question_id: QuestionId  # the published id (task_id, question_id) or the record's index in the file
    category: str  # Spec-Bench/MT-Bench category; the dataset name for single-category sets
    turns: tuple[str, ...]  # user turns, already templated (two for MT-Bench questions)


@dataclass(frozen=True)
class LoadedDataset:
    """The samples chosen from one dataset and where they came from."""

    name: str
    samples: tuple[Sample, ...]
    source: str  # file path, or "package <distribution> <version>: <resource>"
    available: int  # questions in the source before subsampling
    note: str = ""  # e.g. that a package holds only part of the published set

    def __len__(self) -> int:
        return len(self.samples)


#: Largest benchmark data file accepted (after decompression); the published ones are a few MiB.
MAX_DATA_FILE_BYTES = 512 * MiB


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a published data file: ``.json`` (one array), ``.jsonl``, either optionally ``.gz``."""
    inner = path.name[:-3] if path.name.endswith(".gz") else path.name
    hint = "give the file as published (see ../shared/data/README.md)"
    text = read_text(path, what="data file", max_bytes=MAX_DATA_FILE_BYTES, error=DatasetError, hint=hint)
    if inner.endswith(".json"):
        data = parse_json(text, where=str(path), error=DatasetError, hint=hint)
        if not isinstance(data, list):
            raise DatasetError(f"{path} holds a JSON {type(data).__name__}, expected an array of records", hint=hint)
        records = data
    else:
        records = [record for _, record in json_lines(
            text, source=str(path), error=DatasetError, hint="the file should be JSON Lines, one record per line")]
    bad = next((i for i, r in enumerate(records) if not isinstance(r, dict)), None)
    if bad is not None:
        raise DatasetError(f"record {bad} of {path} is not a JSON object", hint=hint)
    return records


#: A field's JSON type: ``str``, ``int`` (booleans excluded), or a tuple of them.
FieldType = type | tuple[type, ...]


def require_fields(records: Sequence[dict[str, Any]], fields: Mapping[str, FieldType], path: str) -> None:
    """Raise a DatasetError naming the first record that lacks one of ``fields`` or holds a wrong type there.

    Example: ``require_fields(records, {"question": str}, "test.jsonl")``.
    """
    names = ", ".join(fields)
    for i, record in enumerate(records):
        missing = [f for f in fields if f not in record]
        if missing:
            raise DatasetError(f"record {i} of {path} has no field {', '.join(repr(m) for m in missing)}",
                               hint=f"expected fields {names}; is this the right file?")
        for name, kind in fields.items():
            value = record[name]
            if isinstance(value, bool) or not isinstance(value, kind):
                wanted = " or ".join(t.__name__ for t in (kind if isinstance(kind, tuple) else (kind,)))
                raise DatasetError(f"record {i} of {path}: field '{name}' is {value!r:.60}, not a {wanted}",
                                   hint=f"expected fields {names}; is this the right file?")


def select_samples(samples: Sequence[Sample], n: int | None, seed: int = 0) -> tuple[Sample, ...]:
    """``n`` samples: all of them in order if ``n`` is None or covers the set, else the seeded shuffle's first n."""
    if n is None or n >= len(samples):
        return tuple(samples)
    order = np.random.default_rng(seed).permutation(len(samples))[:n]  # as datasets.Dataset.shuffle(seed)
    return tuple(samples[int(i)] for i in order)
