"""Prepacked oneDNN linear layers for CPU inference: the verify forward's matrix multiplies, made flatter.

A tree verify multiplies ``q`` rows (root + nodes) by every weight matrix. On x86 CPUs the default BLAS path of
``nn.Linear`` is slow for such skinny products (measured on the development machine's AMD EPYC, one thread: a
1536 x 576 layer at q = 9 takes 255 µs, the 49,152 x 576 LM head 32 ms), while oneDNN with its weights
reordered once into its blocked layout takes 94 µs and 8.6 ms. That makes a q-token verify much closer to the
cost of one token, which is what speculative decoding lives on; plain decoding gains too.

`pack_linear_layers(module)` replaces every ``nn.Linear`` of a float32 CPU module, in place, by a
`PackedLinear` that keeps the original ``weight`` (tied weights stay tied; code that reads ``.weight`` still works)
plus the packed copy it computes with. The module's own ``forward`` and ``generate`` then use the packed kernels,
so a pipeline on a packed target stays token-for-token equal to that model's own greedy ``generate()``. Results
differ from the default BLAS in the last bits (a different summation order), as between any two BLAS builds.

Example::

    >>> model = tiny_causal_lm("llama")
    >>> pack_linear_layers(model)      # -> number of layers replaced
"""

from __future__ import annotations

import torch
from torch import nn

from specframe.errors import ConfigError


def onednn_linear_available() -> bool:
    """Whether this torch build has the oneDNN packed linear operators (x86 CPU builds do)."""
    return bool(torch.backends.mkldnn.is_available()) and hasattr(torch.ops.mkldnn, "_linear_pointwise") \
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


class PackedLinear(nn.Module):
    """``y = x W^T + b`` with ``W`` prepacked for oneDNN; see the module docstring."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight  # the original parameter (shared with tied embeddings)
        self.bias = linear.bias
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)
        self.register_buffer("packed_weight", packed, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out]
        bias = None if self.bias is None else self.bias.detach()
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed_weight, bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, " \
               "oneDNN prepacked"


def resolve_cpu_linear(choice: str, module: nn.Module) -> str:
    """``auto`` -> ``onednn`` for a float32 CPU module where oneDNN is available, else ``default``."""
    if choice != "auto":
        return choice
    param = next(module.parameters(), None)
    fits = param is not None and param.device.type == "cpu" and param.dtype == torch.float32
    return "onednn" if fits and onednn_linear_available() else "default"


def pack_linear_layers(module: nn.Module, *, what: str = "the model", field: str = "cpu_linear",
                       hint: str = "") -> int:
    """Replace every ``nn.Linear`` in ``module`` by a `PackedLinear`; return how many were replaced.

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
            setattr(parent, name, PackedLinear(child))
            replaced += 1
    return replaced
