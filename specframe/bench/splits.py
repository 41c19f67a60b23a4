"""The tune and report (held-out) splits of the benchmark prompts: one definition for every script.

Settings are tuned on one split and published numbers come from the other, so a tuned default cannot fit the
prompts it is judged on. The split of a prompt is a fixed hash of its text: a question is **held out**
(``report``) when the first byte of ``sha256`` of its first turn, whitespace collapsed and lower-cased, is odd,
and in ``tune`` otherwise. That makes the split

* deterministic and independent of file order, subsampling and the dataset's name: the MT-Bench questions that
  Spec-Bench repeats fall in the same split in both sets, and a training-data filter (decontamination) can
  decide from a text alone (:func:`split_of_text`);
* about half and half per set (GSM8K test: 1,319 questions; MT-Bench: 80; each Spec-Bench category: 80).

Benchmarks take the first ``n`` questions of a split in the dataset's seeded order
(:func:`specframe.datasets.base.select_samples`), so two runs with the same ``n`` use the same prompts.

Example::

    split_of_text("What is 7 * 6?")                  # "tune" or "report", the same on every machine
    held_out = select_split(dataset.samples, REPORT, 20)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Literal

from specframe.datasets.base import Sample, select_samples

Split = Literal["tune", "report"]
TUNE: Split = "tune"
REPORT: Split = "report"
SPLITS: tuple[Split, ...] = (TUNE, REPORT)


def normalize(text: str) -> str:
    """The text a split is decided on: whitespace collapsed, lower-cased."""
    return " ".join(text.split()).lower()


def split_of_text(text: str) -> Split:
    """``report`` (held out) when the first byte of the normalized text's SHA-256 is odd, else ``tune``."""
    return REPORT if hashlib.sha256(normalize(text).encode("utf-8")).digest()[0] & 1 else TUNE


def split_of(sample: Sample) -> Split:
    """The split of a benchmark question (decided by its first turn)."""
    return split_of_text(sample.turns[0])


def select_split(samples: Sequence[Sample], split: Split | None, n: int | None, seed: int = 0) -> tuple[Sample, ...]:
    """``n`` questions of ``split`` (all splits when None), in the seeded order of ``select_samples``."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    chosen = [s for s in samples if split is None or split_of(s) == split]
    return select_samples(chosen, n, seed)


def held_out(samples: Iterable[Sample]) -> list[Sample]:
    """The questions of ``samples`` that belong to the report split (never to be tuned or trained on)."""
    return [s for s in samples if split_of(s) == REPORT]
