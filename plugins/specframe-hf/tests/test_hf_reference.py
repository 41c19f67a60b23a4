"""transformers' ``generate()`` as the ``hf_generate`` reference, and the float32 LM head of ``logits_dtype``."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from specframe_hf.head_precision import Float32Head, apply_logits_dtype, original_head
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids, tiny_causal_lm

from specframe.cpu_linear import LinearKernels, linear_kernels_of, onednn_linear_available, pack_linear_layers
from specframe.pipeline import Pipeline
from specframe.reference import NativeGenerate, reference_result
from specframe.types import SamplingParams

GREEDY = SamplingParams()
PIPELINE = {"sampling": {"temperature": 0.0}, "budget": 6, "drafter": {"type": "ngram", "num_speculative_tokens": 6},
            "tree_builder": {"type": "chain"}, "pruner": {"type": "none"}, "generation": {"chat_template": False}}


def plain_generate(model: Any, prompt: list[int], n: int) -> list[int]:
    """What a user runs: ``generate()`` without an end-of-sequence id."""
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = None
    try:
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False, pad_token_id=0)
    finally:
        model.generation_config.eos_token_id = saved
    return out[0, len(prompt):].tolist()


def test_the_reference_decodes_exactly_the_asked_count_even_past_an_eos() -> None:
    model = tiny_causal_lm("llama", seed=0)
    prompt = random_ids(10, seed=3)
    free = plain_generate(model, prompt, 20)
    model.generation_config.eos_token_id = free[4]  # generate() on its own would stop after 5 tokens
    target = HFTarget.from_model(model)
    assert isinstance(target, NativeGenerate)
    run = target.native_generate(torch.tensor([prompt]), 20, sampling=GREEDY, seed=0)
    assert run.tokens == free and 0 < run.prefill_ns <= run.total_ns
    assert model.generation_config.eos_token_id == free[4]  # the model's generation config is back


def test_the_reference_runs_the_unmodified_model_on_a_packed_target() -> None:
    if not onednn_linear_available():
        pytest.skip("this torch build has no oneDNN")
    model = tiny_causal_lm("qwen3", seed=1)
    prompt = random_ids(12, seed=1)
    expected = plain_generate(tiny_causal_lm("qwen3", seed=1), prompt, 16)  # an unpacked copy
    pack_linear_layers(model, kernels=LinearKernels(low=2))
    run = HFTarget.from_model(model).native_generate(torch.tensor([prompt]), 16, sampling=GREEDY, seed=0)
    assert run.tokens == expected
    assert "default nn.Linear kernels" in run.kernels and "switched back" in run.kernels
    assert linear_kernels_of(model) == LinearKernels(low=2)  # the target's rule is restored after the call


def test_batched_reference_left_pads_prompts_of_different_lengths() -> None:
    """Static batching as a transformers user writes it: every row decodes its own prompt (greedy, fp32: the same
    tokens as that prompt alone on this tiny model), exactly the asked count, and the generation config is back."""
    model = tiny_causal_lm("llama", seed=0)
    prompts = [random_ids(5, seed=1), random_ids(11, seed=2), random_ids(8, seed=3)]
    alone = [plain_generate(model, p, 7) for p in prompts]
    saved = model.generation_config
    target = HFTarget.from_model(model)
    rows, ns, kernels = target.native_generate_batch([torch.tensor(p) for p in prompts], 7, sampling=GREEDY, seed=0)
    assert rows == alone and ns > 0 and "generate()" in kernels
    assert model.generation_config is saved
    with pytest.raises(ValueError, match="at least one prompt"):
        target.native_generate_batch([], 7, sampling=GREEDY, seed=0)


def test_sampled_reference_follows_the_seed_and_leaves_the_global_rng_alone() -> None:
    target = HFTarget.from_model(tiny_causal_lm("llama", seed=0))
    law = SamplingParams(temperature=0.8, top_k=20, top_p=0.9)
    ids = torch.tensor([random_ids(8, seed=4)])
    state = torch.random.get_rng_state()
    a = target.native_generate(ids, 12, sampling=law, seed=5).tokens
    assert torch.equal(torch.random.get_rng_state(), state)
    assert a == target.native_generate(ids, 12, sampling=law, seed=5).tokens
    assert len(a) == 12 and a != target.native_generate(ids, 12, sampling=law, seed=6).tokens


def test_reference_result_matches_the_pipeline_token_for_token_at_greedy() -> None:
    model = tiny_causal_lm("qwen3", seed=1)
    model.generation_config.eos_token_id = None
    pipe = Pipeline.from_dict(PIPELINE, target=HFTarget.from_model(model))
    ids = torch.tensor([random_ids(12, seed=2)])
    mine = pipe.generate(ids, 24)
    result, kernels = reference_result(pipe, ids, new_tokens=len(mine.tokens), seed=0)
    assert result.tokens == mine.tokens and result.num_rounds == len(mine.tokens) - 1 and result.tau == 1.0
    assert result.prompt_len == 12 and result.stop_reason == "length" and kernels.startswith("transformers")


def test_float32_logits_on_a_bfloat16_model() -> None:
    model = tiny_causal_lm("llama", seed=0, dtype=torch.bfloat16)
    bf16_head = model.get_output_embeddings()
    assert apply_logits_dtype(model, "auto") is False
    assert apply_logits_dtype(model, "float32") is True and apply_logits_dtype(model, "float32") is False
    head = model.get_output_embeddings()
    assert isinstance(head, Float32Head) and head.weight is bf16_head.weight
    ids = torch.tensor([random_ids(7, seed=1)])
    with torch.no_grad():
        hidden = model.model(input_ids=ids).last_hidden_state  # [1, 7, H] bf16
        logits = model(input_ids=ids).logits
        assert logits.dtype == torch.float32
        torch.testing.assert_close(logits, hidden.float() @ bf16_head.weight.float().T)
        assert not torch.equal(logits, bf16_head(hidden).float())  # the bf16 head rounds its output
        with original_head(model) as swapped:
            assert swapped and model(input_ids=ids).logits.dtype == torch.bfloat16
    assert model.get_output_embeddings() is head
    target = HFTarget.from_model(model)
    out = target.prefill(ids)
    torch.testing.assert_close(out.logits[0, -1], logits[0, -1])
    assert apply_logits_dtype(tiny_causal_lm("llama", seed=0), "float32") is False  # already float32


def test_logits_dtype_is_a_target_option(tmp_path) -> None:
    tiny_causal_lm("llama", seed=0).save_pretrained(tmp_path)
    target = HFTarget.from_pretrained(str(tmp_path), dtype="bfloat16", device="cpu", logits_dtype="float32")
    assert target.dtype == torch.bfloat16 and isinstance(target.model.get_output_embeddings(), Float32Head)
    run = target.native_generate(torch.tensor([random_ids(6, seed=0)]), 4, sampling=GREEDY, seed=0)
    assert "the model's own LM head" in run.kernels
