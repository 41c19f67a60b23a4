"""Contracts every component meets, whatever its kind: a well-formed declaration, a config that round-trips
and documents its fields, a factory that returns the stage interface, and no use of the global torch RNG.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

import torch
from pydantic import ValidationError

from specframe.config.base import ComponentConfig
from specframe.interfaces import Corrector, Drafter, Pruner, TargetModel, TreeBuilder, Verifier
from specframe.registry import (
    CAPABILITIES,
    STAGE_KINDS,
    ComponentSpec,
    TreeBuilderCapabilities,
    VerifierCapabilities,
)

#: The interface each stage kind's factory must return.
INTERFACES: dict[str, type] = {
    "target": TargetModel,
    "drafter": Drafter,
    "corrector": Corrector,
    "tree_builder": TreeBuilder,
    "pruner": Pruner,
    "verifier": Verifier,
}

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
T = TypeVar("T")


def fail(component: str, message: str) -> AssertionError:
    """An assertion naming the component, so a failing parametrised test says which spec broke what."""
    return AssertionError(f"{component}: {message}")


@contextmanager
def global_rng_untouched(component: str) -> Iterator[None]:
    """Fail if the body draws from (or reseeds) the global torch RNG; stages draw from ``ctx.noise`` only."""
    before = torch.get_rng_state()
    yield
    if not torch.equal(before, torch.get_rng_state()):
        raise fail(component, "the global torch RNG changed; draw from the round's position-keyed noise "
                              "(ctx.noise, specframe.sampling.noise) or a private torch.Generator instead")


def guarded(component: str, fn: Callable[[], T], *, inference: bool = True) -> T:
    """Call ``fn`` inside :func:`global_rng_untouched` and, as the decode loop does, ``torch.inference_mode``
    (``inference=False`` for factories, which the pipeline calls outside it)."""
    with global_rng_untouched(component), torch.inference_mode() if inference else nullcontext():
        return fn()


def check_declaration(spec: ComponentSpec) -> None:
    """Name, kind, config class, summary and capabilities are declared the way the registry and docs need."""
    who = f"{spec.kind} '{spec.name}'"
    if spec.kind not in STAGE_KINDS:
        raise fail(who, f"unknown kind; kinds are {', '.join(STAGE_KINDS)}")
    if not _NAME.match(spec.name):
        raise fail(who, "names are snake_case (lowercase letters, digits, underscores; a letter first)")
    if not (isinstance(spec.config, type) and issubclass(spec.config, ComponentConfig)):
        raise fail(who, "config must be a subclass of specframe.config.base.ComponentConfig")
    type_field = spec.config.model_fields["type"]
    if type_field.default != spec.name or type_field.is_required():
        raise fail(who, f"config {spec.config.__name__} must declare `type: Literal['{spec.name}'] = "
                        f"'{spec.name}'`")
    if not spec.summary.strip() or "\n" in spec.summary:
        raise fail(who, "summary must be one non-empty line (shown by `specframe components` and the catalog)")
    if not callable(spec.factory):
        raise fail(who, "factory must be callable as factory(config, ctx)")
    caps = spec.capabilities
    expected = CAPABILITIES.get(spec.kind)
    if expected is not None and not isinstance(caps, expected):
        raise fail(who, f"capabilities must be a {expected.__name__}, not {type(caps).__name__}")
    if isinstance(caps, TreeBuilderCapabilities) and caps.draft_regime not in ("deterministic", "sampled"):
        raise fail(who, f"draft_regime must be 'deterministic' or 'sampled', not {caps.draft_regime!r}")
    if isinstance(caps, VerifierCapabilities):
        regimes = set(caps.supported_regimes)
        if not regimes or not regimes <= {"deterministic", "sampled"}:
            raise fail(who, f"supported_regimes must be a non-empty subset of deterministic/sampled, "
                            f"got {sorted(regimes)}")
        if caps.requires_q and regimes != {"sampled"}:
            raise fail(who, "requires_q needs the child_q of sampled trees (deterministic trees carry none), so "
                            "supported_regimes must be {'sampled'}")


def _field_documented(spec: ComponentSpec) -> None:
    missing = [name for name, f in spec.config.model_fields.items()
               if name != "type" and not (f.description or "").strip()]
    if missing:
        raise fail(f"{spec.kind} '{spec.name}'", f"config fields without a description: {', '.join(missing)} "
                   "(use Field(..., description=...) or an attribute docstring; the docs print it)")


def check_config_round_trip(spec: ComponentSpec, config: ComponentConfig) -> None:
    """``model_dump -> model_validate`` (Python and JSON), frozen, unknown fields rejected, fields documented."""
    who = f"{spec.kind} '{spec.name}'"
    if type(config) is not spec.config:
        raise fail(who, f"config is a {type(config).__name__}, expected {spec.config.__name__}")
    again = spec.config.model_validate(config.model_dump())
    if again != config:
        raise fail(who, f"model_validate(model_dump()) gave {again!r}, not {config!r}")
    as_json = json.loads(json.dumps(config.model_dump(mode="json")))
    from_json = spec.config.model_validate(as_json)
    if from_json != config:
        raise fail(who, f"the JSON dump {as_json} validates to {from_json!r}, not {config!r} (a YAML file "
                        "holds exactly this JSON)")
    try:
        spec.config.model_validate({**as_json, "no_such_field_for_conformance": 1})
    except ValidationError:
        pass
    else:
        raise fail(who, "an unknown field was accepted; subclass ComponentConfig (extra='forbid') so typos fail")
    try:
        setattr(config, "type", config.type)  # noqa: B010  (the point is to try an assignment)
    except (ValidationError, TypeError, AttributeError):
        pass
    else:
        raise fail(who, "the config is mutable; keep ComponentConfig's frozen=True (configs are hashed)")
    schema = spec.config.model_json_schema()
    missing = set(spec.config.model_fields) - set(schema.get("properties", {}))
    if missing:
        raise fail(who, f"JSON schema lacks fields {sorted(missing)}")
    _field_documented(spec)


def check_factory(spec: ComponentSpec, component: Any) -> None:
    """The factory returned the interface of the spec's kind."""
    expected = INTERFACES[spec.kind]
    if not isinstance(component, expected):
        raise fail(f"{spec.kind} '{spec.name}'", f"factory returned {type(component).__name__}, which is not a "
                                                 f"specframe.interfaces.{expected.__name__}")
