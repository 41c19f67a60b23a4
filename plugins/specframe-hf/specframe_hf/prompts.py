"""Turning text or chat messages into prompt token ids with a Hugging Face tokenizer.

``encode_prompt(tok, "Hi")`` wraps the text as one user message when the tokenizer has a chat template
(``chat=None``, the default) and encodes it plainly otherwise; ``chat=True`` insists on the template and
``chat=False`` never uses it. A list of ``{"role": ..., "content": ...}`` messages always needs a template.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specframe.errors import GenerationError

Messages = Sequence[Mapping[str, str]]


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def encode_prompt(
    tokenizer: Any,
    prompt: str | Messages,
    *,
    chat: bool | None = None,
    add_generation_prompt: bool = True,
) -> list[int]:
    """Token ids of ``prompt``, through the chat template when there is one (see the module docstring)."""
    if tokenizer is None:
        raise GenerationError("encoding a text prompt needs a tokenizer, but the target has none",
                              hint="pass token ids, or load the target from a directory with a tokenizer")
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    use_chat = has_chat_template(tokenizer) if chat is None else chat
    if not isinstance(prompt, str) and not use_chat:
        raise GenerationError("chat messages need chat=True (or None) to be encoded",
                              hint="pass a plain string to encode text without the chat template")
    if use_chat:
        if not has_chat_template(tokenizer):
            raise GenerationError(
                f"the tokenizer ({type(tokenizer).__name__}) has no chat template",
                hint="pass chat=False to encode the text as is, or use the model's instruct tokenizer",
            )
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(prompt)["input_ids"])
