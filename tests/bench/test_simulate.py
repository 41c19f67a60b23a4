"""The trace-driven simulator (`specframe simulate`): its worked example, the roofline model, the command's checks,
and its replay of records measured here on the tiny pair under the cost model measured here (the properties that
hold at any speed; how close prediction and measurement come is `benchmarks/simulator_validation.py`'s table)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch

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


def test_the_last_requests_drain_with_fewer_rows_in_flight() -> None:
    """Continuous batching: a waiting request takes the first row that frees; the tail runs with fewer rows, each of
    its forwards priced at the rows actually in flight (the docstring's second example)."""
    from specframe.bench.simulate import continuous_schedule

    assert continuous_schedule([4, 1, 2], 2) == {2: 3, 1: 1}
    assert continuous_schedule([5, 5], 2) == {2: 5} and continuous_schedule([3, 0, 2], 4) == {2: 2, 1: 1}
    for rounds, batch in (([7, 3, 9, 1, 4], 2), ([2.5, 1.2, 4.0], 3), ([6] * 8, 3)):
        steps = continuous_schedule(rounds, batch)
        assert sum(a * n for a, n in steps.items()) == pytest.approx(sum(rounds))  # every round runs once
        assert max(steps) <= batch
    profile = CostProfile(key={}, verify_ms={1: 5.0, 4: 5.0}, batch_ms={2: {2: 10.0, 8: 20.0}})
    (p,) = simulate([record("m", 2, [3] * 8, 30, 1.0), record("m", 2, [3] * 2, 10, 1.0, qid=1)], profile,
                    draft_ms=(4.0, 1.0))
    # 2 forwards of both rows at C(2, 8) + draft 4 + 2, 6 of one at C(1, 4) + draft 4 + 1, two prefills C(1, 5)
    assert p.predicted_tokens_per_s == pytest.approx(40 / ((2 * 26 + 6 * 10 + 2 * 5) / 1e3))


def test_the_roofline_is_flat_while_memory_bound_and_steep_after() -> None:
    h100 = roofline_profile("h100-sxm", 4.0e9)
    assert h100.cost(1, 1) == pytest.approx(h100.cost(1, 64))  # 8 GB of weights at 3.35 TB/s: 2.4 ms
    assert h100.cost(1, 1) == pytest.approx(1e3 * 8.0e9 / 3.35e12)
    assert h100.cost(64, 64 * 128) > 10 * h100.cost(64, 64)
    with pytest.raises(ValueError, match="unknown accelerator"):
        roofline_profile("abacus", 1e9)


def test_a_reported_tau_is_priced_as_any_trace_with_that_mean() -> None:
    """`mean_tau_records` stands in for a pipeline known by its τ alone: the replay's τ is the reported one (to
    1 / rounds), and on the memory-bound part of a roofline (every forward costs the same) the predicted speed grows
    with τ in proportion, while in the compute-bound part more nodes cost more."""
    from specframe.bench.simulate import mean_tau_records, roofline_draft_ms

    h100 = roofline_profile("h100-sxm", 4.0e9)
    records = mean_tau_records("m", 5.97, 15, 2, rounds=100)
    (p,) = simulate(records, h100)
    assert p.tau == pytest.approx(5.97, abs=0.01) and p.nodes_per_round == 15 and p.row_rounds == 200
    (low,) = simulate(mean_tau_records("m", 3.0, 15, 1, rounds=400, prompt_tokens=1), h100)
    (high,) = simulate(mean_tau_records("m", 6.0, 15, 1, rounds=400, prompt_tokens=1), h100)
    assert high.predicted_tokens_per_s / low.predicted_tokens_per_s == pytest.approx(2.0, rel=0.01)
    (few,) = simulate(mean_tau_records("m", 6.0, 15, 32), h100)
    (many,) = simulate(mean_tau_records("m", 6.0, 63, 32), h100)  # 32 x 64 tokens: past the ridge
    assert many.predicted_tokens_per_s < 0.5 * few.predicted_tokens_per_s
    with pytest.raises(ValueError, match="impossible"):
        mean_tau_records("m", 17.5, 15, 1)
    fixed, per_row = roofline_draft_ms("h100-sxm", 1.0e9, 16)
    assert fixed == pytest.approx(1e3 * 2.0e9 / 3.35e12) and per_row == pytest.approx(1e3 * 2.0 * 1e9 * 16 / 989e12)


def test_the_command_checks_its_inputs_and_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "r.jsonl"
    assert run_cli(["simulate", str(results)]) == 2
    assert "exactly one cost model" in capsys.readouterr().err
    assert run_cli(["simulate", str(results), "--accelerator", "abacus", "--target-params", "1e9"]) == 2
    assert "--accelerator" in capsys.readouterr().err
    assert run_cli(["simulate", str(results), "--accelerator", "h100-sxm", "--target-params", "1e9",
                    "--draft-ms", "x"]) == 2
    assert "--draft-ms" in capsys.readouterr().err


def test_records_of_the_tiny_pair_replay_consistently_under_its_own_cost_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Records of plain decoding and a fixed-budget n-gram chain on a tiny model, and the cost model measured on the
    same target (as `specframe profile` does), replayed. What holds whatever the machine's speed: the measured side
    is the records' own tokens over their own wall time, the replay has one round per recorded round, a cost model
    twice as slow predicts half the speed, and `specframe simulate --json` prints what the API returns. How close
    the prediction comes to the measurement is a benchmark's question (`benchmarks/simulator_validation.py`, on a
    quiet machine), not a test's."""
    from specframe_hf.target import HFTarget
    from specframe_hf.testing import tiny_causal_lm

    from specframe.bench.record import RunInfo, build_record
    from specframe.cost.setup import target_profile_key
    from specframe.datasets.base import Sample
    from specframe.pipeline import Pipeline
    from specframe.profile_report import measure_pipeline_profile

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    target = HFTarget.from_model(tiny_causal_lm("llama", seed=0))
    base = {"generation": {"chat_template": False, "stop_at_eos": False}, "tree_builder": {"type": "chain"},
            "pruner": {"type": "none"}}
    pipes = {"plain": Pipeline.from_dict({**base, "drafter": {"type": "none"}, "budget": 1}, target=target),
             "ngram": Pipeline.from_dict({**base, "drafter": {"type": "ngram"}, "budget": 4}, target=target)}
    prompts = [[5, 6, 7, 5, 6, 7, 5, 6, 7, 5] * 2, [1, 2, 3, 4, 1, 2, 3, 4] * 3]
    measured = measure_pipeline_profile(pipes["ngram"], prompts[0], reps=3, new_tokens=16).profile  # type: ignore
    overheads = {stage: measured.overhead(stage) for stage in ("verify", "commit", "loop")}

    def cost_profile(scale: float) -> CostProfile:  # the measured cost model, every time multiplied by scale
        return CostProfile(key=target_profile_key(target, pipes["ngram"].config),
                           verify_ms={n: scale * ms for n, ms in measured.verify_ms.items()},
                           batch_ms={b: {n: scale * ms for n, ms in c.items()} for b, c in measured.batch_ms.items()},
                           overhead_ms={stage: scale * ms for stage, ms in overheads.items()})

    lines = []
    for name, pipe in pipes.items():
        info = RunInfo(method=name, base_method=name, baseline=name == "plain", config_hash=name,
                       target_hash="t", temperature=0.0, seed=0, max_new_tokens=48)
        for i, prompt in enumerate(prompts):
            result = pipe.generate(prompt, 48)
            sample = Sample(dataset="synthetic", question_id=i, category="synthetic", turns=("x",))
            lines.append(build_record(info, sample, 0, result, [result.total_ns], "test"))
    no_draft_cost = (0.0, 0.0)  # the draft time priced by the cost model alone, so that scaling it scales all
    once = {p.method: p for p in simulate(lines, cost_profile(1.0), draft_ms=no_draft_cost)}
    twice = {p.method: p for p in simulate(lines, cost_profile(2.0), draft_ms=no_draft_cost)}
    assert set(once) == {"plain", "ngram"} and once["ngram"].nodes_per_round > 0 and once["plain"].nodes_per_round == 0
    for method, p in once.items():
        own = [r for r in lines if r["method"] == method]
        wall_s = sum(r["total_ns"] for r in own) / 1e9
        rounds = sum(len(r["tree_nodes"]) for r in own)
        assert p.measured_tokens_per_s == pytest.approx(sum(len(r["tokens"]) for r in own) / wall_s)
        assert p.row_rounds == rounds
        assert p.tau == pytest.approx((sum(sum(r["accepted"]) for r in own) + rounds) / rounds, abs=5e-4)  # rounded
        assert twice[method].predicted_tokens_per_s == pytest.approx(p.predicted_tokens_per_s / 2)
    assert once["plain"].tau == pytest.approx(1.0)
    results, costs = tmp_path / "results.jsonl", tmp_path / "profile.json"
    results.write_text("".join(json.dumps(r) + "\n" for r in lines))
    save_profile(cost_profile(1.0), costs)
    assert run_cli(["simulate", str(results), "--costs", str(costs), "--draft-ms", "0,0", "--json"]) == 0
    shown = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert {m: shown[m]["predicted_tokens_per_s"] for m in shown} == pytest.approx(  # the file rounds the costs
        {m: p.predicted_tokens_per_s for m, p in once.items()}, rel=1e-4)


