"""Prepacked oneDNN linear layers for CPU inference, used for the row counts where they are faster.

A tree verify multiplies ``q`` rows (root + nodes) by every weight matrix. On x86 CPUs the default BLAS path of
``nn.Linear`` can be slow for such skinny products, while oneDNN with its weights reordered once into its blocked
layout can be several times faster; which path is faster depends on the CPU and on the number of rows (one CPU's
BLAS wins the one-row product and loses the sixteen-row one, another's loses both). The measurements behind this
are in docs/benchmarks.md ("Which linear kernels does the target use?").

`pack_linear_layers(module)` replaces every ``nn.Linear`` of a float32 CPU module, in place, by a `PackedLinear`
that keeps the original ``weight`` (tied weights stay tied; code that reads ``.weight`` still works) plus the
packed copy. A `PackedLinear` holds both layouts, so it picks its kernel per call by the number of rows of the
product (``x.numel() // in_features``: batch × new tokens) under a `LinearKernels` rule: oneDNN for rows in
``[low, high)``, the default ``F.linear`` (exactly ``nn.Linear``'s computation) otherwise. `cpu_linear: auto`
measures both on the target and sets the rule (:mod:`specframe.cost.kernel_choice`); ``onednn`` packs every row
count. The module's own ``forward`` and ``generate`` use the same layers as the pipeline. Results differ from the
default BLAS in the last bits (a different summation order), as between any two BLAS builds, and under a rule that
switches by row count the kernel of a product, and so the last bits of every row's result, depends on how many
rows the product has: a verify of q tokens and a one-token step, or a request decoded alone and with batch-mates,
can run the same row through different kernels. Greedy outputs then stay equal to the model's own ``generate()``
except where two logits lie within that rounding (about 1e-6 relative in float32): equal in every exactness test
and benchmark run here, not guaranteed bit for bit.

`default_kernels(module)` switches every packed layer to the default path for a block (the reference
``generate()`` is measured that way: the unmodified model's kernels); `unpack_linear_layers` puts the original
``nn.Linear`` modules back and frees the packed copies.

Example::

    >>> model = tiny_causal_lm("llama")
    >>> pack_linear_layers(model)                                   # -> number of layers replaced
    >>> set_linear_kernels(model, LinearKernels(low=5))            # oneDNN from 5 rows, BLAS below
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from specframe.errors import ConfigError

#: ``high`` of a rule without an upper bound.
UNBOUNDED = sys.maxsize


@dataclass(frozen=True)
class LinearKernels:
    """Rows ``[low, high)`` of a product run on the oneDNN-prepacked weights; every other row count on the
    default path. ``NEVER`` (nothing packed) and ``ALWAYS`` (every row count) are the two plain choices."""

    low: int = 1
    high: int = UNBOUNDED

    def packed(self, rows: int) -> bool:
        return self.low <= rows < self.high

    @property
    def uses_onednn(self) -> bool:
        return self.low < self.high

    @property
    def name(self) -> str:
        """``default``, ``onednn`` or ``by_rows`` (what ``cpu_linear`` resolved to)."""
        if not self.uses_onednn:
            return "default"
        return "onednn" if self.low <= 1 and self.high == UNBOUNDED else "by_rows"

    def describe(self) -> str:
        """One line for people: which kernel runs for which rows."""
        if self.name != "by_rows":
            return {"default": "default BLAS (nn.Linear) for every row count",
                    "onednn": "oneDNN prepacked for every row count"}[self.name]
        if self.high == UNBOUNDED:
            return f"default BLAS below {self.low} rows, oneDNN prepacked from {self.low} rows"
        return f"oneDNN prepacked below {self.high} rows, default BLAS from {self.high} rows"

    def to_json(self) -> dict[str, int | None]:
        return {"low": self.low, "high": None if self.high == UNBOUNDED else self.high}


NEVER = LinearKernels(low=0, high=0)
ALWAYS = LinearKernels()


def onednn_linear_available() -> bool:
    """Whether this torch build has the oneDNN packed linear operators (x86 CPU builds do)."""
    return bool(torch.backends.mkldnn.is_available()) and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


class PackedLinear(nn.Module):
    """``y = x W^T + b`` with ``W`` also prepacked for oneDNN; the kernel is picked per call by the row count
    (see the module docstring)."""

    def __init__(self, linear: nn.Linear, kernels: LinearKernels = ALWAYS) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight  # the original parameter (shared with tied embeddings)
        self.bias = linear.bias
        self.kernels = kernels
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)
        self.register_buffer("packed_weight", packed, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out]
        kernels = self.kernels
        if kernels.low <= x.numel() // self.in_features < kernels.high:
            bias = None if self.bias is None else self.bias.detach()
            return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed_weight, bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)  # exactly nn.Linear.forward

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, " \
               f"{self.kernels.describe()}"


def packable(module: nn.Module) -> bool:
    """Whether oneDNN prepacking applies: this build has it and ``module`` is float32 on a CPU."""
    param = next(module.parameters(), None)
    return param is not None and param.device.type == "cpu" and param.dtype == torch.float32 \
        and onednn_linear_available()


def resolve_cpu_linear(choice: str, module: nn.Module) -> str:
    """``auto`` stays ``auto`` (measure, :mod:`specframe.cost.kernel_choice`) where prepacking applies to
    ``module``, else becomes ``default``; ``default`` and ``onednn`` are returned as given."""
    if choice != "auto":
        return choice
    return "auto" if packable(module) else "default"


def kernels_named(choice: str) -> LinearKernels:
    """The rule of an explicit ``cpu_linear`` setting (``default`` or ``onednn``)."""
    if choice not in ("default", "onednn"):
        raise ValueError(f"cpu_linear {choice!r} names no fixed kernel rule (auto is measured)")
    return ALWAYS if choice == "onednn" else NEVER


def pack_linear_layers(module: nn.Module, *, what: str = "the model", kernels: LinearKernels = ALWAYS,
                       field: str = "cpu_linear", hint: str = "") -> int:
    """Replace every ``nn.Linear`` in ``module`` by a `PackedLinear` under ``kernels``; return how many were
    replaced.

    ``field`` is how the pipeline names the setting that asked for oneDNN (``target.cpu_linear``, or
    ``drafter.cpu_linear (auto: as target.cpu_linear)``) and ``hint`` how to change it; errors name both.

    Raises:
        ConfigError: the build has no oneDNN, or the module is not float32 on a CPU.
    """
    if not onednn_linear_available():
        raise ConfigError(f"{field}: onednn is not available for {what}: this torch build has no oneDNN "
                          "packed linear operators", hint=hint or f"use {field.split()[0]}: default")
    replaced = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is not nn.Linear:
                continue
            weight = child.weight
            if weight.device.type != "cpu" or weight.dtype != torch.float32:
                raise ConfigError(f"{field}: onednn needs float32 weights on a CPU, but {what} has "
                                  f"{str(weight.dtype).removeprefix('torch.')} weights on {weight.device}",
                                  hint=hint or f"use dtype: float32 on a CPU, or {field.split()[0]}: default")
            setattr(parent, name, PackedLinear(child, kernels))
            replaced += 1
    return replaced


def packed_layers(module: nn.Module) -> list[PackedLinear]:
    return [m for m in module.modules() if isinstance(m, PackedLinear)]


def set_linear_kernels(module: nn.Module, kernels: LinearKernels) -> int:
    """Put every `PackedLinear` of ``module`` under ``kernels``; return how many there are."""
    layers = packed_layers(module)
    for layer in layers:
        layer.kernels = kernels
    return len(layers)


def linear_kernels_of(module: nn.Module) -> LinearKernels:
    """The rule of ``module``'s packed layers (the first one's), ``NEVER`` when none is packed."""
    layers = packed_layers(module)
    return layers[0].kernels if layers else NEVER


def unpack_linear_layers(module: nn.Module) -> int:
    """Put an ``nn.Linear`` with the same weight and bias back for every `PackedLinear` (freeing the packed
    copies); return how many were replaced."""
    replaced = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, PackedLinear):
                linear = nn.Linear(child.in_features, child.out_features, bias=child.bias is not None,
                                   device="meta")
                linear.weight = child.weight
                linear.bias = child.bias
                setattr(parent, name, linear)
                replaced += 1
    return replaced


@contextmanager
def default_kernels(module: nn.Module) -> Iterator[int]:
    """Run ``module``'s packed layers on the default path (``nn.Linear``'s computation) inside the block;
    yields how many layers were switched. Their rules are restored afterwards, also on an error."""
    layers = packed_layers(module)
    saved = [layer.kernels for layer in layers]
    for layer in layers:
        layer.kernels = NEVER
    try:
        yield len(layers)
    finally:
        for layer, kernels in zip(layers, saved, strict=True):
            layer.kernels = kernels
