"""The ``vllm.general_plugins`` entry point: registers :data:`~specframe_vllm.layout.SHIFT_ARCHITECTURE` and
installs the CPU fixes of :mod:`specframe_vllm.cpu_fixes` (speculative sampling, the DFlash drafter's context keys).

vLLM calls :func:`register` in every process it starts (engine core and workers) before it resolves the draft
model's architecture and before the platform registers its kernel overrides. The class is registered lazily by its
import path, so a vLLM process that never loads a shift drafter never imports it. Runs in the vLLM environment only.
"""

from __future__ import annotations

from specframe_vllm.layout import SHIFT_ARCHITECTURE


def register() -> None:
    """Register the shift-layout DFlash class with vLLM's model registry and install the CPU fixes (idempotent)."""
    from vllm import ModelRegistry

    from specframe_vllm.cpu_fixes import install

    install()
    if SHIFT_ARCHITECTURE not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(SHIFT_ARCHITECTURE, "specframe_vllm.shift_model:DFlashShiftQwen3ForCausalLM")
