"""Fixes for two vLLM 0.32 CPU defects of speculative decoding, applied by the ``vllm.general_plugins`` entry point
(vLLM env only).

**Sampling.** The defect: on the CPU platform vLLM replaces the Triton kernel ``rejection_sampler.expand_kernel`` by
``vllm.utils.cpu_triton_utils._expand_kernel_impl``, which converts the *output* tensor to int64 with
``.to(torch.int64)`` (a copy unless it is int64 already), lets the C++ kernel fill the copy and never copies it
back. ``expand_batch_to_tokens`` allocates that output with ``new_empty``, so the per-token temperatures (float32)
and top-k (int32) of the draft positions that the rejection sampler applies to the target's logits are
uninitialised memory. Greedy decoding never reads them; at T > 0 the target law used to accept or reject drafts is
the target's at an arbitrary temperature, so vLLM's output law is not the target's (measured by ``make vllm-check``:
with 200 requests in a batch, the first draft was accepted 89-91 % of the time where the target gives it 19 % and
36 %). It is specific to the CPU platform (the GPU path runs the Triton kernel).

The fix: a pure-torch ``expand`` with the kernel's semantics (``x`` repeated per its tokens, ``replace_from``
replaced by ``replace_to``), written into the caller's tensor. It is installed only on the CPU platform of the
vLLM version verified to have the defect (:data:`DEFECTIVE_VERSIONS`), before the platform registers its kernel
overrides (``load_general_plugins`` runs first in every worker). Worked example: ``x = [0.0, 0.7]``,
``cu_num_tokens = [2, 5]``, ``replace 0 -> 1`` -> ``[1.0, 1.0, 0.7, 0.7, 0.7]``.

**The DFlash drafter's context keys.** The defect: ``DFlashQwen3Model._normalize_context_k`` normalises the context
keys of every drafter layer in one call, ``ops.rms_norm(out, all_k, k_norm_weights, eps)`` with ``all_k``
``[L, C, kv_heads, D]`` and the layers' ``k_norm`` weights stacked ``[L, D]``: the CUDA kernel picks the weight row
by the outermost index, the CPU kernel reads only the first ``D`` values, so on CPU every layer's context keys are
normalised with layer 0's ``k_norm`` weight (measured: the cross-check's drafter log-probabilities up to 1.9 away
from specframe's on the same rounds, docs/benchmarks/vllm-crosscheck/context-key-defect.txt; a grouped call on
random tensors matches layer 0's weight to 5e-7 and misses layer 1's by 2.0). The drafter still runs and drafts,
not as it was trained to, and greedy outputs stay right (they are the target's), so only a per-round comparison of
the drafter finds it. The fix: the same kernel called once per layer with that
layer's weight (:func:`normalize_context_k_per_layer`).
"""

from __future__ import annotations

from typing import Any

import torch

#: vLLM versions with both defects (checked by reading 0.32.0's source, and the second by running its CPU kernel).
DEFECTIVE_VERSIONS = frozenset({"0.32.0"})


def expand_into(
    output: torch.Tensor,  # [num_tokens] any dtype: written in place
    input_val: torch.Tensor,  # [batch]
    cu_num_tokens: torch.Tensor,  # [batch] cumulative token counts
    replace_from: float | int,
    replace_to: float | int,
    MAX_NUM_TOKENS: int | None = None,  # the kernel's parameter name (unused)
) -> None:
    """``output[t] = x[b]`` for the tokens ``t`` of row ``b``, with ``replace_from`` values replaced."""
    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1, dtype=torch.long))  # [batch]
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    expanded = torch.repeat_interleave(values, counts)  # [num_tokens]
    output[: expanded.numel()].copy_(expanded)


def normalize_context_k_per_layer(
    model: Any,  # vLLM's DFlashQwen3Model (its _k_norm_weights [L, D] and _rms_norm_eps)
    all_k: torch.Tensor,  # [L, C, kv_heads, D] contiguous: the context keys of every layer
) -> torch.Tensor:  # [L, C, kv_heads, D]
    """Layer ``i``'s keys RMS-normalised with layer ``i``'s ``k_norm`` weight (row ``i`` of ``_k_norm_weights``)."""
    from vllm import _custom_ops as ops

    out = torch.empty_like(all_k)
    for i in range(all_k.shape[0]):
        ops.rms_norm(out[i], all_k[i].contiguous(), model._k_norm_weights[i].contiguous(), model._rms_norm_eps)
    return out


def install() -> bool:
    """Install both fixes when this platform and version have the defects; True if installed."""
    import vllm
    from vllm.platforms import current_platform

    if not current_platform.is_cpu() or vllm.__version__ not in DEFECTIVE_VERSIONS:
        return False
    from vllm.model_executor.models.qwen3_dflash import DFlashQwen3Model
    from vllm.utils import cpu_triton_utils

    cpu_triton_utils._expand_kernel_impl = expand_into
    DFlashQwen3Model._normalize_context_k = normalize_context_k_per_layer
    return True
