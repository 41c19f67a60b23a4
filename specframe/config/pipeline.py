"""The pipeline config model, built from the component registry after plugins load.

Each stage field is a discriminated union of the config classes registered for that stage (``type:`` picks
the component), so plugin components appear in validation, in ``specframe schema`` and in editor completion
without the core knowing them. Building the model after loading avoids stale schemas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional, Union

from pydantic import Field, create_model, field_validator

from specframe.config.base import ComponentConfig, StrictConfigModel
from specframe.config.bounds import MAX_NEW_TOKENS
from specframe.registry import ComponentRegistry
from specframe.seeds import MAX_SEED
from specframe.types import temperature_problem

#: Stage fields of a pipeline, in round order, with the registry kind each one draws from.
STAGE_FIELDS: dict[str, str] = {
    "target": "target",
    "drafter": "drafter",
    "corrector": "corrector",
    "tree_builder": "tree_builder",
    "pruner": "pruner",
    "verifier": "verifier",
}

#: The component (its ``type``) a pipeline gets when its file leaves the stage out: the core's null stages,
#: registered by the built-in plugin (:mod:`specframe.builtin`), and the core's verifier ``auto``. Stages
#: without an entry are required.
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
    """0 means greedy decoding; a positive temperature is at least 1e-5 (smaller ones do not survive float32)."""
    top_k: int = Field(0, ge=0)
    """Keep only the k most likely tokens (0 = off)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass (1 = off)."""

    @field_validator("temperature")
    @classmethod
    def _survives_float32(cls, v: float) -> float:
        problem = temperature_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v


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
    """Debug mode: run the DraftTree invariant checker on every tree sent to the target (after pruning)."""


class AutoBudgetConfig(StrictModel):
    """How `budget: auto` decides, per round, whether to draft and how many nodes to verify."""

    max_budget: int = Field(32, ge=1, le=4096)
    """Upper bound on verified draft nodes (builders and pruners work to this budget)."""
    profile: Optional[str] = None  # noqa: UP045
    """Cost-profile JSON to start from (default: the cache, measured on first use)."""


class PipelineConfigBase(StrictModel):
    """Fields every pipeline has, besides the stages."""

    name: str = "pipeline"
    """Label used in reports and result files."""
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    """Base of the request seeds, from 0 to 2**63 - 1: the n-th request the pipeline serves without a seed of its
    own gets one derived from this seed and n, so a run is reproducible. Unset (the default): every such request
    gets a fresh seed, so samples of one prompt differ. Each result records its seed (`GenerationResult.seed`);
    passing it back as the request's seed replays the sample."""
    sampling: SamplingConfig = SamplingConfig()
    budget: Union[int, Literal["auto"]] = Field(64)  # noqa: UP007
    """Verification budget B: draft-tree nodes per round, root excluded; `auto` chooses per round from the
    measured cost of a verify (see `auto_budget`)."""
    auto_budget: AutoBudgetConfig = AutoBudgetConfig()
    allow_lossy: bool = False
    """Permit a verifier that is not lossless for these settings (outputs then differ from the target's)."""
    generation: GenerationConfig = GenerationConfig()
    metrics: MetricsConfig = MetricsConfig()
    if TYPE_CHECKING:  # the stage sections: fields of the model built per registry (`pipeline_model`), typed by
        # the installed plugins' configs, which only exist at run time
        target: Any
        drafter: Any
        corrector: Any
        tree_builder: Any
        pruner: Any
        verifier: Any

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_positive_or_auto(cls, v: Any) -> int | str:
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            return v
        raise ValueError(f"budget must be a positive integer (draft nodes per round) or `auto`, got {v!r}")

    @property
    def auto(self) -> bool:
        """Whether the verification size is chosen per round (`budget: auto`)."""
        return self.budget == "auto"

    @property
    def max_budget(self) -> int:
        """The budget builders and pruners work to: the fixed budget, or auto's upper bound."""
        return self.auto_budget.max_budget if self.budget == "auto" else int(self.budget)

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("name must not be empty")
        return v


def stage_default(field: str, registry: ComponentRegistry) -> type[ComponentConfig] | None:
    """The config class of the section a pipeline gets when it leaves ``field`` out (:data:`STAGE_DEFAULTS`),
    or None when the stage is required or its default component is not in ``registry``."""
    name = STAGE_DEFAULTS.get(field)
    if name is None:
        return None
    if field == "verifier":
        return AutoVerifierConfig
    kind = STAGE_FIELDS[field]
    return registry.get(kind, name).spec.config if (kind, name) in registry else None


def _union(configs: list[type[ComponentConfig]]) -> Any:
    if len(configs) == 1:
        return configs[0]
    return Annotated[Union[tuple(configs)], Field(discriminator="type")]  # noqa: UP007


def build_pipeline_model(registry: ComponentRegistry) -> type[PipelineConfigBase]:
    """Create the ``PipelineConfig`` model whose stage fields are unions of the registered configs.

    The model is cached on the registry (:attr:`ComponentRegistry.pipeline_model`), so configs validated against
    one registry compare equal.
    """
    if registry.pipeline_model is not None:
        return registry.pipeline_model
    fields: dict[str, Any] = {}
    for field, kind in STAGE_FIELDS.items():
        configs = [r.spec.config for r in registry.of_kind(kind)]
        if kind == "verifier":
            configs = [AutoVerifierConfig, *configs]
        if not configs:
            fields[field] = (None, None)
            continue
        annotation = _union(configs)
        default = stage_default(field, registry)
        if field == "target":
            fields[field] = (Optional[annotation], None)  # noqa: UP045
        elif default in configs:
            fields[field] = (annotation, default.model_validate({}))
        else:
            fields[field] = (annotation, ...)
    model = create_model("PipelineConfig", __base__=PipelineConfigBase, **fields)
    registry.pipeline_model = model
    return model
