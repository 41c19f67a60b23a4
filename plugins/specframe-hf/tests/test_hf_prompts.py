"""Prompt encoding with and without a chat template."""

from __future__ import annotations

import pytest
from specframe_hf.prompts import encode_prompt
from specframe_hf.target import HFTarget
from specframe_hf.testing import tiny_causal_lm, tiny_tokenizer

from specframe.errors import GenerationError

WORDS = ["hello", "world", "cat"]  # ids 6, 7, 8


def test_text_goes_through_the_chat_template_when_there_is_one():
    tok = tiny_tokenizer(WORDS)
    assert encode_prompt(tok, "hello cat") == [4, 6, 8, 5]  # <user> hello cat <assistant>
    assert encode_prompt(tok, "hello cat", chat=False) == [6, 8]


def test_messages_are_rendered_in_order():
    tok = tiny_tokenizer(WORDS)
    messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "world"}]
    assert encode_prompt(tok, messages, add_generation_prompt=False) == [4, 6, 5, 7]
    with pytest.raises(GenerationError, match="chat=True"):
        encode_prompt(tok, messages, chat=False)


def test_tokenizer_without_template():
    tok = tiny_tokenizer(WORDS, chat_template=False)
    assert encode_prompt(tok, "world cat") == [7, 8]
    with pytest.raises(GenerationError, match="no chat template"):
        encode_prompt(tok, "world", chat=True)


def test_target_encode_and_decode_round_trip():
    target = HFTarget.from_model(tiny_causal_lm("llama", vocab_size=16), tiny_tokenizer(WORDS))
    ids = target.encode("hello world", chat=False)
    assert ids.tolist() == [[6, 7]]
    assert target.decode(ids[0]) == "hello world"
    bare = HFTarget.from_model(tiny_causal_lm("llama", vocab_size=16))
    with pytest.raises(GenerationError, match="needs a tokenizer"):
        bare.encode("hello")