# ------------------------------------------------------------------------------------ replay at another budget
def greedy_record(method: str, accepted: list[int], nodes: list[int], orders: list[list[int]] | None,
                  temperature: float = 0.0, qid: int = 0) -> dict:
    """A greedy record whose rounds committed ``a + 1`` tokens each (after the prefill's token)."""
    committed = [a + 1 for a in accepted]
    out = {**record(method, 1, nodes, 1 + sum(committed), 100.0, qid=qid), "accepted": accepted,
           "temperature": temperature, "choices": [{"accept_lengths": committed}]}
    if orders is not None:
        out["path_order"] = orders
    return out


def same_prediction(a: object, b: object) -> bool:
    """Equal in every field but the budget it was asked for."""
    return {k: v for k, v in a.__dict__.items() if k != "budget"} == \
        {k: v for k, v in b.__dict__.items() if k != "budget"}


def test_the_replay_example_of_the_module_docstring() -> None:
    profile = CostProfile(key={}, verify_ms={1: 1.0, 5: 1.0})
    rec = greedy_record("m", [3, 1, 0], [4, 4, 4], [[0, 2, 3], [0], []])
    (p,) = simulate([rec], profile, budget=2)
    assert p.row_rounds == pytest.approx(4.2) and p.tau == pytest.approx(7 / 4.2, abs=1e-4)
    assert p.nodes_per_round == 2.0 and p.budget == 2
    (plain,) = simulate([rec], profile)
    assert plain.tau == pytest.approx(7 / 3, abs=1e-4) and plain.row_rounds == 3
    assert p.predicted_tokens_per_s < plain.predicted_tokens_per_s  # the same flat forward, more of them


