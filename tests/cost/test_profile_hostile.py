"""Hostile cost profiles: what enters the shared cache is untrusted (plausible numbers, enough points, a usable
curve), is read through the guarded reader, written through the one atomic writer, and never replaces a cached
profile that measures more; `specframe profile` checks its prompt and outputs before measuring."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import torch
from specframe_smollm2.testing import CONVERTED_TARGET
from specframe_smollm2.testing import private_cache as link_private_cache

from specframe import PluginHost
from specframe.cli import run_cli
from specframe.cost.measure import cache_profile, load_profile, measure_verify_curve, profile_path, save_profile
from specframe.cost.profile import CostProfile
from specframe.cost.setup import given_profile
from specframe.errors import ConfigError
from specframe.files import OutputError

ROOT = Path(__file__).resolve().parents[2]
PLAIN = str(ROOT / "examples/plain.yaml")
KEY = {"target": {"class": "T"}, "device": "cpu", "dtype": "float32"}
GOOD = {1: 25.0, 2: 26.0, 3: 27.5, 5: 29.5, 9: 34.0, 17: 45.0, 33: 70.0, 65: 120.0}


def profile_json(verify: dict, overhead: dict | None = None, key: dict | None = None) -> str:
    return json.dumps({"format": 1, "key": KEY if key is None else key,
                       "verify_ms": {str(n): ms for n, ms in verify.items()}, "overhead_ms": overhead or {}})


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("text, reason", [
    (profile_json({1: 1e308, 2: 1e308, 3: 1e308}), "not a plausible forward time"),
    (profile_json({1: 0.0, 2: 0.0, 3: 0.0}), "not a plausible forward time"),
    (profile_json({1: 20.0, 10**26: 30.0}), "forwards verify 1 to"),
    (profile_json({1: 20.0, 5000: 30.0, 10**8: 40.0}), "forwards verify 1 to"),
    (profile_json({4000: 20.0}), "1 point(s)"),
    (profile_json({1: 50.0, 2: 51.0, 65: 1.0}), "does not cost less"),
    (profile_json(GOOD, {"draft": 1e300}), "not a plausible stage time"),
    ("[" * 200_000, "nested too deeply"),
    ('{"format": 1, "key": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}", "nested too deeply"),
])
def test_implausible_or_hostile_profiles_are_refused(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "given.json"
    path.write_text(text)
    notes: list[str] = []
    assert load_profile(path, None, notes.append) is None
    assert len(notes) == 1 and reason in notes[0] and str(path) in notes[0]
    with pytest.raises(ConfigError) as info:  # a profile the user names is an error naming the field and file
        given_profile(str(path), KEY)
    shown = info.value.render()
    assert shown.startswith("auto_budget.profile: ") and str(path) in shown and reason in shown
    assert len(shown) < 600


def test_a_directory_given_as_profile_is_named_as_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        given_profile(str(tmp_path), KEY)


def test_an_absurd_learnt_profile_is_not_cached(private_cache: Path) -> None:
    notes: list[str] = []
    absurd = CostProfile(key=KEY, verify_ms={1: 1e308, 2: 1e308})
    assert cache_profile(absurd, notes.append) is None
    assert "not caching" in notes[0] and not profile_path(KEY).exists()


def test_a_smaller_measurement_never_replaces_a_better_cached_profile() -> None:
    notes: list[str] = []
    good = CostProfile(key=KEY, verify_ms=GOOD)
    assert cache_profile(good, notes.append) == profile_path(KEY)
    for worse in (CostProfile(key=KEY, verify_ms={1: 900.0}),  # one point at the edge of the context
                  CostProfile(key=KEY, verify_ms={1: 20.0, 2: 21.0, 3: 22.0})):  # fewer, smaller sizes
        assert cache_profile(worse, notes.append) is None
        assert load_profile(profile_path(KEY), KEY, notes.append).verify_ms == GOOD
    assert "kept the cached cost profile" in notes[-1] and "8 point(s) up to 65 tokens" in notes[-1]
    better = CostProfile(key=KEY, verify_ms={**GOOD, 129: 210.0})  # covers it: replaces it
    assert cache_profile(better, notes.append) == profile_path(KEY)
    assert max(load_profile(profile_path(KEY), KEY, notes.append).verify_ms) == 129


def test_the_profile_writer_leaves_no_temporary_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = CostProfile(key=KEY, verify_ms=GOOD)
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(OutputError, match="is a directory"):
        save_profile(good, tmp_path / "dir.json")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="the file system is full"):
        save_profile(good, tmp_path / "p.json")
    notes: list[str] = []
    assert cache_profile(good, notes.append) is None and "file system is full" in notes[0]
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == [] and not (tmp_path / "p.json").exists()


def test_a_long_prompt_still_measures_the_whole_grid() -> None:
    from specframe_hf.target import HFTarget
    from specframe_hf.testing import random_ids, tiny_causal_lm

    target = HFTarget.from_model(tiny_causal_lm("llama", seed=0))
    limit = target.max_length
    assert limit is not None
    prompt = torch.tensor([random_ids(limit - 3, seed=1)])  # leaves room for no forward on its whole length
    curve = measure_verify_curve(target, prompt, grid=(1, 2, 3, 5, 9), reps=1)
    assert sorted(curve) == [1, 2, 3, 5, 9] and target.cache_len == 0


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = run_cli(list(args), host=PluginHost())
    return code, " ".join(capsys.readouterr().err.split())


@pytest.mark.real_model
@pytest.mark.skipif(not (CONVERTED_TARGET / "manifest.json").is_file(), reason="no converted SmolLM2")
def test_profile_command_refuses_a_long_prompt_and_bad_outputs_before_measuring(
        tmp_path: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    link_private_cache(private_cache, monkeypatch)  # the pipeline's target, in this cache
    code, err = cli(capsys, "profile", PLAIN, "--prompt", "word " * 20_000)
    assert code == 2 and "context" in err and "Traceback" not in err and "ValueError" not in err
    (tmp_path / "file").write_text("mine")
    (tmp_path / "out" / "profile.json").mkdir(parents=True)
    for out, message in ((tmp_path / "file" / "sub", "is a file"), (tmp_path / "out", "is a directory")):
        code, err = cli(capsys, "profile", PLAIN, "-o", str(out))
        assert code == 2 and message in err and "Traceback" not in err
    assert not (private_cache / "profiles").exists() or not any((private_cache / "profiles").iterdir())
    assert (tmp_path / "file").read_text() == "mine"
