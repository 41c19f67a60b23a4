"""Each stage kind has its own capability record, and a verifier states its losslessness explicitly."""

from __future__ import annotations

import dataclasses
import types
from typing import Literal

import pytest

from specframe import ComponentConfig, ComponentSpec, PluginHost, hookimpl
from specframe.errors import PluginError
from specframe.registry import CAPABILITIES, STAGE_KINDS, DrafterCapabilities, VerifierCapabilities


class _VConfig(ComponentConfig):
    type: Literal["v"] = "v"


def _host_with_verifier(spec: ComponentSpec) -> PluginHost:
    mod = types.ModuleType("verifier_plugin")

    @hookimpl
    def specframe_verifiers():  # type: ignore[no-untyped-def]
        yield spec

    mod.specframe_verifiers = specframe_verifiers  # type: ignore[attr-defined]
    host = PluginHost(autoload=False)
    host.register(mod, "vplug", distribution="specframe-vplug")
    return host


def test_every_kind_has_its_own_record() -> None:
    assert set(CAPABILITIES) == set(STAGE_KINDS)
    names = [{f.name for f in dataclasses.fields(cls)} for cls in CAPABILITIES.values()]
    assert "lossless" in names[STAGE_KINDS.index("verifier")]
    assert all("lossless" not in n for kind, n in zip(STAGE_KINDS, names, strict=True) if kind != "verifier")
    with pytest.raises(TypeError):
        VerifierCapabilities()  # type: ignore[call-arg]  # lossless has no default


def test_a_verifier_without_declared_losslessness_is_a_plugin_error() -> None:
    host = _host_with_verifier(ComponentSpec(kind="verifier", name="v", config=_VConfig, factory=lambda c, x: None))
    with pytest.raises(PluginError, match=r"verifier 'v' from specframe-vplug \(plugin 'vplug'\) declares no"):
        host.registry  # noqa: B018


def test_capabilities_of_another_kind_are_a_plugin_error() -> None:
    spec = ComponentSpec(kind="verifier", name="v", config=_VConfig, factory=lambda c, x: None,
                         capabilities=DrafterCapabilities())
    with pytest.raises(PluginError, match="declares DrafterCapabilities, expected VerifierCapabilities"):
        _host_with_verifier(spec).registry  # noqa: B018


def test_other_kinds_default_to_their_record() -> None:
    spec = ComponentSpec(kind="drafter", name="d", config=_VConfig, factory=lambda c, x: None)
    assert spec.capabilities == DrafterCapabilities()
