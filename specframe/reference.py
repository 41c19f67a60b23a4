"""transformers' ``generate()`` as the reference speedups are also reported against (method ``hf_generate``).

A user judges specframe against the ``model.generate()`` they already run. ``bench``, ``report``, ``run
--compare-ar`` and the demo therefore time the target's own ``generate()`` next to specframe's plain loop:

* on the **same target object** (a target that offers it implements :class:`NativeGenerate`; the ``hf``
  adapter does, :mod:`specframe_hf.reference`), with the library's **default kernels**: linear layers that
  ``cpu_linear`` prepacked run on ``nn.Linear``'s path for the reference (the unmodified model's
  ``generate()``, what users compare against), and a float32 LM head (``logits_dtype``) is swapped back;
* with the **same prompt ids** (the pipeline's encoding, chat template included) and the pipeline's sampling
  settings (greedy, or temperature / top-k / top-p);
* for **exactly the same number of new tokens**: end-of-sequence stopping is off and ``max_new_tokens`` is the
  count the compared decode produced, so tokens per second compare work for work.

:func:`reference_result` returns an ordinary :class:`~specframe.metrics.records.GenerationResult` (one round
per decoded token, no stage times), so records, tables and τ treat it like any method.

Example::

    result, kernels = reference_result(pipe, ids, new_tokens=len(plain.tokens), seed=0)
    result.tokens == plain.tokens      # greedy fp32: expected True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

from specframe.decode.exclusive import exclusive
from specframe.errors import GenerationError
from specframe.metrics.records import GenerationResult, RoundRecord
from specframe.types import SamplingParams

if TYPE_CHECKING:
    from specframe.pipeline import Pipeline

#: Method name of the reference in bench records and reports.
REFERENCE_NAME = "hf_generate"


@dataclass(frozen=True)
class NativeRun:
    """One timed ``generate()`` call."""

    tokens: list[int]  # new tokens
    prefill_ns: int  # until the first new token was sampled
    total_ns: int  # the whole call
    kernels: str  # how it ran, for people ("default nn.Linear kernels; 30 prepacked layers switched back")


@runtime_checkable
class NativeGenerate(Protocol):
    """A target that can time its model's own ``generate()`` (see the module docstring)."""

    def native_generate(self, input_ids: torch.Tensor, new_tokens: int, *, sampling: SamplingParams,
                        seed: int) -> NativeRun:
        """Exactly ``new_tokens`` new tokens after ``input_ids`` ``[1, P]`` (no end-of-sequence stop)."""
        ...


def supports_reference(pipe: Pipeline) -> bool:
    return isinstance(pipe.target, NativeGenerate)


def reference_result(pipe: Pipeline, ids: torch.Tensor, *, new_tokens: int,
                     seed: int) -> tuple[GenerationResult, str]:
    """The target's own ``generate()`` on ``ids`` ``[1, P]`` for ``new_tokens`` tokens, as a result record, and
    how it ran (:attr:`NativeRun.kernels`)."""
    target = pipe.target
    if not isinstance(target, NativeGenerate):
        raise GenerationError(f"the target {type(target).__name__} has no generate() to compare against",
                              hint="the hf and smollm2 targets have one; other targets are compared with the "
                                   "plain loop only")
    if new_tokens < 1:
        raise GenerationError(f"generate() needs at least one new token, got {new_tokens}")
    with exclusive(target, "the generate() reference"):  # the model's layers may carry a decode's taps
        run = target.native_generate(ids.view(1, -1), new_tokens, sampling=pipe.sampling, seed=seed)
    text = None
    if target.tokenizer is not None:
        text = target.tokenizer.decode(run.tokens, skip_special_tokens=True)
    eos = set(target.eos_token_ids)
    rounds = [RoundRecord(nodes=0, depth=0, accepted=0, committed=1) for _ in run.tokens[1:]]
    result = GenerationResult(tokens=list(run.tokens), text=text, prompt_len=int(ids.numel()), rounds=rounds,
                              prefill_ns=run.prefill_ns, total_ns=run.total_ns,
                              stop_reason="eos" if run.tokens and run.tokens[-1] in eos else "length", seed=seed)
    return result, run.kernels
