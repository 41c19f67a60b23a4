"""`budget: auto` remembers per kind of text: prompt signatures, the gains of alike requests, and the memory file.

Synthetic histories (no timing, no model): two kinds of prompt that share a chat template, one on which the
drafter paid (math-like ids) and one on which it did not (chat-like ids).
"""

from __future__ import annotations

import math
import random

import pytest

from specframe.cost import AutoBudget, AutoBudgetSettings, ControllerMemory, CostProfile
from specframe.cost.memory import MAX_REQUESTS
from specframe.cost.text_kind import SIGNATURE_SIZE, bucket, neighbours, prompt_signature

STEEP = {1: 45.0, 2: 60.0, 5: 75.0, 9: 99.0, 17: 106.0, 33: 141.0, 65: 260.0}
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


def history(math_gain: float, chat_gain: float) -> ControllerMemory:
    """Ten math-like and ten chat-like earlier requests (alternating); the overall gain says drafting pays."""
    memory = ControllerMemory(gain=2.6, draft_ms=110.0)
    for i in range(10):
        memory.observe_request(prompt_signature(prompt(MATH_WORDS, i)), math_gain)
        memory.observe_request(prompt_signature(prompt(CHAT_WORDS, 50 + i)), chat_gain)
    return memory


def test_a_chat_request_starts_plain_after_chat_requests_that_did_not_pay() -> None:
    auto = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings(min_probe_interval=3),
                      memory=history(math_gain=4.0, chat_gain=1.1))
    bar = auto.break_even(1)
    assert 1.1 < bar < 2.6  # the overall average pays, chat alone does not
    chat = auto.start_row(prompt_signature(prompt(CHAT_WORDS, 777)))
    assert not chat.drafting and chat.plain_left == 3
    assert auto.start_row(prompt_signature(prompt(MATH_WORDS, 777))).drafting
    # Control: without a signature the overall gain decides, and it says draft (what a memory blind to kinds of
    # text would do for the chat request too).
    assert auto.memory.predict_gain(None) == 2.6 and auto.start_row(None).drafting


def test_a_finished_request_is_remembered_with_its_mean_gain_and_survives_the_file() -> None:
    auto = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings())
    sig = prompt_signature(prompt(CHAT_WORDS, 3))
    row = auto.start_row(sig)
    drafted = {"draft": 30.0, "build": 0.0, "prune": 0.0, "target": 80.0, "verify": 0.5, "commit": 0.5}
    for gain in (1.2, 1.0, 1.4):
        auto.observe_drafted([row], [], [gain], 6, drafted)
    auto.finish_row(row)
    assert auto.memory.requests == [(sig, pytest.approx(1.2))]
    again = ControllerMemory.from_json(auto.remember().to_json())
    assert again.requests[0][0] == sig and again.requests[0][1] == pytest.approx(1.2, abs=1e-4)
    plain = auto.start_row(sig)
    auto.finish_row(plain)  # no drafted round: nothing to remember
    assert len(auto.memory.requests) == 1


def test_the_memory_keeps_the_latest_requests_only() -> None:
    memory = ControllerMemory()
    for i in range(MAX_REQUESTS + 5):
        memory.observe_request(prompt_signature(prompt(MATH_WORDS, i)), 2.0 + i / 1000)
    assert len(memory.requests) == MAX_REQUESTS
    assert memory.requests[-1][1] == pytest.approx(2.0 + (MAX_REQUESTS + 4) / 1000)


def test_a_memory_of_format_1_is_still_read() -> None:
    old = ControllerMemory.from_json({"format": 1, "gain": 1.5, "draft_ms": 70.0, "calibration": None})
    assert old.gain == 1.5 and old.requests == []


GOOD = {"signature": [0.125] * SIGNATURE_SIZE, "gain": 1.5}


@pytest.mark.parametrize("requests", [
    "many", [GOOD] * (MAX_REQUESTS + 1), [{"signature": [0.1] * 3, "gain": 1.5}],
    [{"signature": [2.0] * SIGNATURE_SIZE, "gain": 1.5}],
    [{"signature": [float("nan")] * SIGNATURE_SIZE, "gain": 1.5}],
    [{"signature": [0.1] * SIGNATURE_SIZE, "gain": 1e9}], [{"signature": [0.1] * SIGNATURE_SIZE}], [[0.1, 1.5]],
])
def test_hostile_request_histories_are_refused(requests) -> None:
    with pytest.raises(ValueError, match="requests"):
        ControllerMemory.from_json({"format": 2, "gain": 1.5, "requests": requests})
