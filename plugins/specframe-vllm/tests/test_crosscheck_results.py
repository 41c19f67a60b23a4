"""The committed cross-check run (docs/benchmarks/vllm-crosscheck, quoted by docs/serving-vllm.md) under today's
comparer: the export passes every check, and each wrong run is caught by a drafter check while the former aggregate
test (rates within 0.05, τ within 5 %) would let the noise control and the unfixed vLLM through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from specframe_vllm.crosscheck.compare import compare, rates, tau

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "vllm-crosscheck"


def load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / f"{name}.json").read_text())


def former_test_passes(sf: dict[str, Any], vl: dict[str, Any]) -> bool:
    a, b = sf["acceptance"], vl["acceptance"]
    worst = max(abs(x - y) for x, y in zip(rates(a), rates(b), strict=True))
    return worst <= 0.05 and abs(tau(b) - tau(a)) / tau(a) <= 0.05


def test_the_export_passes_every_check() -> None:
    verdicts = compare(load("specframe"), load("vllm"))
    assert [name for name, ok, _ in verdicts.rows if not ok] == []
    assert sum(1 for name, _, _ in verdicts.rows if name.startswith("drafter rounds")) == 6


@pytest.mark.parametrize(("run", "former"), [("control-noise", True), ("control-swap", False),
                                             ("context-key-defect", True)])
def test_each_wrong_run_fails_a_drafter_check(run: str, former: bool) -> None:
    sf, vl = load("specframe"), load(run)
    verdicts = compare(sf, vl, law=False)
    assert "drafter log-probabilities" in verdicts.failed_drafter_checks()
    assert any(name.startswith("drafter rounds") for name in verdicts.failed_drafter_checks())
    assert [name for name, ok, _ in verdicts.rows if not ok and name.startswith("target numerics")] == []
    assert former_test_passes(sf, vl) is former
