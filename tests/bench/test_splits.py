"""The tune / report split of benchmark prompts: a fixed hash of the text, the same wherever the prompt appears."""

from __future__ import annotations

import hashlib

import pytest

from specframe.bench.splits import REPORT, TUNE, held_out, select_split, split_of, split_of_text
from specframe.datasets.base import Sample


def sample(dataset: str, qid: int, text: str) -> Sample:
    return Sample(dataset, qid, dataset, (text, "a second turn never decides"))


def test_the_split_is_the_parity_of_the_first_hash_byte_of_the_normalized_text() -> None:
    for text in ("What is 7 * 6?", "Write a poem about the sea.", "x" * 300):
        odd = hashlib.sha256(" ".join(text.split()).lower().encode()).digest()[0] & 1
        assert split_of_text(text) == (REPORT if odd else TUNE)
    assert split_of_text("  What IS\n7 * 6? ") == split_of_text("what is 7 * 6?")  # whitespace and case only


def test_the_same_text_falls_in_the_same_split_in_every_set_and_order() -> None:
    texts = [f"Question number {i}: how many apples?" for i in range(200)]
    mt = [sample("mt_bench", 81 + i, t) for i, t in enumerate(texts)]
    spec = [sample("spec_bench", 1000 - i, t) for i, t in enumerate(texts)]
    assert [split_of(a) for a in mt] == [split_of(b) for b in spec]
    counts = sum(split_of(s) == REPORT for s in mt)
    assert 70 < counts < 130  # about half
    assert {s.question_id for s in held_out(mt)} == {s.question_id for s in mt if split_of(s) == REPORT}
    assert held_out(list(reversed(mt))) == list(reversed(held_out(mt)))


def test_select_split_takes_n_of_one_split_in_the_seeded_order() -> None:
    samples = [sample("gsm8k", i, f"problem {i}") for i in range(100)]
    report = select_split(samples, REPORT, 10)
    assert len(report) == 10 and all(split_of(s) == REPORT for s in report)
    assert select_split(samples, REPORT, 10) == report  # deterministic
    tune = select_split(samples, TUNE, None)
    assert not {s.question_id for s in tune} & {s.question_id for s in held_out(samples)}
    assert len(tune) + len(held_out(samples)) == 100 and len(select_split(samples, None, None)) == 100
    with pytest.raises(ValueError, match="unknown split"):
        select_split(samples, "test", 5)  # type: ignore[arg-type]
