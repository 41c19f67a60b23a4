"""Chunked prefill of joining rows (``target.prefill_chunk``, :mod:`specframe_hf.chunked_prefill`): a long prompt
fills its reserved blocks a chunk per decode round while the rows in flight keep decoding, and nothing a request
sees changes: its output, its KV entries and the taps its drafter begins on are those of a one-shot prefill."""

from __future__ import annotations

import math
import types
from typing import Any, ClassVar, Literal

import pytest
import torch
from specframe_hf.config import HFTargetConfig, NgramConfig
from specframe_hf.ngram_drafter import NgramDrafter
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids

import specframe.decode.loop as loop
from specframe.interfaces import DecodeState
from specframe.pipeline import Pipeline
from specframe.plugins import ComponentSpec, PluginHost, hookimpl
from specframe.types import TargetOutput

#: Greedy speculative decoding with the prompt-lookup drafter (rows verify chains and accept different counts).
CONFIG: dict[str, Any] = {"drafter": {"type": "ngram", "num_speculative_tokens": 4}, "corrector": {"type": "identity"},
                          "tree_builder": {"type": "chain"}, "pruner": {"type": "none"}, "verifier": {"type": "greedy"},
                          "budget": 4, "sampling": {"temperature": 0.0}, "generation": {"stop_at_eos": False}}
NEW = 24
ONE_SHOT = 10**6  # a chunk longer than any prompt: every prompt is prefilled in one forward
ATOL = 1e-4  # fp32 rounding of activations of magnitude ~10-30 (the tiny models' wide init)
#: Bytes of one 16-slot block of the tiny models (slots x (key, value) x layers x KV heads x head dim x fp32).
PER_BLOCK = 16 * 2 * 2 * 2 * 16 * 4


def pipeline(model: Any, chunk: int, config: dict[str, Any] = CONFIG, host: PluginHost | None = None) -> Pipeline:
    target = HFTarget.from_model(model, prefill_chunk=chunk)
    return Pipeline.from_dict(config, target=target, host=host or PluginHost(allowlist=["hf", "trees", "verifiers"]))


# ----------------------------------------------------------------------------------------------- the target's rows
def prefill_in_chunks(rows: Any, prompt: list[int], capacity: int) -> tuple[TargetOutput, int]:
    """Run a chunked prefill to its end; its output and the number of forwards it took."""
    job = rows.begin_row(torch.tensor([prompt]), capacity=capacity)
    steps = 0
    while True:
        steps += 1
        out = job.step()
        if out is not None:
            return out, steps


@pytest.mark.parametrize("chunk", [1, 7, 16, 50])
@pytest.mark.parametrize("scattered", [False, True])
def test_chunks_fill_the_pool_as_one_forward_does(tiny_model, chunk: int, scattered: bool) -> None:
    """A prompt of 50 tokens prefilled in chunks of 1, 7 (a prime), one block (16) or whole (50) takes
    ceil(50 / chunk) forwards and leaves the row with the same length, KV entries, last logits and per-position
    taps as a one-shot ``add_row``; also when its reserved blocks are not one contiguous run (``scattered``:
    a fixed pool of 8 blocks where rows 0 and 2 of three 2-block rows stay, so the free blocks are 2, 3, 6, 7)."""
    model = tiny_model("llama")
    prompt, capacity, taps = random_ids(50, seed=4), 64, (0, 1)
    reference_rows = HFTarget.from_model(model).ragged_batch(taps)
    reference = reference_rows.add_row(torch.tensor([prompt]), capacity=capacity)
    reference_kv = reference_rows.cache.read(0, 50)

    rows = HFTarget.from_model(model, kv_memory=8 * PER_BLOCK if scattered else None,
                               prefill_chunk=chunk).ragged_batch(taps)
    if scattered:
        for seed in range(3):
            rows.add_row(torch.tensor([random_ids(5, seed=seed)]), capacity=32)
        rows.keep_rows([0, 2])
    out, steps = prefill_in_chunks(rows, prompt, capacity)
    row = rows.batch_size - 1
    assert steps == math.ceil(50 / chunk)
    assert (rows.cache.run(row) is None) == scattered
    assert rows.lengths[row] == 50
    assert out.logits.shape == (1, 1, 512) and torch.allclose(out.logits, reference.logits, atol=ATOL, rtol=1e-5)
    assert out.hidden is not None and reference.hidden is not None
    assert out.hidden.shape == (1, 50, 2 * 64) and torch.allclose(out.hidden, reference.hidden, atol=ATOL, rtol=1e-5)
    assert torch.allclose(rows.cache.read(row, 50), reference_kv, atol=ATOL, rtol=1e-5)


