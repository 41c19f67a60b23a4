"""Registry records: what a plugin declares about each component, and the registry that holds them.

A plugin's registration hook yields :class:`ComponentSpec` records. Capabilities are declared *data*, one
record type per stage kind (:data:`CAPABILITIES`); the core validates pipelines with them and never asks "is
this the dflash drafter?".

Example::

    ComponentSpec(
        kind="pruner", name="deferred_topb", config=DeferredTopBConfig,
        factory=lambda cfg, ctx: DeferredTopB(cfg), summary="global top-B by path score + beta * depth",
    )
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import MISSING, asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from specframe.errors import ConfigError, PluginError, did_you_mean

if TYPE_CHECKING:
    from specframe.config.base import ComponentConfig
    from specframe.interfaces import BuildContext

StageKind = Literal["target", "drafter", "corrector", "tree_builder", "pruner", "verifier"]
STAGE_KINDS: tuple[StageKind, ...] = ("target", "drafter", "corrector", "tree_builder", "pruner", "verifier")


@dataclass(frozen=True)
class StageCapabilities:
    """Base of the per-kind capability records: declared facts, never names."""

    def as_dict(self) -> dict[str, Any]:
        return {k: sorted(v) if isinstance(v, frozenset) else v for k, v in asdict(self).items()}

    def declared(self) -> dict[str, Any]:
        """The facts that differ from the kind's defaults, plus those without a default (``lossless``)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.default is MISSING or value != f.default:
                out[f.name] = sorted(value) if isinstance(value, frozenset) else value
        return out


@dataclass(frozen=True, kw_only=True)
class TargetCapabilities(StageCapabilities):
    """Attributes:
        exposes_taps: the adapter can return hidden states of chosen layers.
        shares_embeddings: the adapter implements :class:`~specframe.interfaces.SharedEmbeddings`.
    """

    exposes_taps: bool = False
    shares_embeddings: bool = False


@dataclass(frozen=True, kw_only=True)
class DrafterCapabilities(StageCapabilities):
    """Attributes:
        needs_target_hidden: the drafter conditions on the target's hidden states (taps).
        needs_target_embeddings: it uses the target's embedding / LM head (``SharedEmbeddings``).
        parallel_block: it yields every depth from one forward pass.
        emits_logits: its proposal carries full per-depth logits.
        emits_features: its proposal carries per-depth hidden features.
    """

    needs_target_hidden: bool = False
    needs_target_embeddings: bool = False
    parallel_block: bool = False
    emits_logits: bool = False
    emits_features: bool = False


@dataclass(frozen=True, kw_only=True)
class CorrectorCapabilities(StageCapabilities):
    """Attributes:
        needs_logits: the corrector needs ``proposal.logits``.
        needs_features: it needs ``proposal.features`` (backbone outputs).
        needs_target_embeddings: it uses the target's embedding / LM head (``SharedEmbeddings``).
        stateful: it carries per-node state along paths.
        path_dependent: its scores for a node's children depend on the node's path (its token or state), not
            only on the depth; builders that use per-depth marginals cannot honour it.
    """

    needs_logits: bool = False
    needs_features: bool = False
    needs_target_embeddings: bool = False
    stateful: bool = False
    path_dependent: bool = False


@dataclass(frozen=True, kw_only=True)
class TreeBuilderCapabilities(StageCapabilities):
    """Attributes:
        draft_regime: trees it returns are deterministic given the proposal, or sampled.
        needs_logits: it needs ``proposal.logits`` (sampled builders).
        produces_tree: it may give a node several children (False: chains only).
    """

    draft_regime: Literal["deterministic", "sampled"] = "deterministic"
    needs_logits: bool = False
    produces_tree: bool = True


@dataclass(frozen=True, kw_only=True)
class PrunerCapabilities(StageCapabilities):
    """Attributes:
        keeps_child_prefix: the pruner keeps, for every node, a prefix of its children in index order, which
            rejection verifiers on sampled trees need (siblings are tried in sampling order).
    """

    keeps_child_prefix: bool = False


@dataclass(frozen=True, kw_only=True)
class VerifierCapabilities(StageCapabilities):
    """Attributes:
        lossless: the verifier reproduces the target's law exactly in its supported regimes. No default: a
            verifier says so explicitly, and ``verifier: auto`` only picks lossless ones.
        supported_regimes: draft regimes it is lossless for.
        requires_q: it needs the draft law the children were sampled from (``child_q``).
        greedy_only: it is exact only at temperature 0.
        chain_only: it handles chains only (one child per node).
    """

    lossless: bool
    supported_regimes: frozenset[str] = frozenset({"deterministic"})
    requires_q: bool = False
    greedy_only: bool = False
    chain_only: bool = False