def random_greedy_records(seed: int, requests: int = 6) -> list[dict]:
    """Records of random rounds: trees of up to 12 nodes, accepted paths whose score orders rise along the path
    (an ancestor-closed ranking), the last round of some requests trimmed."""
    import random

    rng = random.Random(seed)
    out = []
    for q in range(requests):
        accepted, nodes, orders = [], [], []
        for _ in range(rng.randint(1, 15)):
            n = rng.randint(0, 12)
            depth = rng.randint(0, min(n, 6))
            order = sorted(rng.sample(range(n), depth)) if depth else []
            nodes.append(n)
            orders.append(order)
            accepted.append(depth)
        if rng.random() < 0.5 and accepted[-1]:
            accepted[-1] -= 1  # EOS or the length limit cut the last round: its path_order keeps the verdict
        out.append(greedy_record("m", accepted, nodes, orders, qid=q))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_a_smaller_budget_never_predicts_more_accepted_tokens_per_round(seed: int) -> None:
    profile = CostProfile(key={}, verify_ms={1: 1.0, 13: 2.0})
    records = random_greedy_records(seed)
    taus = [simulate(records, profile, budget=k)[0].tau for k in range(1, 14)]
    assert all(a <= b for a, b in itertools.pairwise(taus)), taus
    (plain,) = simulate(records, profile)
    assert same_prediction(simulate(records, profile, budget=12)[0], plain)  # no recorded tree is larger
    assert taus[0] >= 1.0  # a round commits at least its bonus token


