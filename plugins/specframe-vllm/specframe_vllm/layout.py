"""What vLLM 0.32's DFlash reads from a drafter directory, as constants both environments share (standard library only).

vLLM's DFlash proposer (``vllm/v1/spec_decode/dflash.py``) builds, per request, the query block
``[bonus, MASK x k]`` at positions ``P .. P + k`` (``P`` = the bonus token's position = the committed length) and
drafts from the mask slots only: the output at offset ``j`` (1..k) predicts the token at its own position
``P + j``. That is specframe's **non-shift** layout (``dflash_config.shift_label: false``), which vLLM loads
natively as ``DFlashDraftModel``. A **shift** drafter (output ``j`` predicts ``P + 1 + j``, the bonus slot's output
included) is loaded as :data:`SHIFT_ARCHITECTURE`, vLLM's own model with its outputs moved one slot right
(:mod:`specframe_vllm.shift_model`), exact when ``k = block_size - 1``.

Worked example (block_size 8): a shift drafter's outputs 0..6 predict ``P+1 .. P+7``; with ``k = 7`` vLLM reads
offsets 1..7 (the shift class puts output ``j - 1`` there), so depths 1..7 are the drafter's; its eighth output
(``P + 8``) has no slot. A non-shift drafter of block_size 8 drafts 7 tokens with ``k = 7``, natively.
"""

from __future__ import annotations

#: vLLM's registered architecture of its Qwen3 DFlash drafter (non-shift layout).
NATIVE_ARCHITECTURE = "DFlashDraftModel"

#: The architecture this package registers (``vllm.general_plugins``) for shift-layout drafters. vLLM keeps an
#: architecture name that starts with "DFlash" as it is for ``method: dflash``.
SHIFT_ARCHITECTURE = "DFlashSpecframeShiftDraftModel"

#: Where the export records its provenance and the draft length it was exported for.
EXPORT_KEY = "specframe_vllm"


def speculative_tokens(block_size: int) -> int:
    """The ``num_speculative_tokens`` that runs a block drafter exactly as trained: one query block of
    ``block_size`` tokens, ``[bonus, MASK x (block_size - 1)]``, for either layout."""
    return block_size - 1
