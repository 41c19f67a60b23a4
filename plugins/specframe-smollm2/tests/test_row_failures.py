"""A request that fails while a batch decodes is refused alone; finished results are kept and the others go on.

On the shipped pair (DFlash chain): one request's prefill raises (out of memory, say), and later, mid-batch, the
drafter raises whenever a poisoned request is among the rows it drafts for. The loop refuses those two requests
with their reasons, keeps the result of a request that had already finished, and decodes the rest exactly as plain
decoding does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from specframe_diffusion.drafters.block_rows import BlockRows
from specframe_hf.slot_rows import SlotRows
from specframe_smollm2.cache import target_dir

from specframe.decode.request import RefusedRequest, Request
from specframe.metrics.records import GenerationResult
from specframe.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[3]
HAVE_TARGET = (target_dir() / "manifest.json").is_file()
PROMPTS = ["Tom has 3 boxes of 12 pencils and gives away 7. How many pencils are left?",
           "Write a Python function that returns the largest of three numbers.",
           "Give me three tips for sleeping better.",  # poisoned: the drafter fails once it has 4 new tokens
           "Explain photosynthesis in one sentence.",  # its prefill fails
           "Name a colour."]  # finishes first (2 tokens)


@pytest.mark.real_model
@pytest.mark.skipif(not HAVE_TARGET, reason="no converted SmolLM2 (run `specframe setup-target`)")
def test_a_failing_request_is_refused_alone_mid_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECFRAME_CHECKPOINTS", str(ROOT / "checkpoints" / "smollm2-135m"))
    pipe = Pipeline.from_yaml(ROOT / "examples" / "smollm2" / "dflash-chain.yaml")
    plain = pipe.with_stage("drafter", {"type": "none"})
    requests = [Request(p, 2 if i == 4 else 16, seed=i) for i, p in enumerate(PROMPTS)]
    expected = [r.tokens for r in plain.generate_batch(requests)]
    poisoned = pipe.encode(PROMPTS[2])[0].tolist()
    doomed_len = int(pipe.encode(PROMPTS[3]).shape[1])

    propose = BlockRows.propose

    def failing_propose(self: BlockRows, rows: Any, states: Any) -> Any:
        for state in states:
            ids = state.tokens[0].tolist()
            if ids[: len(poisoned)] == poisoned and len(ids) - len(poisoned) >= 4:
                raise RuntimeError("the drafter fails on this request")
        return propose(self, rows, states)

    add_row = SlotRows.add_row

    def failing_add_row(self: SlotRows, input_ids: Any, capacity: int | None = None) -> Any:
        if input_ids.shape[1] == doomed_len:
            raise MemoryError("out of memory in the prefill")
        return add_row(self, input_ids, capacity)

    monkeypatch.setattr(BlockRows, "propose", failing_propose)
    monkeypatch.setattr(SlotRows, "add_row", failing_add_row)
    finished: list[int] = []
    outcomes = pipe.generate_batch(requests, batch_size=5, on_finish=lambda i, _: finished.append(i))
    assert isinstance(outcomes[2], RefusedRequest) and "drafter fails" in outcomes[2].error.message
    assert isinstance(outcomes[3], RefusedRequest) and "out of memory" in outcomes[3].error.message
    for i in (0, 1, 4):
        assert isinstance(outcomes[i], GenerationResult)
        assert outcomes[i].tokens == expected[i], i
    assert finished.index(4) < finished.index(2)  # the short request was done before the failure
    assert any(r.accepted >= 1 for i in (0, 1) for r in outcomes[i].rounds)  # the survivors kept drafting