def test_records_that_cannot_be_replayed_at_another_budget_are_refused() -> None:
    profile = CostProfile(key={}, verify_ms={1: 1.0, 5: 1.0})
    old = greedy_record("old", [1, 0], [2, 2], None)
    assert simulate([old], profile)[0].row_rounds == 2  # old records still simulate at their own budget
    with pytest.raises(ValueError, match="no path_order"):
        simulate([old], profile, budget=1)
    with pytest.raises(ValueError, match="greedy records only"):
        simulate([greedy_record("t", [1, 0], [2, 2], [[0], []], temperature=0.7)], profile, budget=1)
    with pytest.raises(ValueError, match="at least 1"):
        simulate([old], profile, budget=0)


def test_a_record_whose_path_order_does_not_fit_its_rounds_is_refused() -> None:
    from specframe.bench.record_schema import record_problem

    good = build_tiny_record(path_order=[[0, 1], []])
    assert record_problem(good) is None
    for bad, words in (([[0, 1]], "one list per round"), ([[0], []], "does not fit"), ([[0, 4], []], "does not fit")):
        problem = record_problem({**good, "path_order": bad})
        assert problem is not None and words in problem, problem


def build_tiny_record(**extra: object) -> dict:
    """A valid result line of two rounds (2 and 0 draft tokens accepted from 4 and 0 nodes)."""
    from specframe.bench.record import RunInfo, build_record
    from specframe.datasets.base import Sample
    from specframe.metrics.records import GenerationResult, RoundLog, RoundRecord

    rounds = RoundLog([RoundRecord(4, 2, 2, 3), RoundRecord(0, 0, 0, 1)])
    result = GenerationResult(tokens=[1, 2, 3, 4, 5], text=None, stop_reason="length", rounds=rounds, prompt_len=3,
                              prefill_ns=10, total_ns=100)
    info = RunInfo(method="m", base_method="m", baseline=False, config_hash="c", target_hash="t", temperature=0.0,
                   seed=0, max_new_tokens=8)
    rec = build_record(info, Sample(dataset="s", question_id=0, category="s", turns=("x",)), 0, result, [100], "t")
    return {**rec, **extra}


