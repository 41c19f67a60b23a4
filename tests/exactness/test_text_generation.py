"""Text-level generation on a tiny random Llama with a word-level tokenizer: chat template, streaming, stop
strings, and greedy equality with transformers' generate() for a string prompt."""

from __future__ import annotations

import pytest
import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import tiny_causal_lm, tiny_tokenizer

from specframe.pipeline import Pipeline

WORDS = [f"w{i}" for i in range(506)]  # 6 specials + 506 words = the model's 512 ids
PIPE = {"drafter": {"type": "ngram", "num_speculative_tokens": 4}, "tree_builder": {"type": "chain"},
        "pruner": {"type": "none"}, "sampling": {"temperature": 0.0}, "budget": 4}


@pytest.fixture(scope="module")
def pipe() -> Pipeline:
    model = tiny_causal_lm("llama", seed=5)
    model.generation_config.eos_token_id = None  # random weights: keep generating to the length limit
    model.config.eos_token_id = None
    target = HFTarget.from_model(model, tiny_tokenizer(WORDS))
    target.eos_token_ids = ()
    return Pipeline.from_dict(PIPE, target=target)


def test_string_prompt_uses_chat_template_and_matches_generate(pipe: Pipeline) -> None:
    ids = pipe.encode("w1 w2 w3")
    assert ids[0].tolist() == pipe.target.tokenizer("<user> w1 w2 w3 <assistant>")["input_ids"]
    result = pipe.generate("w1 w2 w3", 24)
    with torch.inference_mode():
        ref = pipe.target.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                         max_new_tokens=24, eos_token_id=None, pad_token_id=0)
    assert result.tokens == ref[0, ids.shape[1]:].tolist()
    assert result.text == pipe.target.tokenizer.decode(result.tokens, skip_special_tokens=True)


def test_streamed_pieces_add_up_to_the_text(pipe: Pipeline) -> None:
    pieces: list[str] = []
    result = pipe.generate("w4 w5", 20, stream=pieces.append)
    assert len(pieces) >= 2 and "".join(pieces) == result.text


def test_stop_string_cuts_the_text_and_ends_generation(pipe: Pipeline) -> None:
    free = pipe.generate("w7 w8", 30)
    words = free.text.split()
    stop = words[6]
    first = words.index(stop)
    result = pipe.generate("w7 w8", 30, stop=[stop])
    assert result.stop_reason == "stop_string"
    assert result.text == free.text[: free.text.index(stop)] and result.text.split() == words[:first]
    assert len(result.tokens) < len(free.tokens)
