"""Admission against the KV pool's budget (``target.kv_memory``): a request joins only when its reservation fits,
waits while the rows in flight hold the pool, and is refused alone when it can never fit; outputs do not change."""

from __future__ import annotations

from typing import Any

import pytest
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids

from specframe.decode.request import RefusedRequest
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost
from specframe.testing.counters import RoundCounters

#: Greedy speculative decoding with the prompt-lookup drafter (rows verify chains and accept different counts).
CONFIG: dict[str, Any] = {"drafter": {"type": "ngram", "num_speculative_tokens": 4}, "corrector": {"type": "identity"},
                          "tree_builder": {"type": "chain"}, "pruner": {"type": "none"}, "verifier": {"type": "greedy"},
                          "budget": 4, "sampling": {"temperature": 0.0}, "generation": {"stop_at_eos": False}}
NEW = 20


def pipeline(model: Any, kv_memory: int | None, capture: str = "off") -> Pipeline:
    target = HFTarget.from_model(model, kv_memory=kv_memory, capture=capture,
                                 capture_backend="eager" if capture != "off" else None)
    return Pipeline.from_dict(CONFIG, target=target, host=PluginHost(allowlist=["hf", "trees", "verifiers"]))


@pytest.mark.parametrize("capture", ["off", "compile"])
def test_requests_wait_for_room_and_decode_as_they_would_alone(tiny_model, capture: str) -> None:
    """A pool of 7 blocks holds two reservations of 3 blocks (prompt + 20 tokens + one tree of 5 <= 48 slots):
    with batch size 4, at most two rows are ever in flight, every request decodes exactly as it does alone, the
    pool is allocated once and never during a round, and a request whose reservation exceeds the whole pool is
    refused alone with the fix named. With bucketed verify rounds (``capture``) the pool's first block is the
    scratch block and six remain: the same two rows fit."""
    model = tiny_model("llama")
    prompts = [random_ids(6 + 2 * i, seed=i) for i in range(4)]
    alone = pipeline(model, None)
    reference = [alone.generate(p, NEW).tokens for p in prompts]
    per_block = 16 * 2 * 2 * 2 * 16 * 4  # slots x (key, value) x layers x KV heads x head dim x bytes
    pipe = pipeline(model, 7 * per_block, capture)
    too_long = random_ids(100, seed=9)  # 100 + 20 + 5 slots: 8 blocks
    with RoundCounters() as counters:
        results = pipe.generate_batch([*prompts[:2], too_long, *prompts[2:]], NEW, batch_size=4)
    refused = results[2]
    assert isinstance(refused, RefusedRequest) and "kv_memory" in str(refused) and "125 KV slots" in str(refused)
    done = [r for r in results if not isinstance(r, RefusedRequest)]
    assert [r.tokens for r in done] == reference
    assert max(r.rows for r in counters.rounds) == 2 and min(r.rows for r in counters.rounds) >= 1
    assert counters.kv_allocations_after_admission == 0
    assert pipe.target.kv_memory == 7 * per_block
    assert bool(pipe.target.bucket_shapes) == (capture != "off")  # the rounds took the bucketed path
