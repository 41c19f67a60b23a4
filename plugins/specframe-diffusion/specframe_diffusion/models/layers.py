"""Qwen3 building blocks of the draft backbone: RMSNorm, rotary position embedding, SiLU-gated MLP.

Written from the Qwen3 definitions (the drafters are ``model_type: qwen3`` configs), with parameter names equal to
the published keys (``weight``, ``gate_proj`` / ``up_proj`` / ``down_proj``).
"""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight``, normalised in float32 and cast back to the input dtype."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., D] -> [..., D]
        normed = nn.functional.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)  # one fused op
        return self.weight * normed.to(x.dtype)


class SwiGLUMLP(nn.Module):
    """``down_proj(silu(gate_proj(x)) * up_proj(x))`` without biases."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., H] -> [..., H]
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class RotaryEmbedding(nn.Module):
    """Plain RoPE tables: ``cos/sin(pos * theta^(-2i/d))`` duplicated over both halves of the head dim.

    The inverse frequencies are computed in float32 once per device and kept outside the module's state, so they are
    never saved (as in the published checkpoints) and never cast to a low-precision dtype with the module.
    """

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta
        self._inv_freq: dict[torch.device, torch.Tensor] = {}  # [D/2] float32 per device, computed once

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``positions`` ``[T]`` (or per row ``[B, T]``) int64 -> ``(cos, sin)`` each ``[T, head_dim]`` (or
        ``[B, T, head_dim]``) in ``dtype``; every position's table is the same whatever the shape."""
        inv_freq = self._inv_freq.get(positions.device)
        if inv_freq is None:
            exponents = torch.arange(0, self.head_dim, 2, device=positions.device).float() / self.head_dim
            inv_freq = self._inv_freq.setdefault(positions.device, 1.0 / (self.theta**exponents))  # [D/2]
        freqs = positions.float()[..., None] * inv_freq  # [..., T, D/2]
        emb = torch.cat([freqs, freqs], dim=-1)  # [..., T, D]
        return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:  # [..., D]
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``[B, heads, T, D]`` by per-position tables ``[T, D]`` shared by the rows, or per row
    ``[B, 1, T, D]``."""
    return x * cos + rotate_half(x) * sin
