"""A request does not depend on its batch-mates: on the shipped SmolLM2 pair, ``p`` decoded alone and ``p`` decoded
beside two other requests give the same tokens, at a fixed budget and under `budget: auto`, greedy and at T = 0.7.

`budget: auto` decides from measured times, so the runs start from a synthetic cost profile in their own cache and
read a deterministic clock (1 ms per reading).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from specframe_smollm2.cache import target_dir
from specframe_smollm2.testing import private_cache

import specframe.decode.loop as loop_module
from specframe.config.loader import load_file
from specframe.cost.measure import profile_path, save_profile
from specframe.cost.profile import CostProfile
from specframe.cost.setup import target_profile_key
from specframe.decode.request import Request
from specframe.pipeline import Pipeline
from specframe.testing.clock import TickClock

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples" / "smollm2").glob("*.yaml"))
HAVE_TARGET = (target_dir() / "manifest.json").is_file()
CURVE = {1: 40.0, 2: 46.0, 5: 55.0, 9: 70.0, 17: 95.0, 33: 150.0}
PROMPT = "Tom has 3 boxes of 12 pencils and gives away 7. How many pencils are left?"


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Any]:
    """The target of an example, loaded once per distinct ``target`` section (float32 and bf16 examples get
    their own) in a private cache."""
    loaded: dict[str, Any] = {}
    cache = tmp_path_factory.mktemp("cache")

    def target_of(path: Path) -> Any:
        section = json.dumps(load_file(path)[0].get("target"), sort_keys=True)  # extends resolved
        if section not in loaded:
            with pytest.MonkeyPatch.context() as patch:
                private_cache(cache, patch)
                loaded[section] = Pipeline.from_yaml(path, overrides=()).target
        return loaded[section]

    return target_of


def fresh(path: Path, target: Any, cache: Path, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    """The pipeline on ``target`` with its own cache holding the synthetic profile (and no memory)."""
    shutil.rmtree(cache, ignore_errors=True)
    monkeypatch.setenv("SPECFRAME_CACHE", str(cache))
    pipe = Pipeline.from_yaml(path, target=target)
    key = target_profile_key(pipe.target, pipe.config)
    save_profile(CostProfile(key=key, verify_ms=CURVE), profile_path(key))
    return pipe


PROMPTS = [PROMPT, "Write a Python function that returns the largest of three numbers.",
           "Give me three tips for sleeping better."]
MATES = {"dartree-fixed": "a fixed budget", "dartree-pruned": "budget: auto"}


@pytest.mark.real_model
@pytest.mark.skipif(not HAVE_TARGET, reason="no converted SmolLM2 (run `specframe setup-target`)")
@pytest.mark.parametrize("temperature", [0.0, 0.7])
@pytest.mark.parametrize("name", sorted(MATES))
def test_a_request_does_not_depend_on_its_batch_mates(name: str, temperature: float,
                                                       targets: Callable[[Path], Any], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``p`` alone and ``p`` beside ``q`` and ``r`` give the same tokens, at a fixed budget and under `budget: auto`
    (whose per-round choices do differ with the batch), greedy and sampled (the same per-request seed): the rows'
    trees, budgets and forwards differ, the tokens a row emits do not."""
    path = ROOT / "examples" / "smollm2" / f"{name}.yaml"
    shared_target = targets(path)
    monkeypatch.setenv("SPECFRAME_CHECKPOINTS", str(ROOT / "checkpoints" / "smollm2-135m"))
    monkeypatch.setattr(loop_module, "StageClock", TickClock)
    pipe = fresh(path, shared_target, tmp_path / "a", monkeypatch).with_stage(
        "verifier", {"type": "auto"}, sampling={"temperature": temperature})  # auto: greedy at 0, WALK above
    requests = [Request(p, 20, seed=11 + i) for i, p in enumerate(PROMPTS)]
    alone = pipe.generate_batch(requests[:1])[0]
    together = pipe.generate_batch(requests, batch_size=3)
    assert together[0].tokens == alone.tokens and together[0].text == alone.text
    assert together[0].batch_size == 3 and alone.batch_size == 1
    assert any(r.accepted >= 1 for r in together[0].rounds)  # drafts were verified with its batch-mates
