"""`FrozenLinear`: ``x @ W^T`` for a weight that never changes, with a pre-packed CPU kernel for small batches.

Tree construction multiplies a few rows (the kept children of one depth, typically 2 to 12) by the GRU's
large projection matrices (``[3G, H]`` = 3072 x 2560 for Domino). On CPU the BLAS GEMM re-packs the whole
weight on every such call, which makes 2 rows cost several times one row (thread CPU time on the 2-core
AMD EPYC development machine, 1 thread: 12 x 2560 -> 3072 took ~5.1 ms with ``F.linear`` and ~2.7 ms with a
pre-packed oneDNN weight; 12 x 1024 -> 3072 ~1.8 ms vs ~1.0 ms; one row is fastest as a plain
matrix-vector product, ~1.8 ms for 2560 -> 3072).

So on CPU, for float32/bfloat16 weights and when PyTorch ships the oneDNN ops, the weight is packed once and
calls with at least :data:`PACKED_MIN_ROWS` rows use it; everything else (one row, other devices and dtypes)
is ``F.linear``. Results agree with ``F.linear`` to float rounding.

The packed copy is a snapshot: build the `FrozenLinear` after the weight is loaded and placed.

Example::

    proj = FrozenLinear(head.w_ih)      # packs W_ih once
    gates = proj(x)                     # x [..., H] -> [..., 3G]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: Row count from which the pre-packed kernel is used (one row is a matrix-vector product).
PACKED_MIN_ROWS = 2


def _pack(weight: torch.Tensor) -> torch.Tensor | None:
    """A oneDNN-packed copy of ``weight`` ``[out, in]``, or None where that is unavailable."""
    ops = getattr(torch.ops, "mkldnn", None)
    if (
        weight.device.type != "cpu"
        or weight.dtype not in (torch.float32, torch.bfloat16)
        or not torch.backends.mkldnn.is_available()
        or not hasattr(ops, "_reorder_linear_weight")
        or not hasattr(ops, "_linear_pointwise")
    ):
        return None
    try:
        with torch.no_grad():
            return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), 8)
    except RuntimeError:
        return None


class FrozenLinear:
    """``F.linear(x, weight)`` without bias, faster on CPU for a few rows. See the module docstring."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight  # [out, in]
        self._packed = _pack(weight)

    @property
    def packed(self) -> bool:
        return self._packed is not None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out]
        rows = x.numel() // max(x.shape[-1], 1)
        if self._packed is None or rows < PACKED_MIN_ROWS or x.dtype != self.weight.dtype:
            return F.linear(x, self.weight)
        out = torch.ops.mkldnn._linear_pointwise(x.reshape(rows, x.shape[-1]).contiguous(), self._packed, None,
                                                 "none", [], "")
        return out.view(*x.shape[:-1], out.shape[-1])
