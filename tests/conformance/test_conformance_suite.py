"""The conformance suite run on correct toy components of every stage kind: everything passes, including the
G-test of a correct WALK verifier in both regimes."""

from __future__ import annotations

import pytest

from specframe.errors import PluginError
from specframe.registry import STAGE_KINDS
from specframe.testing.conformance import ConformanceCase, ConformanceSuite, plugin_registry

from . import toy_components


class TestToyConformance(ConformanceSuite):
    plugin = toy_components.GOOD
    cases = (
        ConformanceCase("target", "toy_table"),
        ConformanceCase("drafter", "toy_parallel", target=lambda: toy_components.ToyTarget.random(12, scale=2.0)),
        ConformanceCase("drafter", "toy_parallel", config={"num_candidates": 20}, variant="padded"),
    )


def test_every_component_gets_a_case() -> None:
    cases = TestToyConformance.conformance_cases()
    assert {c.kind for c in cases} == set(STAGE_KINDS)
    assert [c.id for c in cases if c.kind == "drafter"] == ["drafter-toy_parallel", "drafter-toy_parallel-padded"]
    assert all(c.spec is not None for c in cases)


def test_cases_for_unregistered_components_are_refused() -> None:
    class Misnamed(ConformanceSuite):
        plugin = toy_components.GOOD
        cases = (ConformanceCase("drafter", "toy_paralel"),)

    with pytest.raises(ValueError, match="drafter-toy_paralel"):
        Misnamed.conformance_cases()


def test_an_uninstalled_plugin_is_an_error() -> None:
    with pytest.raises(PluginError, match="'no-such-plugin-installed', which matches no installed plugin"):
        plugin_registry("no-such-plugin-installed")
