"""A benchmark run's private cache and its frozen controllers (:mod:`specframe.bench.learned_state`)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from specframe.bench.learned_state import ControllerFreeze, private_run_cache
from specframe.cost.memory import ControllerMemory


def test_a_run_gets_a_cold_cache_of_its_own_with_the_models_linked_and_nothing_learnt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "user"
    (user / "profiles").mkdir(parents=True)
    (user / "profiles" / "target.memory-x.json").write_text("{}")  # what earlier runs learnt
    (user / "some-model").mkdir()
    (user / "some-model" / "weights.bin").write_text("w")
    monkeypatch.setenv("SPECFRAME_CACHE", str(user))
    with private_run_cache() as record:
        root = Path(os.environ["SPECFRAME_CACHE"])
        assert root == Path(record["path"]) != user and record["state"] == "cold" and record["linked"] == ["some-model"]
        assert (root / "some-model" / "weights.bin").read_text() == "w" and not (root / "profiles").exists()
        (root / "profiles").mkdir()
        (root / "profiles" / "learnt.json").write_text("{}")
    assert os.environ["SPECFRAME_CACHE"] == str(user) and not root.exists()
    assert (user / "some-model" / "weights.bin").exists()  # the link went, not what it pointed at
    with private_run_cache(user) as record:  # a cache the user gives: warm, and kept
        assert record["state"] == "warm" and record["learnt_files_at_start"] == ["profiles/target.memory-x.json"]
    assert user.is_dir()


def test_every_restore_brings_back_the_frozen_controller_whatever_the_request_learnt() -> None:
    auto = SimpleNamespace(memory=ControllerMemory(outlook=[0.9, 0.5]), memory_file=Path("/somewhere"))
    pipe, fixed = SimpleNamespace(auto_budget=auto), SimpleNamespace(auto_budget=None)
    freeze = ControllerFreeze([pipe, fixed])
    pipe.auto_budget.memory.outlook.append(0.1)  # a measured request teaches the controller (in place)
    pipe.auto_budget.memory.calibration = {"learnt": 1}
    freeze.restore()
    assert pipe.auto_budget.memory.outlook == [0.9, 0.5] and pipe.auto_budget.memory.calibration is None
    assert pipe.auto_budget.memory_file is None and fixed.auto_budget is None  # nothing learnt is saved
    pipe.auto_budget.memory.outlook[0] = 0.2
    freeze.restore()
    assert pipe.auto_budget.memory.outlook == [0.9, 0.5]
    assert freeze.record() == {"memory": "frozen", "controllers": 1, "restores": 2,
                               "learnt_from": "the run's untimed warm-up on tune-split prompts"}
