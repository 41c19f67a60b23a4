"""Prompt token ids for one turn of a benchmark question, multi-turn conversations included.

With a chat template (and ``generation.chat_template: true``) the turns become a conversation: user turn 1,
the method's own answer to it, user turn 2, ... then the assistant prompt; ``enable_thinking=False`` is passed
(Qwen3's switch, ignored by other templates), as in the papers' protocol. Without a template a single turn is
encoded as plain text, and later turns are joined to the earlier turns and answers with blank lines.

Example: turns ``["Write a poem.", "Now shorten it."]`` with answers ``["Roses..."]`` encode for turn 2 as
``apply_chat_template([user "Write a poem.", assistant "Roses...", user "Now shorten it."])``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specframe.errors import GenerationError
from specframe.pipeline import Pipeline


def encode_turn(pipe: Pipeline, turns: Sequence[str], answers: Sequence[str]) -> torch.Tensor:  # [1, P] int64
    """Token ids that ask ``turns[-1]`` after ``turns[:-1]`` were answered with ``answers``."""
    if len(answers) != len(turns) - 1:
        raise ValueError(f"turn {len(turns)} needs {len(turns) - 1} earlier answers, got {len(answers)}")
    tok = pipe.target.tokenizer
    if tok is None:
        raise GenerationError("benchmark prompts are text, but the target has no tokenizer",
                              hint="load the target from a directory with a tokenizer")
    if pipe.config.generation.chat_template and getattr(tok, "chat_template", None):
        messages = []
        for i, turn in enumerate(turns):
            messages.append({"role": "user", "content": turn})
            if i < len(answers):
                messages.append({"role": "assistant", "content": answers[i]})
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
        ids = list(tok(text, add_special_tokens=False)["input_ids"])
    else:
        parts = [part for pair in zip(turns, [*answers, ""], strict=True) for part in pair if part]
        ids = list(tok("\n\n".join(parts))["input_ids"])
    if not ids:
        raise GenerationError("a benchmark prompt encoded to no tokens", hint="check the tokenizer")
    return torch.tensor([ids], dtype=torch.long)
