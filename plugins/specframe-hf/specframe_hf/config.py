"""Config models of the components this plugin registers: the ``hf`` target and the ``ngram`` drafter.

Example pipeline sections::

    target:  {type: hf, model: ~/.cache/specframe/smollm2-135m, dtype: float32, attn: sdpa}
    drafter: {type: ngram, num_speculative_tokens: 8, max_ngram: 3, min_ngram: 1}
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_DRAFT_DEPTH, StageShape
from specframe_hf.device_map import memory_bytes

#: The lean engine's options, declared once for every target built on `HFTarget` (``hf`` and the packaged targets).
CpuLinearOption = Annotated[Literal["default", "onednn", "auto"], Field(
    "default", description="onednn: prepack every linear layer for oneDNN (float32 on x86 CPUs; skinny verify "
                           "products run 2-3x faster than the default BLAS on AMD CPUs); auto: measure both on this "
                           "model at the first load on a machine (cached) and use each where it is faster, by the "
                           "product's row count (docs/pipelines.md)")]
LogitsDtypeOption = Annotated[Literal["auto", "float32"], Field(
    "auto", description="float32: compute the LM head in float32 on bfloat16 or float16 hidden states (float32 "
                        "logits; greedy outputs then differ less often from plain decoding at the same precision, "
                        "docs/pipelines.md); auto: the model's dtype")]
CompileOption = Annotated[bool, Field(
    False, description="torch.compile the lean engine's forward (inductor, dynamic shapes) for accelerators; on the "
                       "CPUs measured it is slower than eager and costs minutes of compilation (docs/benchmarks.md, "
                       "'The round as an engine')")]
EngineOption = Annotated[Literal["auto", "transformers"], Field(
    "auto", description="auto: the lean engine path for Llama-family models (a paged KV pool reserved at "
                        "admission, attention per row over its own blocks, no per-round allocation; "
                        "specframe_hf.slot_rows), transformers' own forward "
                        "over a DynamicCache for the others; transformers: always transformers' forward")]



def _kv_memory(value: int | str | None) -> int | str | None:
    if value is not None:
        memory_bytes(value)  # a ValueError names what is wrong
    return value


KvMemoryOption = Annotated[int | str | None, AfterValidator(_kv_memory), Field(
    None, description="memory of the lean engine's paged KV pool (bytes, or a size such as '2GiB'), reserved once "
                      "as vLLM's KV-cache space: a request joins the batch only when its reservation (prompt, "
                      "max_new_tokens, one tree) fits, waits while rows in flight hold the pool, and is refused "
                      "when it can never fit; unset: sized once for the batch's largest requests "
                      "(specframe_hf.kv_pool)")]

PrefillChunkOption = Annotated[int, Field(
    512, ge=1, description="the lean engine prefills a joining prompt longer than this in chunks of this many "
                           "tokens, one chunk between two decode rounds, so rows in flight keep decoding while a "
                           "long prompt joins (vLLM's chunked prefill); shorter prompts are prefilled in one forward "
                           "(specframe_hf.chunked_prefill)")]

CaptureOption = Annotated[Literal["off", "compile", "reduce-overhead"], Field(
    "off", description="compile: verify rounds of the lean engine at bucketed shapes (rows, nodes and KV blocks "
                       "padded to powers of two), each bucket compiled once with torch.compile(fullgraph=True, "
                       "dynamic=False); reduce-overhead: the same captured as CUDA graphs (accelerators). Off by "
                       "default: on the CPUs measured the per-row forward is faster (specframe_hf.captured)")]


def kv_memory_bytes(value: int | str | None) -> int | None:
    """The ``kv_memory`` option in bytes (None: unset)."""
    return None if value is None else memory_bytes(value)


class HFTargetConfig(ComponentConfig):
    """A Hugging Face causal LM loaded from a local directory (nothing is downloaded)."""

    type: Literal["hf"] = "hf"
    model: str = Field(description="local directory holding config.json, the weights and (optionally) a tokenizer")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="weight and activation dtype; logits are returned as float32"
    )
    device: Literal["cpu", "cuda", "auto"] = Field("auto", description="'auto' picks cuda when available")
    attn: Literal["sdpa", "eager"] = Field(
        "sdpa", description="attention backend; both take the additive 4-D tree mask (flash attention cannot)"
    )
    taps: tuple[int, ...] = Field(
        (), description="decoder layers whose outputs every TargetOutput carries (drafters may add their own)"
    )
    cpu_linear: CpuLinearOption
    logits_dtype: LogitsDtypeOption
    compile: CompileOption
    engine: EngineOption
    kv_memory: KvMemoryOption
    prefill_chunk: PrefillChunkOption
    capture: CaptureOption
    device_map: Literal["auto", "balanced", "balanced_low_0", "sequential"] | dict[str, int | str] | None = Field(
        None, description="split the model across devices with accelerate (a strategy, or {module: GPU index, "
                          "cpu or disk}); layers on cpu/disk run on the first GPU of the map (docs/scale-out.md)"
    )
    max_memory: dict[int | str, int | str] | None = Field(
        None, description="per-device memory limits for device_map strategies, e.g. {0: 20GiB, cpu: 64GiB}"
    )
    offload_folder: str | None = Field(None, description="directory for weights the device_map puts on disk")
    tensor_parallel: bool = Field(
        False, description="shard every layer over the ranks of a torchrun launch (transformers' tp_plan auto)"
    )

    @field_validator("model")
    @classmethod
    def _model_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("model must be a local directory path, got an empty string")
        return v

    @field_validator("max_memory")
    @classmethod
    def _memory_sizes(cls, v: dict[int | str, int | str] | None) -> dict[int | str, int | str] | None:
        for device, size in (v or {}).items():
            try:
                memory_bytes(size)
            except ValueError as exc:
                raise ValueError(f"max_memory[{device!r}]: {exc}") from None
        return v

    @field_validator("taps")
    @classmethod
    def _taps_valid(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(i < 0 for i in v):
            raise ValueError(f"taps must be non-negative decoder-layer indices, got {list(v)}")
        if len(set(v)) != len(v):
            raise ValueError(f"taps must not repeat a layer, got {list(v)}")
        return v


class NgramConfig(ComponentConfig):
    """Prompt-lookup drafting: continue the most recent earlier occurrence of the context's last n tokens."""

    type: Literal["ngram"] = "ngram"
    num_speculative_tokens: int = Field(8, ge=1, le=MAX_DRAFT_DEPTH, description="longest continuation proposed "
                                                                                   "per round")
    max_ngram: int = Field(3, ge=1, le=MAX_DRAFT_DEPTH, description="longest suffix tried first")
    min_ngram: int = Field(1, ge=1, le=MAX_DRAFT_DEPTH, description="shortest suffix tried before giving up")

    def output_shape(self, upstream: StageShape) -> StageShape:
        return StageShape(depth=self.num_speculative_tokens, candidates=1)

    @model_validator(mode="after")
    def _ngram_range(self) -> NgramConfig:
        if self.min_ngram > self.max_ngram:
            raise ValueError(
                f"min_ngram ({self.min_ngram}) must not exceed max_ngram ({self.max_ngram}); "
                "lower min_ngram or raise max_ngram"
            )
        return self
