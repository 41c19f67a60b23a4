"""Prompt token ids for one turn of a benchmark question, multi-turn conversations included.

With a chat template (and ``generation.chat_template: true``) the turns become a conversation: user turn 1,
the method's own answer to it, user turn 2, ... then the assistant prompt. The target's
:meth:`~specframe.interfaces.TargetModel.encode_messages` encodes it (:mod:`specframe.prompts`: the same
encoder ``run`` uses, ``enable_thinking=False`` included); without a template the turns and answers are joined
with blank lines.

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
    if pipe.target.tokenizer is None:
        raise GenerationError("benchmark prompts are text, but the target has no tokenizer",
                              hint="load the target from a directory with a tokenizer")
    messages = []
    for i, turn in enumerate(turns):
        messages.append({"role": "user", "content": turn})
        if i < len(answers):
            messages.append({"role": "assistant", "content": answers[i]})
    ids = pipe.target.encode_messages(messages, chat=None if pipe.config.generation.chat_template else False)
    if not ids:
        raise GenerationError("a benchmark prompt encoded to no tokens", hint="check the tokenizer")
    return torch.tensor([ids], dtype=torch.long)
