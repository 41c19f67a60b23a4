"""Requests of the decode loop: what a caller asks for, the checked inputs, and a refusal.

A `Request` carries a prompt and optional per-request limits; `RequestInputs` is what the loop needs after the
checks (prompt ids, the token cap within the context, stop strings, seed). A request that cannot run (its prompt
does not fit the target's context, holds ids outside the vocabulary, ...) becomes a `RefusedRequest` naming it,
and the other requests of the call still run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from specframe.errors import GenerationError

Prompt = str | Sequence[int] | torch.Tensor


@dataclass(frozen=True)
class Request:
    """One request: a prompt and its own limits and seed (None: the call's or the pipeline's defaults)."""

    prompt: Any  # Prompt: text, token ids or a [P] / [1, P] tensor
    max_new_tokens: int | None = None
    seed: int | None = None
    stop: Sequence[str] | None = None


@dataclass(frozen=True)
class RefusedRequest:
    """The outcome of a request that was refused before decoding (the others of its call still ran)."""

    index: int
    error: GenerationError

    def __str__(self) -> str:
        return f"request {self.index}: {self.error.message}"


@dataclass(frozen=True)
class RequestInputs:
    """A request's checked inputs."""

    ids: torch.Tensor  # [1, P] int64 prompt ids
    max_new: int  # the requested token limit
    cap: int  # tokens that fit: min(max_new, context - P)
    stops: tuple[str, ...]
    seed: int

    @property
    def prompt_len(self) -> int:
        return int(self.ids.shape[1])


def check_prompt_ids(ids: torch.Tensor, vocab_size: int, max_length: int | None) -> None:
    """Refuse a prompt that is empty, does not fit the context or holds ids outside the vocabulary."""
    if ids.numel() == 0:
        raise GenerationError("the prompt is empty", hint="give at least one token")
    if max_length is not None and ids.shape[1] >= max_length:
        raise GenerationError(f"the prompt has {ids.shape[1]} tokens but the target's context is {max_length}",
                              hint="shorten the prompt")
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise GenerationError(f"prompt token ids must lie in [0, {vocab_size}), found {low}..{high}",
                              hint="encode the prompt with the target's tokenizer")


def check_stops(stops: Sequence[str]) -> tuple[str, ...]:
    out = tuple(stops)
    if any(not isinstance(s, str) or not s for s in out):
        raise GenerationError(f"stop strings must be non-empty strings, got {list(out)!r}",
                              hint="an empty stop string matches at once and would end every output empty")
    return out
