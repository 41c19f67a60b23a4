"""The cost profile: interpolation, online learning, JSON, the cache keyed by where it was measured."""

from __future__ import annotations

import json
import math

import pytest

from specframe.cost.measure import load_profile, measure_verify_curve, profile_key, profile_path, save_profile
from specframe.cost.profile import CostProfile


def test_interpolates_and_extrapolates_piecewise_linearly() -> None:
    p = CostProfile(key={}, verify_ms={1: 50.0, 9: 120.0, 17: 130.0})
    assert p.verify_cost(1) == 50.0
    assert p.verify_cost(5) == pytest.approx(85.0)
    assert p.verify_cost(25) == pytest.approx(140.0)
    assert p.verify_costs(3) == [50.0, pytest.approx(58.75), pytest.approx(67.5)]


def test_online_observations_move_a_wrong_curve_to_the_truth() -> None:
    truth = {1: 10.0, 9: 11.0, 17: 12.0}  # a GPU's flat curve
    p = CostProfile(key={}, verify_ms={1: 45.0, 9: 99.0, 17: 106.0})  # started from a CPU's steep one
    for _ in range(60):
        for n, ms in truth.items():
            p.observe_verify(n, ms)
    for n, ms in truth.items():
        assert p.verify_cost(n) == pytest.approx(ms, rel=0.02)
    for _ in range(60):
        p.observe_verify(5, 10.5)  # between grid points: both neighbours learn
    assert p.verify_cost(5) == pytest.approx(10.5, rel=0.05)


def test_json_round_trip_and_bad_files(tmp_path) -> None:
    p = CostProfile(key={"device": "cpu"}, verify_ms={1: 5.0, 3: 6.0}, overhead_ms={"draft": 2.0})
    path = tmp_path / "p.json"
    save_profile(p, path)
    notes: list[str] = []
    again = load_profile(path, {"device": "cpu"}, notes.append)
    assert again is not None and again.verify_ms == p.verify_ms and again.overhead_ms == p.overhead_ms
    assert notes == []
    for bad in ("{", json.dumps({"format": 1, "key": {}, "verify_ms": {"x": 1}}), "[]",
                json.dumps({"format": 1, "key": {}, "verify_ms": {"1": -3}})):
        path.write_text(bad)
        assert load_profile(path, {"device": "cpu"}, notes.append) is None
    assert len(notes) == 4 and all(str(path) in n and "measuring again" in n for n in notes)


def test_a_profile_from_another_device_or_version_is_ignored_with_a_notice(tmp_path) -> None:
    key = {"device": "cpu", "dtype": "float32", "threads": 2, "versions": {"torch": "2.13.0"}}
    path = tmp_path / "p.json"
    save_profile(CostProfile(key=key, verify_ms={1: 5.0}), path)
    notes: list[str] = []
    other = {**key, "device": "cuda:0", "versions": {"torch": "2.14.0"}}
    assert load_profile(path, other, notes.append) is None
    assert "device, versions" in notes[0]


def test_cache_path_names_everything_the_key_holds(monkeypatch, tmp_path) -> None:
    """Runs at 1 and 2 threads (the demo picks the idle cores) keep a profile each instead of replacing each
    other's; the file name shows the thread count."""
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    a = {"target": {"class": "T"}, "device": "cpu", "threads": 1, "dtype": "float32", "versions": {"torch": "2"}}
    others = [{**a, "threads": 2}, {**a, "device": "cuda:0"}, {**a, "dtype": "bfloat16"},
              {**a, "versions": {"torch": "3"}}]
    paths = {profile_path(k) for k in [a, *others]}
    assert len(paths) == 5 and ".1-threads." in profile_path(a).name and ".2-threads." in profile_path(others[0]).name
    assert profile_path(a).parent == tmp_path / "profiles"


def test_measured_curve_on_a_tiny_model_is_positive_and_leaves_the_target_reset() -> None:
    import torch
    from specframe_hf.target import HFTarget
    from specframe_hf.testing import random_ids, tiny_causal_lm

    target = HFTarget.from_model(tiny_causal_lm("llama", seed=0))
    curve = measure_verify_curve(target, torch.tensor([random_ids(12, seed=0)]), grid=(1, 2, 5), reps=2)
    assert sorted(curve) == [1, 2, 5] and all(ms > 0 for ms in curve.values())
    assert target.cache_len == 0
    key = profile_key(target, None)
    assert key["dtype"] == "float32" and key["threads"] >= 1 and "torch" in key["versions"]


