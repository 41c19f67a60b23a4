"""Prompt signatures and their neighbours (`specframe.cost.text_kind`), as `benchmarks/text_kind_neighbours.py`
measures them. `budget: auto` no longer uses them (its memory keeps the calibration only).

Two kinds of prompt that share a chat template (math-like ids and chat-like ids).
"""

from __future__ import annotations

import math
import random

from specframe.cost.text_kind import SIGNATURE_SIZE, bucket, neighbours, prompt_signature

TEMPLATE = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712,
            2, 198, 1, 4093, 198]  # the ids every prompt of a pipeline shares (system prompt, role markers)
MATH_WORDS = random.Random(1).sample(range(100, 49152), 20)
CHAT_WORDS = random.Random(2).sample(range(100, 49152), 20)


def prompt(words: list[int], seed: int, length: int = 40) -> list[int]:
    rng = random.Random(seed)
    return [*TEMPLATE, *(rng.choice(words) for _ in range(length)), 2, 198, 1, 520, 9531, 198]


def test_signatures_have_unit_length_and_follow_the_worked_example() -> None:
    sig = prompt_signature(prompt(MATH_WORDS, 0))
    assert len(sig) == SIGNATURE_SIZE and math.isclose(math.sqrt(sum(v * v for v in sig)), 1.0, abs_tol=1e-3)
    assert prompt_signature(prompt(MATH_WORDS, 0)) == sig
    assert prompt_signature([]) == (0.0,) * SIGNATURE_SIZE
    small = prompt_signature([5, 5, 9], size=4)
    counts = [0.0] * 4
    counts[bucket(5, 4)] += 2
    counts[bucket(9, 4)] += 1
    damped = [math.sqrt(c) for c in counts]
    norm = math.sqrt(sum(v * v for v in damped))
    assert small == tuple(round(v / norm, 4) for v in damped)


def test_neighbours_see_past_the_shared_template() -> None:
    """Uncentred, every signature is alike (the template dominates); centred, each kind finds its own."""
    remembered = [prompt_signature(prompt(MATH_WORDS, i)) for i in range(6)] + \
        [prompt_signature(prompt(CHAT_WORDS, 100 + i)) for i in range(6)]
    found = neighbours(prompt_signature(prompt(CHAT_WORDS, 999)), remembered, min_similarity=0.3, limit=4)
    assert found and all(index >= 6 for index, _ in found)
    found = neighbours(prompt_signature(prompt(MATH_WORDS, 999)), remembered, min_similarity=0.3, limit=4)
    assert found and all(index < 6 for index, _ in found)
    assert neighbours(remembered[0], remembered[:1], min_similarity=0.0, limit=4) == []  # nothing to centre on
    raw = sum(a * b for a, b in zip(remembered[0], remembered[6], strict=True))
    assert raw > 0.5  # the control: a math and a chat prompt look alike before centring
