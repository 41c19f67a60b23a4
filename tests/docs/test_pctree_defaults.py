"""PCTree's defaults are the shape its tune-split run named best, not an unrecorded choice: the builder's field
defaults and `examples/smollm2/pctree.yaml` both equal `docs/benchmarks/pctree-shapes/tune.json`'s ``best``
(written by `benchmarks/pctree_shapes.py`; the docs cite it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specframe import PluginHost
from specframe.config import load_pipeline_config

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ROOT / "docs" / "benchmarks" / "pctree-shapes" / "tune.json"
EXAMPLE = ROOT / "examples" / "smollm2" / "pctree.yaml"


def recorded_best() -> dict[str, Any]:
    """The best shape of the committed run, once the run is checked to be one a default may come from: a full run
    (not a smoke run) on the tune split, every output equal to the plain loop's, every shape at one width."""
    report = json.loads(SHAPES.read_text(encoding="utf-8"))
    assert not report["smoke"] and report["split"] == report["protocol"]["split"] == "tune"
    assert report["every_output_exact"] and report["n"] >= 8 and len(report["rows"]) >= 10
    widths = {row["width"] for row in report["rows"]}
    assert len(widths) == 1
    best = report["best"]
    assert best["tau_mean_over_sets"] == max(row["tau_mean_over_sets"] for row in report["rows"])
    return {"children": tuple(best["children"]), "keep_spine": best["keep_spine"], "width": widths.pop()}


def shape_of(config: Any) -> dict[str, Any]:
    return {"children": tuple(config.children), "keep_spine": config.keep_spine, "width": config.width}


def test_the_builders_defaults_are_the_recorded_best() -> None:
    from specframe_trees.builders.pctree import PCTreeConfig

    assert shape_of(PCTreeConfig()) == recorded_best()


def test_the_example_pipeline_carries_the_recorded_best() -> None:
    config, _ = load_pipeline_config(str(EXAMPLE), host=PluginHost())
    assert config.tree_builder.type == "pctree"
    assert shape_of(config.tree_builder) == recorded_best()