def test_a_cancelled_or_closed_prefill_gives_its_blocks_back(tiny_model) -> None:
    """A joining prompt's blocks are taken at ``begin_row`` (the pool's admission sees them gone) and return when
    it is cancelled or the rows close before its last chunk."""
    rows = HFTarget.from_model(tiny_model("llama"), kv_memory=8 * PER_BLOCK, prefill_chunk=8).ragged_batch()
    free = len(rows.cache.free)
    job = rows.begin_row(torch.tensor([random_ids(40, seed=1)]), capacity=64)
    assert len(rows.cache.free) == free - 4 and rows.room(5 * 16) is False
    assert job.step() is None
    job.cancel()
    assert len(rows.cache.free) == free and rows.batch_size == 0
    job = rows.begin_row(torch.tensor([random_ids(40, seed=1)]), capacity=64)
    job.step()
    rows.close()
    assert len(rows.cache.free) == free


def test_prefill_chunk_is_a_target_option_with_a_clear_error() -> None:
    assert HFTargetConfig(model="m").prefill_chunk == 512
    with pytest.raises(ValueError, match="prefill_chunk"):
        HFTargetConfig(model="m", prefill_chunk=0)


# ------------------------------------------------------------------------------------------------- the decode loop
@pytest.mark.parametrize("chunk", [1, 7, 13])
def test_outputs_do_not_depend_on_the_chunk(tiny_model, chunk: int) -> None:
    """Greedy fp32: each request's tokens are the same with its prompt prefilled in one forward or in chunks of
    1 and of the primes 7 and 13, alone and in a batch of two rows where long prompts join rows in flight (the
    prompt of 6 tokens is shorter than every chunk but 1)."""
    model = tiny_model("llama")
    prompts = [random_ids(6, seed=1), random_ids(45, seed=2), random_ids(31, seed=3), random_ids(12, seed=5)]
    reference = [pipeline(model, ONE_SHOT).generate(p, NEW).tokens for p in prompts]
    pipe = pipeline(model, chunk)
    assert [pipe.generate(p, NEW).tokens for p in prompts] == reference
    assert [r.tokens for r in pipe.generate_batch(prompts, NEW, batch_size=2)] == reference


def test_rows_in_flight_advance_every_round_while_a_long_prompt_joins(tiny_model, monkeypatch) -> None:
    """A short request decodes while a prompt of 45 tokens joins in chunks of 7: the long row first decodes in
    round ceil(45 / 7) = 7, so six rounds ran while its chunks did, and in every round every row in flight
    gained at least one token. In one forward (no chunking) the long prompt joins before the first round."""
    model = tiny_model("llama")
    prompts = [random_ids(6, seed=1), random_ids(45, seed=2)]
    for chunk, first_round in ((7, 7), (ONE_SHOT, 1)):
        rounds: list[tuple[dict[int, int], dict[int, int]]] = []
        inner = loop.run_round

        def recorded(session: Any, rows: list[Any], inner: Any = inner, rounds: list[Any] = rounds) -> None:
            before = {r.index: int(r.state.tokens.shape[1]) for r in rows}
            inner(session, rows)
            rounds.append((before, {r.index: int(r.state.tokens.shape[1]) for r in rows}))

        monkeypatch.setattr(loop, "run_round", recorded)
        results = pipeline(model, chunk).generate_batch(prompts, 40, batch_size=2)
        monkeypatch.undo()
        assert all(len(r.tokens) == 40 for r in results)
        joined = next(i for i, (before, _) in enumerate(rounds, 1) if 1 in before)
        assert joined == first_round
        assert all(after[i] > n for before, after in rounds for i, n in before.items())
        assert all(0 in before for before, _ in rounds[:joined])  # the short row was in flight all along


