"""The Qwen3 example pipelines run as written, with tiny published-layout checkpoints behind the path variables.

Each ``examples/qwen3/4b/*.yaml`` is loaded unchanged except for ``generation.max_new_tokens``; the
``${DFLASH_4B_DIR}`` / ``${DOMINO_4B_DIR}`` / ``${DSPARK_4B_DIR}`` variables point at tiny checkpoints written
in the published layouts (block 16 for DFlash and Domino, block 7 for DSpark), and the target object is a tiny
fp32 Qwen3. The output must equal plain greedy decoding. The 8B files only change paths; they are checked to
resolve to the same stages.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from diffusion_testkit import TARGET_LAYERS, write_published_checkpoint
from specframe_hf.testing import two_way_lm as make_two_way

from specframe.config.validate import load_pipeline_config
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "qwen3"
PLUGINS = ["diffusion", "hf", "trees", "verifiers"]
PROMPT = torch.tensor([[11, 12, 13, 14]])
NEW_TOKENS = 10
CHECKPOINTS = {  # path variable -> (checkpoint kind, config overrides)
    "DFLASH_4B_DIR": ("dflash", {"block_size": 16}),
    "DOMINO_4B_DIR": ("domino", {"block_size": 16}),
    "DSPARK_4B_DIR": ("dspark_deepseek", {"block_size": 7}),
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from specframe_hf.testing import tiny_causal_lm

    model = make_two_way(tiny_causal_lm("qwen3", seed=3, num_layers=TARGET_LAYERS))
    dirs = {}
    for var, (kind, overrides) in CHECKPOINTS.items():
        dirs[var] = tmp_path_factory.mktemp(var.lower())
        write_published_checkpoint(dirs[var], kind, seed=5, target=model, **overrides)
    ids, expected = PROMPT, []
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            expected.append(int(model(ids).logits[0, -1].argmax()))
            ids = torch.cat([ids, torch.tensor([[expected[-1]]])], dim=1)
    return {"model": model, "dirs": dirs, "expected": expected, "host": PluginHost(allowlist=PLUGINS)}


@pytest.mark.parametrize("name", sorted(p.name for p in (EXAMPLES / "4b").glob("*.yaml")))
def test_qwen3_example_runs_and_matches_plain_decoding(setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                                       name: str) -> None:
    from specframe_hf import HFTarget

    for var, directory in setup["dirs"].items():
        monkeypatch.setenv(var, str(directory))
    monkeypatch.setenv("QWEN3_4B_DIR", "unused: the tiny target object is passed in")
    pipe = Pipeline.from_yaml(EXAMPLES / "4b" / name, overrides=[f"generation.max_new_tokens={NEW_TOKENS}"],
                              target=HFTarget.from_model(setup["model"]), host=setup["host"])
    assert pipe.generate(PROMPT).tokens == setup["expected"]


@pytest.mark.parametrize("name", sorted(p.name for p in (EXAMPLES / "8b").glob("*.yaml")))
def test_qwen3_8b_examples_mirror_the_4b_ones(setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                              name: str) -> None:
    for path in EXAMPLES.rglob("*.yaml"):  # validation refuses unset variables (bases included)
        for var in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", path.read_text()):
            monkeypatch.setenv(var, f"/models/{var.lower()}")

    def resolved(path: Path) -> dict[str, Any]:
        config, _ = load_pipeline_config(str(path), (), host=setup["host"], has_target_object=False)
        data = config.model_dump(mode="json")
        return {k: v for k, v in data.items() if k not in ("name", "target")} | {
            "drafter": {k: v for k, v in data["drafter"].items() if k != "checkpoint"}}

    assert resolved(EXAMPLES / "8b" / name) == resolved(EXAMPLES / "4b" / name)
    raw = yaml.safe_load((EXAMPLES / "8b" / name).read_text())
    assert "8B" in raw["drafter"]["checkpoint"] and raw["target"]["model"] == "${QWEN3_8B_DIR}"
