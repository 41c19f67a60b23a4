"""Registry records: what a plugin declares about each component, and the registry that holds them.

A plugin's registration hook yields :class:`ComponentSpec` records. Capabilities are declared *data*; the
core validates pipelines with them and never asks "is this the dflash drafter?".

Example::

    ComponentSpec(
        kind="pruner", name="deferred_topb", config=DeferredTopBConfig,
        factory=lambda cfg, ctx: DeferredTopB(cfg), summary="global top-B by path score + beta * depth",
    )
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from specframe.errors import ConfigError, PluginError, did_you_mean

if TYPE_CHECKING:
    from specframe.config.base import ComponentConfig
    from specframe.interfaces import BuildContext

StageKind = Literal["target", "drafter", "corrector", "tree_builder", "pruner", "verifier"]
STAGE_KINDS: tuple[StageKind, ...] = ("target", "drafter", "corrector", "tree_builder", "pruner", "verifier")


@dataclass(frozen=True)
class Capabilities:
    """Declared facts about a component; pipelines are validated with these, never with names.

    Attributes:
        needs_target_hidden: the drafter conditions on the target's hidden states (taps).
        parallel_block: the drafter yields every depth from one forward pass.
        emits_logits: the drafter's proposal carries full per-depth logits.
        emits_features: the drafter's proposal carries per-depth hidden features.
        needs_logits: the component needs ``proposal.logits`` (sampled builders, learned correctors).
        needs_features: the corrector needs ``proposal.features`` (backbone outputs).
        stateful: the corrector carries per-node state along paths.
        path_dependent: the corrector's scores for a node's children depend on the node's path (its token
            or state), not only on the depth; builders that use per-depth marginals cannot honour it.
        draft_regime: trees this builder returns are deterministic given the proposal, or sampled.
        lossless: the verifier reproduces the target's law exactly (in its supported regimes).
        supported_regimes: draft regimes the verifier is lossless for.
        requires_q: the verifier needs the draft law the children were sampled from (``child_q``).
        greedy_only: the verifier is exact only at temperature 0.
        exposes_taps: the target adapter can return hidden states of chosen layers.
        produces_tree: the builder may give a node several children (False: it builds chains only).
        chain_only: the verifier handles chains only (one child per node).
        keeps_child_prefix: the pruner keeps, for every node, a prefix of its children in index order, which
            rejection verifiers on sampled trees need (siblings are tried in sampling order).
    """

    needs_target_hidden: bool = False
    parallel_block: bool = False
    emits_logits: bool = False
    emits_features: bool = False
    needs_logits: bool = False
    needs_features: bool = False
    stateful: bool = False
    path_dependent: bool = False
    draft_regime: Literal["deterministic", "sampled"] = "deterministic"
    lossless: bool = True
    supported_regimes: frozenset[str] = frozenset({"deterministic"})
    requires_q: bool = False
    greedy_only: bool = False
    exposes_taps: bool = False
    produces_tree: bool = True
    chain_only: bool = False
    keeps_child_prefix: bool = False

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["supported_regimes"] = sorted(self.supported_regimes)
        return d


@dataclass(frozen=True)
class ComponentSpec:
    """One registered component: its kind, name (= the config ``type``), config class and factory."""

    kind: StageKind
    name: str
    config: type[ComponentConfig]
    factory: Callable[[Any, BuildContext], Any]
    capabilities: Capabilities = field(default_factory=Capabilities)
    summary: str = ""


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
        type_field = spec.config.model_fields.get("type")
        if type_field is None or type_field.default != spec.name:
            raise PluginError(
                f"{spec.kind} '{spec.name}' from {distribution}: its config class {spec.config.__name__} "
                f"must declare `type: Literal['{spec.name}'] = '{spec.name}'`"
            )
        self._items[key] = RegisteredComponent(spec, plugin, distribution, version)

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
