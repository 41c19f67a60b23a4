"""Prompt token ids from chat messages: the one place a chat template is applied.

:func:`encode_messages` is what :meth:`specframe.interfaces.TargetModel.encode_messages` does by default, and
every caller (``Pipeline.generate``, ``specframe bench``'s conversations, training-data generation) goes
through that method, so ``run`` and ``bench`` send a target the same prompt.

With a chat template (``chat=None``: when the tokenizer has one; ``chat=True``: required) the messages are
rendered with ``add_generation_prompt`` and ``enable_thinking=False`` (Qwen3's switch, as in the papers'
protocol; other templates ignore it), then tokenized without special tokens (the template has them). Without
a template (``chat=False``, or ``None`` and the tokenizer has none) the contents are joined with blank lines
and tokenized as plain text.

Example: ``[user "Write a poem.", assistant "Roses...", user "Now shorten it."]`` without a template encodes
``"Write a poem.\\n\\nRoses...\\n\\nNow shorten it."``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specframe.errors import GenerationError

Messages = Sequence[Mapping[str, str]]


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def user_message(text: str) -> list[dict[str, str]]:
    """``text`` as a one-message conversation."""
    return [{"role": "user", "content": text}]


def encode_messages(tokenizer: Any, messages: Messages, *, chat: bool | None = None,
                    add_generation_prompt: bool = True) -> list[int]:
    """Token ids of ``messages`` (see the module docstring)."""
    if tokenizer is None:
        raise GenerationError("encoding a text prompt needs a tokenizer, but the target has none",
                              hint="pass token ids, or load the target from a directory with a tokenizer")
    use_chat = has_chat_template(tokenizer) if chat is None else chat
    if use_chat:
        if not has_chat_template(tokenizer):
            raise GenerationError(
                f"the tokenizer ({type(tokenizer).__name__}) has no chat template",
                hint="pass chat=False to encode the text as is, or use the model's instruct tokenizer",
            )
        text = tokenizer.apply_chat_template(list(messages), tokenize=False,
                                             add_generation_prompt=add_generation_prompt, enable_thinking=False)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer("\n\n".join(m["content"] for m in messages if m["content"]))["input_ids"])