def test_pipeline_profile_table_json_and_plot(tmp_path, monkeypatch) -> None:
    from specframe_hf.target import HFTarget
    from specframe_hf.testing import tiny_causal_lm

    from specframe.pipeline import Pipeline
    from specframe.profile_report import break_even_tau, measure_pipeline_profile, profile_rows, write_plot

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    target = HFTarget.from_model(tiny_causal_lm("llama", seed=0))
    data = {"budget": "auto", "auto_budget": {"max_budget": 6}, "drafter": {"type": "ngram"},
            "tree_builder": {"type": "chain"}, "pruner": {"type": "none"},
            "generation": {"chat_template": False, "stop_at_eos": False}}
    pipe = Pipeline.from_dict(data, target=target)
    measured = measure_pipeline_profile(pipe, [5, 6, 7, 5, 6, 7, 5, 6], reps=1, new_tokens=8)  # type: ignore[arg-type]
    profile = measured.profile
    # the timed decode's τ and speed beside the costs (not the unset NaN: the tiny pair accepts nothing here, so the
    # value itself says little), and memory: the n-gram drafter holds no weights; the KV cache covers prompt + new
    # tokens.
    assert math.isfinite(measured.tau) and measured.tokens_per_s > 0
    assert measured.memory["drafter_bytes"] == 0 and measured.memory["context_tokens"] == 16
    assert measured.memory["kv_bytes"] == 16 * target.kv_bytes_per_token()
    assert sorted(profile.verify_ms) == [1, 2, 3, 5, 7]  # the grid up to max_budget + 1
    assert {"draft", "build", "verify", "commit"} <= set(profile.overhead_ms)
    rows = profile_rows(profile)
    assert [r["tokens"] for r in rows] == [1, 2, 3, 5, 7]
    assert rows[0]["break_even_tau"] == pytest.approx(break_even_tau(profile, 1), abs=0.01) and rows[0][
        "break_even_tau"] >= 1.0
    write_plot(profile, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_the_cost_model_prices_batches_from_their_own_curves() -> None:
    """The module docstring's example: C(4, 4) from the batch curve, C(2, 2) between C(1, 1) and C(4, 4) at one token
    a row, and a format-1 profile (one-row curve only) prices a batch as one row carrying all its tokens."""
    p = CostProfile(key={}, verify_ms={1: 50.0, 9: 120.0, 17: 130.0}, batch_ms={4: {4: 60.0, 36: 200.0}})
    assert p.cost(4, 4) == 60.0 and p.cost(1, 5) == pytest.approx(85.0)
    assert p.cost(2, 2) == pytest.approx(50.0 + (60.0 - 50.0) / 3)
    assert p.plain_rate(4) == pytest.approx(4 / 60.0)
    one_row = CostProfile.from_json({"format": 1, "key": {}, "verify_ms": {"1": 50.0, "9": 120.0}})
    assert one_row.cost(4, 9) == 120.0 and one_row.batches == [1]


def test_a_timed_forward_at_a_new_batch_size_starts_its_curve_and_frozen_profiles_learn_nothing() -> None:
    p = CostProfile(key={}, verify_ms={1: 40.0, 2: 44.0, 5: 50.0})
    for _ in range(80):
        p.observe(4, 8, 90.0)
    assert 4 in p.batches and p.cost(4, 8) == pytest.approx(90.0, rel=0.02)
    assert p.cost(1, 2) == 44.0  # the one-row curve is untouched
    again = CostProfile.from_json(json.loads(p.dumps()))
    assert again.cost(4, 8) == pytest.approx(p.cost(4, 8)) and again.covers(p) and not CostProfile(
        key={}, verify_ms={1: 40.0, 2: 44.0, 5: 50.0}).covers(p)
    frozen = CostProfile(key={}, verify_ms={1: 40.0, 2: 44.0}, frozen=True)
    frozen.observe(4, 8, 90.0)
    frozen.observe(1, 2, 10.0)
    frozen.observe_overhead("plain", 3.0)
    assert frozen.batches == [1] and frozen.verify_ms == {1: 40.0, 2: 44.0} and frozen.overhead_ms == {}


@pytest.mark.parametrize(("batch_ms", "reason"), [
    ({"4": {"2": 30.0, "8": 40.0}}, "carries 4 to"),  # fewer tokens than rows
    ({"4": {"4": 90.0, "8": 40.0}}, "less than half"),
    ({"0": {"4": 30.0}}, "positive count"),
    ({"4": {}}, "batch_ms['4']"),
])
def test_implausible_batch_curves_are_refused(batch_ms: dict, reason: str) -> None:
    with pytest.raises(ValueError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        CostProfile.from_json({"format": 2, "key": {}, "verify_ms": {"1": 5.0, "3": 6.0}, "batch_ms": batch_ms})
