"""The trace-driven simulator (`specframe simulate`): its worked example, the roofline model, the command's checks,
and its validation on the tiny pair (records measured here, replayed under the cost model measured here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specframe.bench.simulate import roofline_profile, simulate
from specframe.cli import run_cli
from specframe.cost.measure import save_profile
from specframe.cost.profile import CostProfile


def record(method: str, batch: int, nodes: list[int], tokens: int, total_ms: float, qid: int = 0) -> dict:
    return {"method": method, "batch_size": batch, "tree_nodes": nodes, "tokens": list(range(tokens)),
            "prompt_tokens": 5, "total_ns": int(total_ms * 1e6), "stage_ns": {}, "question_id": qid}


def test_the_worked_example_of_the_module_docstring() -> None:
    profile = CostProfile(key={}, verify_ms={1: 6.0, 5: 6.0}, batch_ms={2: {2: 10.0, 8: 20.0}})
    records = [record("m", 2, [3] * 5, 20, 140.0, qid=i) for i in range(2)]
    (p,) = simulate(records, profile, draft_ms=(4.0, 1.0))
    assert p.row_rounds == 10 and p.nodes_per_round == 3.0
    assert p.predicted_tokens_per_s == pytest.approx(40 / 0.142)
    assert p.measured_tokens_per_s == pytest.approx(40 / 0.140)


def test_the_roofline_is_flat_while_memory_bound_and_steep_after() -> None:
    h100 = roofline_profile("h100-sxm", 4.0e9)
    assert h100.cost(1, 1) == pytest.approx(h100.cost(1, 64))  # 8 GB of weights at 3.35 TB/s: 2.4 ms
    assert h100.cost(1, 1) == pytest.approx(1e3 * 8.0e9 / 3.35e12)
    assert h100.cost(64, 64 * 128) > 10 * h100.cost(64, 64)
    with pytest.raises(ValueError, match="unknown accelerator"):
        roofline_profile("abacus", 1e9)


def test_the_command_checks_its_inputs_and_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "r.jsonl"
    assert run_cli(["simulate", str(results)]) == 2
    assert "exactly one cost model" in capsys.readouterr().err
    assert run_cli(["simulate", str(results), "--accelerator", "abacus", "--target-params", "1e9"]) == 2
    assert "--accelerator" in capsys.readouterr().err
    assert run_cli(["simulate", str(results), "--accelerator", "h100-sxm", "--target-params", "1e9",
                    "--draft-ms", "x"]) == 2
    assert "--draft-ms" in capsys.readouterr().err


def test_simulated_tokens_per_second_match_the_measured_ones_on_the_tiny_pair(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Records of plain decoding and a fixed-budget n-gram chain on a tiny model, and the cost model measured on the
    same target, replayed. On a quiet machine (no other process kept the CPUs busy while the runs were timed) the
    prediction is within 25 % of the measurement. On a busy one only its direction is checked: a round of the tiny
    model's loop takes 0.5 ms, but on the shared 2-core machine this was written on one round in five or so is
    preempted for 30 to 60 ms; the profile's medians leave those out and the records' wall times keep them, so the
    prediction ran 1.1x to 14x faster than the measurement there, never slower. The 10 % validation table for the
    docs is measured on a quiet machine."""
    from specframe_hf.target import HFTarget
    from specframe_hf.testing import tiny_causal_lm

    from specframe.bench.record import RunInfo, build_record
    from specframe.cost.setup import target_profile_key
    from specframe.datasets.base import Sample
    from specframe.files.cache import busy_reason, measuring
    from specframe.pipeline import Pipeline
    from specframe.profile_report import measure_pipeline_profile

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    target = HFTarget.from_model(tiny_causal_lm("llama", seed=0))
    base = {"generation": {"chat_template": False, "stop_at_eos": False}, "tree_builder": {"type": "chain"},
            "pruner": {"type": "none"}}
    pipes = {"plain": Pipeline.from_dict({**base, "drafter": {"type": "none"}, "budget": 1}, target=target),
             "ngram": Pipeline.from_dict({**base, "drafter": {"type": "ngram"}, "budget": 4}, target=target)}
    prompts = [[5, 6, 7, 5, 6, 7, 5, 6, 7, 5] * 2, [1, 2, 3, 4, 1, 2, 3, 4] * 3]
    lines = []
    with measuring() as window:
        for name, pipe in pipes.items():
            pipe.generate(prompts[0], 8)  # warm-up
            info = RunInfo(method=name, base_method=name, baseline=name == "plain", config_hash=name,
                           target_hash="t", temperature=0.0, seed=0, max_new_tokens=48)
            for i, prompt in enumerate(prompts):
                result = pipe.generate(prompt, 48)
                sample = Sample(dataset="synthetic", question_id=i, category="synthetic", turns=("x",))
                lines.append(build_record(info, sample, 0, result, [result.total_ns], "test"))
    measured = measure_pipeline_profile(pipes["ngram"], prompts[0], reps=3, new_tokens=16).profile  # type: ignore
    profile = CostProfile(key=target_profile_key(target, pipes["ngram"].config), verify_ms=measured.verify_ms,
                          batch_ms=measured.batch_ms, overhead_ms={"verify": measured.overhead("verify"),
                                                                   "commit": measured.overhead("commit"),
                                                                   "loop": measured.overhead("loop")})
    assert measured.overhead("loop") > 0  # the loop's own time per round, outside every timed stage
    by_method = {p.method: p for p in simulate(lines, profile)}
    assert set(by_method) == {"plain", "ngram"} and by_method["ngram"].nodes_per_round > 0
    quiet = busy_reason(window.load) is None
    for p in by_method.values():
        print(f"{p.method}: measured {p.measured_tokens_per_s:.1f}, predicted {p.predicted_tokens_per_s:.1f} tok/s "
              f"({'quiet' if quiet else 'busy'} machine)")
        assert (0.75 < p.ratio < 1.25) if quiet else p.ratio > 0.75, (p.method, p.ratio)
    results, costs = tmp_path / "results.jsonl", tmp_path / "profile.json"
    results.write_text("".join(json.dumps(r) + "\n" for r in lines))
    save_profile(profile, costs)
    capsys.readouterr()  # the lines printed above
    assert run_cli(["simulate", str(results), "--costs", str(costs), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {r["method"] for r in shown} == {"plain", "ngram"}
