"""Self-written chat data: conversations whose user turns the target writes itself, then answers.

A ``self_chat`` prompt (:func:`self_chat_prompt`) is a conversation of one to three user turns, each a *sentinel*
(:func:`user_turn_sentinel`) rather than text. At generation time (:mod:`specframe_smollm2.training.generate_data`)
every sentinel is replaced by a user message the target writes: the conversation so far, then the chat template's
opening of a user message and a short *starter* ("How do I", "Thanks! Now", ...) are fed, and the target continues
by sampling (temperature 0.9, top-p 0.95, at most 48 tokens, until its end-of-turn token). The target then answers
that message greedily, as for every other prompt. This is Magpie (Xu et al., 2024, "Alignment data synthesis from
scratch by prompting aligned LLMs with nothing") with starters: the opening words vary the form of the requests,
and follow-up turns see the target's own earlier answers, so the drafter learns multi-turn chat in the target's
own distribution of topics, beyond the word lists of :mod:`specframe_smollm2.training.chat_prompts`.

Guards: a written turn of fewer than 3 words, one holding a special token, or one sharing a word n-gram with an
evaluation set (the recipe's ``decontaminate`` list) is replaced by a templated instruction
(:func:`~specframe_smollm2.training.chat_prompts.instruct_prompt` seeded by the turn's nonce), so every shard keeps
its size and no evaluation text enters through the target's own writing. Sampling is seeded per batch from the
turns' nonces (the recipe's seed draws them), so a shard regenerates identically.

Example::

    rng = random.Random(0)
    self_chat_prompt(rng)   # ('\u241eself-turn 2771190 How can I\u241e', '\u241eself-turn 8838 Thanks! Now\u241e')
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from specframe_smollm2.training.chat_prompts import instruct_prompt
from specframe_smollm2.training.prompt_files import word_ngrams

#: Opening words of a first user turn.
FIRST_STARTERS = (
    "How do I", "How can I", "What is", "What are", "Why does", "Why is", "Can you explain", "Can you help me",
    "Write a", "Write an", "Give me", "I need", "I want to", "Tell me about", "Explain", "Describe", "Summarize",
    "What's the best way to", "Help me", "Could you", "Please", "List", "Compare", "Suggest", "Create a",
    "I'm trying to", "My", "Is it", "Should I", "Which", "When should", "What happens if", "Plan a", "Translate",
    "Rewrite", "Make a", "Generate", "Draft", "I have a question about", "What would you",
)
#: Opening words of a follow-up user turn (it sees the target's previous answer).
FOLLOW_STARTERS = (
    "Thanks! Now", "Can you", "What about", "Could you make it", "Why", "How", "Great. Can you also",
    "I don't understand", "Please explain", "Give me an example of", "Make it", "Shorten", "Now write",
    "What if", "Can you add", "Tell me more about", "Is there", "OK, and", "Summarize", "Rewrite",
)
#: Sampling settings of a written user turn.
TURN_TEMPERATURE, TURN_TOP_P, TURN_MAX_TOKENS = 0.9, 0.95, 48

_SENTINEL = re.compile(r"^\u241eself-turn (\d+) (.+)\u241e$")
_MARK = "\u241emessage\u241e"


def user_turn_sentinel(nonce: int, starter: str) -> str:
    """The placeholder of a user turn the target writes, opening with ``starter`` (``nonce`` makes it unique and
    seeds its sampling)."""
    return f"\u241eself-turn {int(nonce)} {starter}\u241e"


def parse_sentinel(turn: str) -> tuple[int, str] | None:
    """``(nonce, starter)`` of a sentinel turn, None for an ordinary user turn."""
    match = _SENTINEL.match(turn)
    return None if match is None else (int(match.group(1)), match.group(2))


def self_chat_prompt(rng: random.Random) -> tuple[str, ...]:
    """One to three sentinel user turns (half of them two, a quarter one, a quarter three)."""
    turns = rng.choices((1, 2, 3), weights=(1, 2, 1))[0]
    out = [user_turn_sentinel(rng.randrange(10**9), rng.choice(FIRST_STARTERS))]
    out += [user_turn_sentinel(rng.randrange(10**9), rng.choice(FOLLOW_STARTERS)) for _ in range(turns - 1)]
    return tuple(out)


@dataclass
class UserTurnWriter:
    """Writes the sentinel user turns of a batch with the target (see the module docstring).

    Args:
        banned: word n-grams of the evaluation sets (a written turn containing one is replaced).
        ngram: their n.
    """

    banned: frozenset[tuple[str, ...]] = frozenset()
    ngram: int = 10

    def write(self, model: Any, tokenizer: Any, histories: Sequence[list[dict[str, str]]],
              sentinels: Sequence[str]) -> list[str]:
        """The user messages that replace ``sentinels``, one per conversation ``histories[i]`` (earlier turns)."""
        parsed = [parse_sentinel(s) for s in sentinels]
        if any(p is None for p in parsed):
            raise ValueError("UserTurnWriter.write takes sentinel turns only")
        nonces = [p[0] for p in parsed if p is not None]
        starters = [p[1] for p in parsed if p is not None]
        prefixes = [self._prefix(tokenizer, h) + s for h, s in zip(histories, starters, strict=True)]
        encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in prefixes]
        width = max(len(e) for e in encoded)
        pad = int(tokenizer.pad_token_id)
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded], dtype=torch.long)
        attn = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], dtype=torch.long)
        eos = model.generation_config.eos_token_id
        eos_id = int(eos if isinstance(eos, int) else eos[0])
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(sum(nonces) % (2**63))
            out = model.generate(input_ids=ids, attention_mask=attn, do_sample=True, temperature=TURN_TEMPERATURE,
                                 top_p=TURN_TOP_P, top_k=0, max_new_tokens=TURN_MAX_TOKENS, pad_token_id=eos_id,
                                 eos_token_id=eos_id)
        texts = []
        for row, starter, nonce in zip(out[:, width:].tolist(), starters, nonces, strict=True):
            cut = row.index(eos_id) if eos_id in row else len(row)
            texts.append(self._accept(starter + tokenizer.decode(row[:cut], skip_special_tokens=False), nonce))
        return texts

    @staticmethod
    def _prefix(tokenizer: Any, history: list[dict[str, str]]) -> str:
        """What the chat template puts before a new user message's text after ``history``."""
        text = tokenizer.apply_chat_template([*history, {"role": "user", "content": _MARK}], tokenize=False,
                                             add_generation_prompt=False)
        return text[: text.index(_MARK)]

    def _accept(self, text: str, nonce: int) -> str:
        """``text`` when it is a usable user turn, else a templated instruction seeded by ``nonce``."""
        text = text.strip()
        usable = len(text.split()) >= 3 and "<|" not in text and not (word_ngrams(text, self.ngram) & self.banned)
        return text if usable else instruct_prompt(random.Random(nonce))
