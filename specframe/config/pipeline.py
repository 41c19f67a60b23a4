"""The pipeline config model, built from the component registry after plugins load.

Each stage field is a discriminated union of the config classes registered for that stage (``type:`` picks
the component), so plugin components appear in validation, in ``specframe schema`` and in editor completion
without the core knowing them. Building the model after loading avoids stale schemas.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, create_model, field_validator

from specframe.config.base import ComponentConfig, StrictConfigModel
from specframe.config.bounds import MAX_NEW_TOKENS
from specframe.registry import ComponentRegistry
from specframe.types import SamplingParams

#: Stage fields of a pipeline, in round order, with the registry kind each one draws from.
STAGE_FIELDS: dict[str, str] = {
    "target": "target",
    "drafter": "drafter",
    "corrector": "corrector",
    "tree_builder": "tree_builder",
    "pruner": "pruner",
    "verifier": "verifier",
}

#: Stage defaults used when the file leaves a stage out (only if that component is installed).
STAGE_DEFAULTS: dict[str, str] = {
    "corrector": "identity",
    "tree_builder": "chain",
    "pruner": "none",
    "verifier": "auto",
}


class StrictModel(StrictConfigModel):
    """Sections of a pipeline besides the stages (the checks of :class:`StrictConfigModel`)."""


class AutoVerifierConfig(ComponentConfig):
    """Pick the verifier from the sampling settings: greedy at temperature 0, otherwise the first lossless
    verifier that supports the tree builder's draft regime."""

    type: Literal["auto"] = "auto"


class SamplingConfig(StrictModel):
    """How the target's tokens are drawn; the same processing applies to draft laws."""

    temperature: float = Field(0.0, ge=0.0)
    """0 means greedy decoding."""
    top_k: int = Field(0, ge=0)
    """Keep only the k most likely tokens (0 = off)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass (1 = off)."""

    def params(self) -> SamplingParams:
        return SamplingParams(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p)


class GenerationConfig(StrictModel):
    """Defaults for a generate call; the CLI and API can override each."""

    max_new_tokens: int = Field(256, ge=1, le=MAX_NEW_TOKENS)
    """Upper bound on generated tokens (the prefill token included)."""
    stop: tuple[str, ...] = ()
    """Stop strings: generation ends when the text contains one (it is cut there); none may be empty."""
    chat_template: bool = True
    """Wrap string prompts in the tokenizer's chat template when it has one."""
    stop_at_eos: bool = True
    """End at the target's end-of-sequence token."""

    @field_validator("stop")
    @classmethod
    def _stops_not_empty(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if any(s == "" for s in v):
            raise ValueError("a stop string is empty; it would match at once and end every output empty "
                             "(remove it, or give the text that should end generation)")
        return v


class MetricsConfig(StrictModel):
    """What the loop records per round."""

    stage_timing: bool = True
    """Record per-stage nanoseconds in every RoundRecord."""
    check_trees: bool = False
    """Debug mode: run the DraftTree invariant checker on every built and pruned tree."""


class PipelineConfigBase(StrictModel):
    """Fields every pipeline has, besides the stages."""

    name: str = "pipeline"
    """Label used in reports and result files."""
    seed: int = 0
    """Seed of the per-request random streams (draft, accept, residual, target)."""
    sampling: SamplingConfig = SamplingConfig()
    budget: int = Field(64, ge=1)
    """Verification budget B: draft-tree nodes per round, root excluded."""
    allow_lossy: bool = False
    """Permit a verifier that is not lossless for these settings (outputs then differ from the target's)."""
    generation: GenerationConfig = GenerationConfig()
    metrics: MetricsConfig = MetricsConfig()

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("name must not be empty")
        return v


def _union(configs: list[type[ComponentConfig]]) -> Any:
    if len(configs) == 1:
        return configs[0]
    return Annotated[Union[tuple(configs)], Field(discriminator="type")]  # noqa: UP007


def build_pipeline_model(registry: ComponentRegistry) -> type[PipelineConfigBase]:
    """Create the ``PipelineConfig`` model whose stage fields are unions of the registered configs.

    The model is cached on the registry, so configs validated against one registry compare equal.
    """
    cached = getattr(registry, "_pipeline_model", None)
    if cached is not None:
        return cached
    fields: dict[str, Any] = {}
    for field, kind in STAGE_FIELDS.items():
        configs = [r.spec.config for r in registry.of_kind(kind)]
        if kind == "verifier":
            configs = [AutoVerifierConfig, *configs]
        if not configs:
            fields[field] = (None, None)
            continue
        annotation = _union(configs)
        default_name = STAGE_DEFAULTS.get(field)
        by_name = {c.model_fields["type"].default: c for c in configs}
        if field == "target":
            fields[field] = (Optional[annotation], None)  # noqa: UP045
        elif default_name in by_name:
            fields[field] = (annotation, by_name[default_name]())
        else:
            fields[field] = (annotation, ...)
    model = create_model("PipelineConfig", __base__=PipelineConfigBase, **fields)
    registry._pipeline_model = model  # type: ignore[attr-defined]
    return model
