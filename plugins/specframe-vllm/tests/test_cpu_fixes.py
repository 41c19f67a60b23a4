"""The replacement of vLLM 0.32's CPU ``expand`` fallback: the kernel's semantics, written into the caller's tensor
whatever its dtype (vLLM's own fallback drops every output that is not int64; specframe_vllm/cpu_fixes.py)."""

from __future__ import annotations

import torch
from specframe_vllm.cpu_fixes import expand_into


def test_float_output_is_written_with_replacement() -> None:
    out = torch.full((5,), float("nan"))  # [num_tokens] float32, as expand_batch_to_tokens allocates temperatures
    expand_into(out, torch.tensor([0.0, 0.7]), torch.tensor([2, 5], dtype=torch.int32), 0, 1)
    assert torch.equal(out, torch.tensor([1.0, 1.0, 0.7, 0.7, 0.7]))


def test_int32_output_and_rows_without_tokens() -> None:
    out = torch.full((4,), -1, dtype=torch.int32)  # top-k is int32
    expand_into(out, torch.tensor([3, 9, 0], dtype=torch.int32), torch.tensor([1, 1, 4]), 0, 7)
    assert out.tolist() == [3, 7, 7, 7]
