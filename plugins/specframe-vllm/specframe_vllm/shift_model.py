"""`DFlashShiftQwen3ForCausalLM`: vLLM's Qwen3 DFlash drafter for shift-layout checkpoints (vLLM environment only).

vLLM's DFlash proposer runs one query block ``[bonus, MASK x k]`` per request, the blocks of a batch contiguous
(request ``r``'s at rows ``r * (k + 1) .. r * (k + 1) + k``), and samples the draft of depth ``j`` from row offset
``j`` (1..k): the non-shift reading, where a slot predicts its own position. A shift-layout drafter predicts
position ``P + 1 + j`` from slot ``j``, so this class runs vLLM's own model unchanged and returns its block outputs
moved one row down::

    hidden = DFlashQwen3ForCausalLM.forward(...)       # [N, H], N = B * (k + 1) query rows (padding after them)
    out[i] = hidden[i - 1]  for i >= 1                 # offset j of a block gets the block's output j - 1
    out[0] = hidden[0]                                 # a bonus row: never sampled

The move crosses a block boundary only into a bonus row (offset 0), which vLLM never samples, so it needs no
knowledge of the batch layout. Worked example, k = 2, two requests: rows ``[b0, m, m, b1, m, m]`` with outputs
``[o0, o1, o2, q0, q1, q2]`` become ``[o0, o0, o1, o2, q0, q1]``; vLLM samples rows 1, 2, 4, 5: ``o0, o1, q0, q1``,
the drafts of depths 1 and 2 of each request, as specframe's shift drafter makes them.

The drafter was trained on blocks of ``block_size`` tokens, so the class refuses ``num_speculative_tokens`` other
than ``block_size - 1`` (a longer query block is not what it learnt; its last prediction has no slot).
"""

from __future__ import annotations

import torch
from vllm.config import VllmConfig
from vllm.model_executor.models.qwen3_dflash import DFlashQwen3ForCausalLM

from specframe_vllm.layout import SHIFT_ARCHITECTURE, speculative_tokens


class DFlashShiftQwen3ForCausalLM(DFlashQwen3ForCausalLM):
    """See the module docstring."""

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        spec = vllm_config.speculative_config
        block_size = getattr(self.config, "block_size", None)
        if block_size is None:
            raise ValueError(f"{SHIFT_ARCHITECTURE}: the draft config.json has no block_size; export the drafter "
                             "with `specframe vllm-export`")
        wanted = speculative_tokens(int(block_size))
        if spec is None or spec.num_speculative_tokens != wanted:
            got = None if spec is None else spec.num_speculative_tokens
            raise ValueError(f"{SHIFT_ARCHITECTURE}: this shift-layout drafter was trained on blocks of {block_size} "
                             f"tokens, so it drafts exactly {wanted} tokens per round; num_speculative_tokens is "
                             f"{got}. Set speculative_config num_speculative_tokens={wanted}.")

    def forward(
        self,
        input_ids: torch.Tensor,  # [N] query tokens: per request [bonus, MASK x k]
        positions: torch.Tensor,  # [N]
        inputs_embeds: torch.Tensor | None = None,  # [N, H]
    ) -> torch.Tensor:  # [N, H] row i holds the block output of row i - 1
        hidden = super().forward(input_ids, positions, inputs_embeds)
        shifted = torch.empty_like(hidden)
        shifted[1:] = hidden[:-1]
        shifted[:1] = hidden[:1]
        return shifted
