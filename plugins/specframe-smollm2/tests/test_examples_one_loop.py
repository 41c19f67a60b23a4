"""A single request is a batch of one: for every shipped SmolLM2 pipeline, ``generate(p)`` and
``generate_batch([p])[0]`` give the same tokens, rounds and τ.

`budget: auto` decides from measured times, so both runs start from the same synthetic cost profile in their own
cache and read a deterministic clock (1 ms per reading): their controllers then see identical rounds.
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


@pytest.mark.real_model
@pytest.mark.skipif(not HAVE_TARGET, reason="no converted SmolLM2 (run `specframe setup-target`)")
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_one_request_equals_a_batch_of_one(path: Path, targets: Callable[[Path], Any], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    shared_target = targets(path)
    monkeypatch.setenv("SPECFRAME_CHECKPOINTS", str(ROOT / "checkpoints" / "smollm2-135m"))
    monkeypatch.setattr(loop_module, "StageClock", TickClock)
    alone = fresh(path, shared_target, tmp_path / "a", monkeypatch).generate(PROMPT, 24)
    batch = fresh(path, shared_target, tmp_path / "b", monkeypatch).generate_batch([PROMPT], 24)[0]
    assert batch.tokens == alone.tokens and batch.text == alone.text
    assert [(r.nodes, r.depth, r.accepted, r.committed, r.drafted, r.budget) for r in batch.rounds] == \
        [(r.nodes, r.depth, r.accepted, r.committed, r.drafted, r.budget) for r in alone.rounds]
    assert batch.tau == alone.tau and batch.stage_totals() == alone.stage_totals()
