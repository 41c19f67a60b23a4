"""``logits_dtype: float32``: the LM head of a bf16 (or fp16) model computed in float32, the cheap exactness aid.

In bf16 a 17-token verify forward and a 1-token forward do not round alike, so a greedy tree decode can pick a
different argmax than plain decoding where the two best logits are close. Most of that rounding sits in the
last product: the LM head over the vocabulary, whose bf16 output keeps 8 bits of mantissa. With
``logits_dtype: float32`` the model's head is replaced by :class:`Float32Head`: the bf16 hidden states are
cast to float32 and multiplied by a float32 copy of the head's weight, so the logits are float32 and their
rounding no longer depends on the bf16 output grid (the decoder layers still run in bf16). The copy costs
``V x H`` float32 values (113 MB for SmolLM2-135M); the head's own weight stays the model's parameter (tied
embeddings stay tied). ``benchmarks/bf16_exactness.py`` measures what it buys.

``generate()`` of the same model uses the float32 head too; the reference run of :mod:`specframe_hf.reference`
swaps the original head back (:func:`original_head`), so it is the unmodified model's ``generate()``.

Example::

    apply_logits_dtype(model, "float32")            # True: model.lm_head is now a Float32Head
    model(input_ids=ids).logits.dtype                # torch.float32
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from specframe.errors import ConfigError


class Float32Head(nn.Module):
    """``logits = float32(x) @ float32(W)^T (+ float32(b))`` for a lower-precision head ``W``."""

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        weight = getattr(head, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            raise ConfigError(f"logits_dtype: float32 needs a linear LM head, found {type(head).__name__}",
                              hint="use logits_dtype: auto for this model")
        self.weight = weight  # the model's parameter (tied to the input embeddings where the model ties them)
        self.bias = getattr(head, "bias", None)
        self.original = [head]  # a list, so the original is not registered as a second submodule
        with torch.no_grad():
            self.register_buffer("weight32", weight.detach().float(), persistent=False)
            bias32 = None if self.bias is None else self.bias.detach().float()
            self.register_buffer("bias32", bias32, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., H] -> [..., V] float32
        return F.linear(x.float(), self.weight32, self.bias32)

    def extra_repr(self) -> str:
        return f"in_features={self.weight.shape[1]}, out_features={self.weight.shape[0]}, float32 logits"


def apply_logits_dtype(model: Any, logits_dtype: str) -> bool:
    """Put a :class:`Float32Head` on ``model`` for ``float32`` when its head computes in another dtype; return
    whether the head was replaced (``auto``, or a model already in float32, changes nothing)."""
    if logits_dtype == "auto":
        return False
    if logits_dtype != "float32":
        raise ConfigError(f"logits_dtype {logits_dtype!r} is not supported", hint="use auto or float32")
    head = model.get_output_embeddings()
    if isinstance(head, Float32Head) or head.weight.dtype == torch.float32:
        return False
    model.set_output_embeddings(Float32Head(head))
    return True


@contextmanager
def original_head(model: Any) -> Iterator[bool]:
    """The model's own head (not a :class:`Float32Head`) inside the block, restored afterwards; yields whether
    a head was swapped."""
    head = model.get_output_embeddings()
    if not isinstance(head, Float32Head):
        yield False
        return
    model.set_output_embeddings(head.original[0])
    try:
        yield True
    finally:
        model.set_output_embeddings(head)