#: The capability record of each stage kind.
CAPABILITIES: dict[str, type[StageCapabilities]] = {
    "target": TargetCapabilities,
    "drafter": DrafterCapabilities,
    "corrector": CorrectorCapabilities,
    "tree_builder": TreeBuilderCapabilities,
    "pruner": PrunerCapabilities,
    "verifier": VerifierCapabilities,
}


CapsT = TypeVar("CapsT", bound=StageCapabilities)


@dataclass(frozen=True)
class ComponentSpec:
    """One registered component: its kind, name (= the config ``type``), config class and factory."""

    kind: StageKind
    name: str
    config: type[ComponentConfig]
    factory: Callable[[Any, BuildContext], Any]
    capabilities: StageCapabilities | None = None  # the kind's record; None: its defaults (verifiers must declare)
    summary: str = ""

    def __post_init__(self) -> None:
        if self.capabilities is None and self.kind in CAPABILITIES and self.kind != "verifier":
            object.__setattr__(self, "capabilities", CAPABILITIES[self.kind]())

    def caps(self, kind: type[CapsT]) -> CapsT:
        """The capability record as its kind's class (``kind``: e.g. `VerifierCapabilities`), checked."""
        if not isinstance(self.capabilities, kind):
            raise TypeError(f"{self.kind} '{self.name}' declares {type(self.capabilities).__name__} capabilities, "
                            f"not {kind.__name__}")
        return self.capabilities

    @property
    def record(self) -> StageCapabilities:
        """The capability record (every registered spec has one: the kind's defaults unless declared)."""
        if self.capabilities is None:
            raise TypeError(f"{self.kind} '{self.name}' declares no capabilities")
        return self.capabilities


@dataclass(frozen=True)
class RegisteredComponent:
    """A spec plus the plugin and distribution that provided it."""

    spec: ComponentSpec
    plugin: str
    distribution: str
    version: str


class ComponentRegistry:
    """Components by kind and name. Duplicate names are errors naming both providers."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], RegisteredComponent] = {}
        #: The pipeline config model built from these components (:func:`specframe.config.pipeline.
        #: build_pipeline_model`); reset whenever a component is added.
        self.pipeline_model: Any = None
        #: Set by the plugin host: which installed plugins were skipped or broken (added to "unknown" errors).
        self.unavailable = ""

    def add(self, spec: ComponentSpec, *, plugin: str, distribution: str, version: str) -> None:
        if spec.kind not in STAGE_KINDS:
            raise PluginError(
                f"plugin '{plugin}' ({distribution}) registered a component of unknown kind '{spec.kind}'",
                hint=f"kinds are: {', '.join(STAGE_KINDS)}",
            )
        key = (spec.kind, spec.name)
        if key in self._items:
            other = self._items[key]
            raise PluginError(
                f"two plugins register the {spec.kind} '{spec.name}': "
                f"{other.distribution} (plugin '{other.plugin}') and {distribution} (plugin '{plugin}')",
                hint="uninstall one of them, or block one with SPECFRAME_DISABLED_PLUGINS=<plugin name>",
            )
        expected = CAPABILITIES[spec.kind]
        if spec.capabilities is None:
            raise PluginError(
                f"{spec.kind} '{spec.name}' from {distribution} (plugin '{plugin}') declares no capabilities",
                hint="a verifier must say whether it is lossless: capabilities=VerifierCapabilities(lossless=...)",
            )
        if not isinstance(spec.capabilities, expected):
            raise PluginError(
                f"{spec.kind} '{spec.name}' from {distribution} (plugin '{plugin}') declares "
                f"{type(spec.capabilities).__name__}, expected {expected.__name__}",
                hint="each stage kind has its own capability record (specframe.registry.CAPABILITIES)",
            )
        type_field = spec.config.model_fields.get("type")
        if type_field is None or type_field.default != spec.name:
            raise PluginError(
                f"{spec.kind} '{spec.name}' from {distribution}: its config class {spec.config.__name__} "
                f"must declare `type: Literal['{spec.name}'] = '{spec.name}'`"
            )
        self._items[key] = RegisteredComponent(spec, plugin, distribution, version)
        self.pipeline_model = None

    def names(self, kind: str) -> list[str]:
        return sorted(name for k, name in self._items if k == kind)

    def get(self, kind: str, name: str) -> RegisteredComponent:
        try:
            return self._items[(kind, name)]
        except KeyError:
            available = self.names(kind)
            raise ConfigError(
                f"unknown {kind} type '{name}'{did_you_mean(name, available)}",
                hint=f"available {kind} types: {', '.join(available) or '(none installed)'}"
                     + (f"; {self.unavailable}" if self.unavailable else ""),
            ) from None

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[RegisteredComponent]:
        return iter(sorted(self._items.values(), key=lambda r: (STAGE_KINDS.index(r.spec.kind), r.spec.name)))

    def of_kind(self, kind: str) -> list[RegisteredComponent]:
        return [r for r in self if r.spec.kind == kind]
