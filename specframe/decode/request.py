"""Requests of the decode loop: what a caller asks for, the checked inputs, and a refusal.

A `Request` carries a prompt and optional per-request limits; `RequestInputs` is what the loop needs after the
checks (prompt ids, the token cap within the context, stop strings, seed). A request that cannot run (its prompt
does not fit the target's context, holds ids outside the vocabulary, is not a prompt at all, ...) becomes a
`RefusedRequest` naming it, and the other requests of the call still run.

Every value a caller hands the Python API enters through one check here:

* :func:`check_prompt`: a prompt is text (``str``), token ids (a list, tuple or range of whole numbers, numpy
  integers included) or an integer tensor of shape ``[P]`` or ``[1, P]``. ``None``, ``bytes``, floats, booleans,
  float or boolean tensors and tensors holding several rows are refused with what was given and the fix; nothing is
  taken as token ids that is not one;
* :func:`check_stops`: stop strings are a ``str`` (one stop string: ``stop="10"`` stops at "10") or a sequence of
  non-empty strings;
* :func:`prompt_list`: what ``generate_batch`` takes is a list (or tuple) of prompts or a ``[B, P]`` tensor of
  equal-length prompts, never one text (``"abc"`` is not three prompts).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
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


def check_stops(stops: str | Sequence[str]) -> tuple[str, ...]:
    """Stop strings as a tuple: one ``str`` is one stop string; otherwise a sequence of non-empty strings."""
    if isinstance(stops, str):
        stops = (stops,)
    elif isinstance(stops, (bytes, bytearray)) or not isinstance(stops, Iterable) or isinstance(stops, dict):
        raise GenerationError(f"stop must be a string or a list of strings, got {_shown(stops)}",
                              hint='for example stop="\\n\\n" or stop=["Question:", "\\n\\n"]')
    out = tuple(stops)
    if any(not isinstance(s, str) or not s for s in out):
        raise GenerationError(f"stop strings must be non-empty strings, got {_shown(list(out))}",
                              hint="an empty stop string matches at once and would end every output empty")
    return out


def check_batch_size_value(batch_size: object) -> int:
    """``batch_size`` as an int: a whole number (``int`` or an integer array scalar), never a bool, float or string
    (``2.7``, ``True`` and ``"2"`` would otherwise become 2, 1 and 2 without a word). The range (at least 1, and
    the drafter's batch support) is checked by the decode loop."""
    if not isinstance(batch_size, bool):
        try:
            return operator.index(batch_size)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise GenerationError(f"batch_size must be a whole number of rows, got {_shown(batch_size)} "
                          f"({type(batch_size).__name__})", hint="for example batch_size=4 (leave it out for all "
                                                                  "requests at once)")


def materialise_stops(stops: object) -> object:
    """Stop strings given as a one-shot iterator (a generator) as a tuple, so every request of a call sees them;
    anything else unchanged (:func:`check_stops` judges it per request)."""
    return tuple(stops) if isinstance(stops, Iterator) else stops


#: What a prompt may be, for error messages.
PROMPT_FORMS = "text (a str), token ids (a list of ints) or an integer tensor of shape [P] or [1, P]"


def check_prompt(prompt: object) -> str | torch.Tensor:
    """``prompt`` as text or as token ids ``[1, P]`` int64 (on the tensor's device); a GenerationError saying what
    was given and what a prompt is otherwise (see the module docstring)."""
    if isinstance(prompt, str):
        return prompt
    if prompt is None:
        raise GenerationError("the prompt is None", hint=f"give {PROMPT_FORMS}")
    if isinstance(prompt, (bytes, bytearray, memoryview)):
        raise GenerationError(f"the prompt is {type(prompt).__name__} ({_shown(prompt)}), not text or token ids",
                              hint="decode it to text first, e.g. prompt.decode('utf-8')")
    if isinstance(prompt, torch.Tensor):
        return _tensor_prompt(prompt)
    if isinstance(prompt, (list, tuple, range)) or _is_array(prompt):
        return _id_list(prompt)
    raise GenerationError(f"the prompt is {type(prompt).__name__} {_shown(prompt)}, not text or token ids",
                          hint=f"give {PROMPT_FORMS}")


def _tensor_prompt(prompt: torch.Tensor) -> torch.Tensor:  # [1, P] int64
    if prompt.dtype == torch.bool or prompt.is_floating_point() or prompt.is_complex():
        raise GenerationError(f"a tensor prompt must hold integer token ids, got dtype "
                              f"{str(prompt.dtype).removeprefix('torch.')}",
                              hint="pass the token ids as an integer tensor (torch.long), or the text itself")
    if prompt.dim() == 1:
        return prompt.long().view(1, -1)
    if prompt.dim() == 2 and prompt.shape[0] == 1:
        return prompt.long()
    raise GenerationError(f"a tensor prompt is one prompt of shape [P] or [1, P], got shape {list(prompt.shape)}",
                          hint="for several prompts pass a list of them to generate() or generate_batch()")


def _is_array(value: object) -> bool:
    """A numpy array (or another array type with ``__array__`` and a length), which iterates like a list."""
    return hasattr(value, "__array__") and hasattr(value, "__len__") and hasattr(value, "__iter__")


def _id_list(prompt: Any) -> torch.Tensor:  # [1, P] int64
    ids = []
    for i, value in enumerate(prompt):
        try:
            number = None if isinstance(value, (bool, str)) else operator.index(value)
        except TypeError:
            number = None
        if number is None:
            raise GenerationError(f"token ids must be whole numbers, but element {i} of the prompt is "
                                  f"{_shown(value)}", hint=f"give {PROMPT_FORMS}; to decode several prompts at once "
                                                           "pass a list of them")
        if not 0 <= number < 1 << 63:
            raise GenerationError(f"token id {number} at element {i} of the prompt is not a token id",
                                  hint="encode the prompt with the target's tokenizer")
        ids.append(number)
    return torch.tensor([ids], dtype=torch.long)


def prompt_list(prompts: object) -> list[Any]:
    """The prompts of a batch call as a list (see the module docstring); a GenerationError for one text, bytes or
    something that is not a collection of prompts."""
    if isinstance(prompts, torch.Tensor):
        if prompts.dim() == 2:
            return list(prompts)
        raise GenerationError(f"generate_batch takes a list of prompts or a [B, P] tensor, got a tensor of shape "
                              f"{list(prompts.shape)}", hint="for one prompt use generate(prompt)")
    if isinstance(prompts, (str, bytes, bytearray)) or not isinstance(prompts, (list, tuple)):
        raise GenerationError(f"generate_batch takes a list of prompts, got a {type(prompts).__name__} "
                              f"({_shown(prompts)})", hint="for one prompt use generate(prompt), or wrap it: [prompt]")
    return list(prompts)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
