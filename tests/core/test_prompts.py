"""Prompt encoding with and without a chat template: the one encoder (:mod:`specframe.prompts`), reached
through ``TargetModel.encode_messages`` by ``run``, ``bench`` and the hf adapter alike."""

from __future__ import annotations

import pytest
import specframe_hf.testing as hf_testing

from specframe.errors import GenerationError
from specframe.prompts import encode_messages, user_message

WORDS = ["hello", "world", "cat"]  # ids 6, 7, 8


class _RecordingTokenizer:
    """Records the keyword arguments the chat template is rendered with."""

    chat_template = "x"

    def __init__(self) -> None:
        self.kwargs: dict = {}

    def apply_chat_template(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        self.kwargs = kwargs
        return " ".join(m["content"] for m in messages)

    def __call__(self, text, add_special_tokens=True):  # type: ignore[no-untyped-def]
        return {"input_ids": [len(w) for w in text.split()]}


def test_text_goes_through_the_chat_template_when_there_is_one():
    tok = hf_testing.tiny_tokenizer(WORDS)
    assert encode_messages(tok, user_message("hello cat")) == [4, 6, 8, 5]  # <user> hello cat <assistant>
    assert encode_messages(tok, user_message("hello cat"), chat=False) == [6, 8]


def test_messages_are_rendered_in_order():
    tok = hf_testing.tiny_tokenizer(WORDS)
    messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "world"}]
    assert encode_messages(tok, messages, add_generation_prompt=False) == [4, 6, 5, 7]
    assert encode_messages(tok, messages, chat=False) == [6, 7]  # plain text: contents joined


def test_tokenizer_without_template():
    tok = hf_testing.tiny_tokenizer(WORDS, chat_template=False)
    assert encode_messages(tok, user_message("world cat")) == [7, 8]
    with pytest.raises(GenerationError, match="no chat template"):
        encode_messages(tok, user_message("world"), chat=True)


def test_the_thinking_switch_is_always_off():
    """``run`` and ``bench`` used to differ here: a Qwen3 target got a thinking prompt from ``run`` only."""
    tok = _RecordingTokenizer()
    encode_messages(tok, user_message("a b"))
    assert tok.kwargs == {"tokenize": False, "add_generation_prompt": True, "enable_thinking": False}


def test_run_and_bench_encode_the_same_prompt():
    from specframe_hf.target import HFTarget

    from specframe.bench.conversation import encode_turn
    from specframe.pipeline import Pipeline

    target = HFTarget.from_model(hf_testing.tiny_causal_lm("llama", vocab_size=16), hf_testing.tiny_tokenizer(WORDS))
    pipe = Pipeline.from_dict({"drafter": {"type": "none"}}, target=target)
    assert pipe.encode("hello cat").tolist() == encode_turn(pipe, ["hello cat"], []).tolist() == [[4, 6, 8, 5]]


def test_target_encode_and_decode_round_trip():
    from specframe_hf.target import HFTarget

    target = HFTarget.from_model(hf_testing.tiny_causal_lm("llama", vocab_size=16), hf_testing.tiny_tokenizer(WORDS))
    ids = target.encode("hello world", chat=False)
    assert ids.tolist() == [[6, 7]]
    assert target.decode(ids[0]) == "hello world"
    bare = HFTarget.from_model(hf_testing.tiny_causal_lm("llama", vocab_size=16))
    with pytest.raises(GenerationError, match="needs a tokenizer"):
        bare.encode("hello")
