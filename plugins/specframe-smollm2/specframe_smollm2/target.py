"""The ``smollm2`` target type: the converted SmolLM2-135M-Instruct from the set-up cache, checked first.

``target: {type: smollm2}`` resolves ``$SPECFRAME_CACHE/smollm2-135m-instruct``, verifies its manifest (sizes always,
checksums when ``verify_checksums``), and loads it with the ``hf`` adapter. A missing cache or a damaged file is a
:class:`~specframe.errors.CheckpointError` that says to run ``specframe setup-target``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field
from specframe_hf.config import (
    CaptureOption,
    CompileOption,
    CpuLinearOption,
    EngineOption,
    KvMemoryOption,
    LogitsDtypeOption,
    PrefillChunkOption,
    kv_memory_bytes,
)

from specframe.config.base import ComponentConfig
from specframe.interfaces import BuildContext
from specframe_smollm2.cache import target_dir, verify_manifest

if TYPE_CHECKING:
    from specframe_hf.target import HFTarget


class SmolLM2TargetConfig(ComponentConfig):
    """SmolLM2-135M-Instruct converted by ``specframe setup-target`` (nothing is downloaded)."""

    type: Literal["smollm2"] = "smollm2"
    path: str | None = Field(None, description="converted directory; default $SPECFRAME_CACHE/smollm2-135m-instruct")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="weight and activation dtype")
    attn: Literal["sdpa", "eager"] = Field("sdpa", description="attention backend (both take the tree mask)")
    device: str = Field("cpu", description="torch device: cpu, cuda, cuda:N or auto (a GPU when there is one)")
    verify_checksums: bool = Field(True, description="check every file's SHA-256 against the manifest (~1 s)")
    cpu_linear: CpuLinearOption
    logits_dtype: LogitsDtypeOption
    compile: CompileOption
    engine: EngineOption
    kv_memory: KvMemoryOption
    prefill_chunk: PrefillChunkOption
    capture: CaptureOption


def resolve_target_dir(config: SmolLM2TargetConfig) -> Path:
    directory = Path(config.path).expanduser() if config.path else target_dir()
    verify_manifest(directory, checksums=config.verify_checksums)
    return directory


def build_smollm2_target(config: SmolLM2TargetConfig, ctx: BuildContext) -> HFTarget:
    from specframe_hf.target import HFTarget

    directory = resolve_target_dir(config)
    return HFTarget.from_pretrained(str(directory), dtype=config.dtype, device=config.device, attn=config.attn,
                                    cpu_linear=config.cpu_linear, logits_dtype=config.logits_dtype,
                                    engine=config.engine, compile=config.compile,
                                    kv_memory=kv_memory_bytes(config.kv_memory), capture=config.capture,
                                    prefill_chunk=config.prefill_chunk)