class TapConfig(NgramConfig):
    type: Literal["taps"] = "taps"  # type: ignore[assignment]


class TapRecorder(NgramDrafter):
    """The prompt-lookup drafter, tapping both target layers: records the prompt taps each request begins on."""

    target_layers = (0, 1)
    seen: ClassVar[dict[tuple[int, ...], torch.Tensor]] = {}

    def begin(self, state: DecodeState, prefill: TargetOutput) -> None:
        assert prefill.hidden is not None
        self.seen[tuple(state.tokens[0, : state.prompt_len].tolist())] = prefill.hidden.clone()
        super().begin(state, prefill)


def tap_host() -> PluginHost:
    mod = types.ModuleType("tap_recorder")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="taps", config=TapConfig, summary="records prompt taps",
                            factory=lambda c, ctx: TapRecorder(c))

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    host = PluginHost(allowlist=["hf", "trees", "verifiers"])
    host.register(mod, "tap_recorder")
    return host


def test_the_drafter_begins_on_the_whole_prompts_taps(tiny_model) -> None:
    """A drafter tapping the target's layers begins each request on the taps of every prompt position, the
    chunks' taps concatenated: the same (to fp32 rounding) as a one-shot prefill's, in a batch where the long
    prompts join a row in flight; and the outputs are the same."""
    model = tiny_model("llama")
    config = {**CONFIG, "drafter": {"type": "taps", "num_speculative_tokens": 4}}
    prompts = [random_ids(6, seed=1), random_ids(45, seed=2), random_ids(31, seed=3)]
    runs = []
    for chunk in (ONE_SHOT, 7):
        TapRecorder.seen = {}
        tokens = [r.tokens for r in pipeline(model, chunk, config, tap_host()).generate_batch(prompts, NEW,
                                                                                             batch_size=2)]
        runs.append((tokens, dict(TapRecorder.seen)))
    (one_tokens, one_taps), (chunk_tokens, chunk_taps) = runs
    assert chunk_tokens == one_tokens
    assert set(chunk_taps) == {tuple(p) for p in prompts}
    for p in prompts:
        got, want = chunk_taps[tuple(p)], one_taps[tuple(p)]
        assert got.shape == (1, len(p), 2 * 64) and torch.allclose(got, want, atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("capture", ["off", "compile"])
def test_a_request_waits_for_room_held_by_a_joining_prompt(tiny_model, capture: str) -> None:
    """A joining prompt holds its reservation from admission: in a pool of 7 blocks, a long prompt (45 + 24 + 5
    slots: 5 blocks) joining in chunks leaves no room for a short request (3 blocks), which waits until the long
    row has left, is not refused, and decodes as it does alone; also with bucketed verify rounds (``capture``,
    whose scratch block leaves 6)."""
    model = tiny_model("llama")
    prompts = [random_ids(45, seed=2), random_ids(6, seed=1)]
    reference = [pipeline(model, ONE_SHOT).generate(p, NEW).tokens for p in prompts]
    target = HFTarget.from_model(model, kv_memory=7 * PER_BLOCK, prefill_chunk=7, capture=capture,
                                 capture_backend="eager" if capture != "off" else None)
    pipe = Pipeline.from_dict(CONFIG, target=target, host=PluginHost(allowlist=["hf", "trees", "verifiers"]))
    assert [r.tokens for r in pipe.generate_batch(prompts, NEW, batch_size=2)] == reference
    assert bool(target.bucket_shapes) == (capture != "off")