def test_a_replayed_budget_predicts_the_tau_of_a_run_at_that_budget_on_the_tiny_pair(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Greedy records of a heap tree at budget 10 on the tiny target, drafted by a noisy oracle of the target's own
    future (its noise keyed by position, so every run drafts the same tree from the same position), replayed at
    budgets 2, 4 and 6 and compared with runs at those budgets on the same prompts and seeds: τ is deterministic, so
    the only gap is the replay's approximation (the rounds it adds accept as the recorded ones did; the module
    docstring), here within 5 %. Written on a 2-core machine: the predictions came out 1 to 2.5 % above the runs."""
    from specframe_hf.testing import random_ids

    from specframe import PluginHost
    from specframe.bench.record import RunInfo, build_record
    from specframe.datasets.base import Sample
    from specframe.pipeline import Pipeline
    from tests.exactness.test_greedy_exact_hf import BASE, Reference, make_test_plugin

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    host = PluginHost(autoload=True, allowlist=["hf", "trees", "verifiers"], disabled=(), trace=False)
    host.register(make_test_plugin(), "replay_test_drafters")
    ref = Reference("llama", "sdpa")
    prompts, new = [random_ids(12, seed=s) for s in range(8)], 64

    def run(budget: int) -> list[dict]:
        data = {**BASE, "budget": budget, "corrector": {"type": "identity"}, "tree_builder": {"type": "heap"},
                "pruner": {"type": "none"}, "drafter": {"type": "oracle", "depth": 6, "num_candidates": 3,
                                                        "rank_noise": 0.3, "miss_rate": 0.15}}
        pipe = Pipeline.from_dict(data, target=ref.target, host=host)
        info = RunInfo(method=f"heap-{budget}", base_method="heap", baseline=False, config_hash=str(budget),
                       target_hash="t", temperature=0.0, seed=0, max_new_tokens=new)
        lines = []
        for i, prompt in enumerate(prompts):
            pipe.stages.drafter.future = prompt + ref.generate(prompt, new + 16)  # type: ignore[attr-defined]
            result = pipe.generate(torch.tensor([prompt]), max_new_tokens=new, seed=i + 1)
            assert result.tokens == ref.generate(prompt, new)  # greedy: the target's own output
            sample = Sample(dataset="synthetic", question_id=i, category="synthetic", turns=("x",))
            lines.append(build_record(info, sample, 0, result, [result.total_ns], "test"))
        return lines

    profile = CostProfile(key={}, verify_ms={1: 1.0, 11: 1.0})
    recorded = run(10)
    for line in recorded:  # the ranking is ancestor-closed: orders rise along every accepted path
        assert all(len(o) >= a and o == sorted(set(o)) for o, a in zip(line["path_order"], line["accepted"],
                                                                          strict=True))
    assert any(a > 1 for line in recorded for a in line["accepted"])  # the oracle's trees are accepted in part
    (as_recorded,) = simulate(recorded, profile)
    assert same_prediction(simulate(recorded, profile, budget=10)[0], as_recorded)
    taus = {}
    for budget in (2, 4, 6):
        (actual,) = simulate(run(budget), profile)
        (predicted,) = simulate(recorded, profile, budget=budget)
        taus[budget] = predicted.tau
        with capsys.disabled():
            print(f"budget {budget}: τ run {actual.tau:.3f}, replayed {predicted.tau:.3f}")
        assert predicted.tau == pytest.approx(actual.tau, rel=0.05), budget
        assert predicted.nodes_per_round <= budget
    assert taus[2] <= taus[4] <= taus[6] <= as_recorded.tau
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in recorded))
    capsys.readouterr()
    assert run_cli(["simulate", str(results), "--accelerator", "h100-sxm", "--target-params", "4e9",
                    "--budget", "2,4", "--budget", "64", "--json"]) == 0
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    assert [r["budget"] for r in shown] == [None, 2, 4, 64]
    assert shown[1]["tau"] == pytest.approx(taus[2]) and shown[1]["ratio"] is None
    assert "--budget 64 is above every recorded tree" in captured.err
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "path_order"}) + "\n" for r in recorded))
    assert run_cli(["simulate", str(old), "--accelerator", "h100-sxm", "--target-params", "4e9"]) == 0
    capsys.readouterr()
    assert run_cli(["simulate", str(old), "--accelerator", "h100-sxm", "--target-params", "4e9", "--budget", "2"]) == 2
    assert "no path_order" in capsys.readouterr().err
    for bad in ("0", "x"):
        assert run_cli(["simulate", str(results), "--accelerator", "h100-sxm", "--target-params", "4e9",
                        "--budget", bad]) == 2
        assert "--budget" in capsys.readouterr().err


def test_the_score_order_example_ranks_the_accepted_nodes_among_the_whole_tree() -> None:
    from specframe.tree import DraftTree
    from specframe.tree.score_order import path_score_order

    tree = DraftTree(tokens=torch.tensor([[7, 3, 5, 9, 4, 0]]), parent=torch.tensor([[-1, 0, 0, 1, 2, -1]]),
                     depth=torch.tensor([[0, 1, 1, 2, 2, 0]]), logq=torch.zeros(1, 6),
                     score=torch.tensor([[0.0, -0.2, -0.5, -0.9, -1.4, float("-inf")]]),
                     valid=torch.tensor([[True] * 5 + [False]]))
    assert path_score_order(tree, torch.tensor([[0, 1, 3]]))[0, 1:].tolist() == [0, 2]
    assert path_score_order(tree, torch.tensor([[0, 2, 4]]))[0, 1:].tolist() == [1, 3]
    tied = DraftTree(tokens=tree.tokens, parent=tree.parent, depth=tree.depth, logq=tree.logq,
                     score=torch.zeros(1, 6), valid=tree.valid)  # equal scores: the lower node index first
    assert path_score_order(tied, torch.tensor([[0, 2, 4, -1]]))[0, 1:3].tolist() == [1, 3]
