"""What the conformance suite tests: one `ConformanceCase` per component (and config variant), resolved lazily.

A case names a registered component by kind and name, the config fields to build it with, and, when the toy
defaults do not fit, a target factory and the shape of the random proposals fed to it. Config fields may come
from a callable that receives a scratch directory, so a case can write a tiny checkpoint first::

    ConformanceCase("drafter", "lm_draft", config=lambda workdir: {"model": str(save_tiny_lm(workdir))},
                    target=tiny_hf_target)

Cases are resolved at test time into a :class:`BuiltCase`, which holds the validated config and builds fresh
components (and fresh targets) on demand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specframe.config.base import ComponentConfig
from specframe.interfaces import BuildContext, TargetModel
from specframe.registry import ComponentSpec
from specframe.testing.toy import ToyTarget

ConfigFields = Mapping[str, Any] | Callable[[Path], Mapping[str, Any]]

#: Vocabulary of the default toy target; small enough for exact laws, large enough for K = 4 candidates.
TOY_VOCAB = 16


def toy_target() -> ToyTarget:
    """The default target of every case: an exact second-order Markov table over :data:`TOY_VOCAB` tokens."""
    return ToyTarget.random(TOY_VOCAB, seed=0, scale=2.0)


@dataclass(frozen=True)
class ProposalShape:
    """Shape of the random proposals fed to correctors and tree builders (vocabulary = the target's).

    Attributes:
        batch: rows B.
        depth: depths L.
        candidates: candidates K per depth.
        hidden_size: width H of ``proposal.features`` (learned correctors read them).
    """

    batch: int = 2
    depth: int = 4
    candidates: int = 4
    hidden_size: int = 64


@dataclass(frozen=True)
class ConformanceCase:
    """One component under test.

    Attributes:
        kind: stage kind (``drafter``, ``corrector``, ``tree_builder``, ``pruner``, ``verifier``, ``target``).
        name: the registered name (the config's ``type``).
        config: config fields besides ``type``, or a callable returning them from a scratch directory.
        target: returns a fresh target model per call (default: a toy target); drafters and correctors that
            read the target's weights need a real one.
        proposal: shape of the random proposals for correctors and tree builders.
        variant: label that tells several cases of one component apart in test ids.
        spec: the registered spec, filled in when the suite resolves its cases.
    """

    kind: str
    name: str
    config: ConfigFields = field(default_factory=dict)
    target: Callable[[], TargetModel] | None = None
    proposal: ProposalShape = ProposalShape()
    variant: str = ""
    spec: ComponentSpec | None = None

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.name}" + (f"-{self.variant}" if self.variant else "")


@dataclass
class BuiltCase:
    """A resolved case: its spec, validated config and factories for fresh targets and components."""

    case: ConformanceCase
    spec: ComponentSpec
    config: ComponentConfig
    workdir: Path

    @property
    def capabilities(self) -> Any:
        return self.spec.capabilities

    def make_target(self) -> TargetModel:
        """A fresh target for this case (never the component itself, even for target cases)."""
        return (self.case.target or toy_target)()

    def build(self, target: TargetModel | None = None) -> Any:
        """A fresh component from the registered factory (targets are built without a target)."""
        ctx = BuildContext(pipeline=None, target=None if self.spec.kind == "target" else target)
        return self.spec.factory(self.config, ctx)


def config_fields(case: ConformanceCase, workdir: Path) -> dict[str, Any]:
    """The case's config fields (calling the factory with ``workdir``), with ``type`` set."""
    fields = case.config(workdir) if callable(case.config) else case.config
    return {"type": case.name, **dict(fields)}


def resolve(case: ConformanceCase, workdir: Path) -> BuiltCase:
    """Validate the case's config against its spec; a bad config is a readable assertion."""
    if case.spec is None:
        raise AssertionError(f"{case.id}: the case was not resolved against a registry")
    directory = workdir / re.sub(r"[^A-Za-z0-9_.-]", "_", case.id)
    directory.mkdir(parents=True, exist_ok=True)
    fields = config_fields(case, directory)
    try:
        config = case.spec.config.model_validate(fields)
    except Exception as exc:
        required = [n for n, f in case.spec.config.model_fields.items() if f.is_required()]
        raise AssertionError(
            f"{case.id}: config {fields} does not validate: {exc}\n"
            f"required fields: {', '.join(required) or 'none'}; give them in ConformanceCase(config=...)"
        ) from None
    return BuiltCase(case=case, spec=case.spec, config=config, workdir=directory)
