"""Every benchmark script runs end to end in its smoke mode (``--smoke``: tiny sizes, seconds; not a measurement).

The scripts run in this process through ``main(argv)``. Those that decode use the real SmolLM2 pair (that is what
they exist for; ``smoke_env`` in ``conftest.py``); the training-side scripts run on a tiny random target and
shards. ``accelerator_check.py --device cpu --smoke`` runs every step of the GPU check on the CPU, the
tree-construction benchmark included, so the accelerator path's code runs on every change. A test whose prompt
sets are found nowhere (a fresh clone without ``../shared``) skips with the scripts' own reason (``needs_sets``).

The assertions are what a smoke run can get wrong: outputs equal plain decoding's, every record complete (the
``protocol`` record included), τ equal to the committed tokens over the rounds, the physics bound equal to its
formula on the recorded inputs; not figures that hold by construction.
"""

from __future__ import annotations

import importlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.benchmarks.conftest import needs_sets

real_model = pytest.mark.real_model
SPEED_SETS = ("gsm8k", "humaneval", "spec_bench/translation")


def run(name: str, argv: list[str], out: Path) -> dict[str, Any]:
    status = importlib.import_module(name).main([*argv, "--out", str(out)])
    assert status == 0
    return json.loads(out.read_text())


def assert_protocol(report: dict[str, Any], *, memory: str | None = None, reference: bool = True) -> None:
    """A smoke run's ``protocol`` record: tune split, never published, its loads sampled, a private cache; with
    ``reference``, the plain loop's reference workload timed at least twice (registered, and at the end) beside
    the fixed probe, so the run can be judged steady."""
    protocol = report["protocol"]
    assert protocol["split"] == "tune" and protocol["smoke"] and not protocol["published"]
    quiet = protocol["quiet"]
    assert quiet["samples"] >= 1 and quiet["threads"] >= 1 and quiet["threshold"] == 0.3
    if reference:
        assert len(quiet["reference_ms"]) >= 2 and min(quiet["reference_ms"]) > 0, quiet
        assert len(quiet["probes_ms"]) >= 2 and "plain loop" in quiet["reference"]
    assert set(protocol["cache"]) >= {"path", "state", "created_for_this_run"}
    assert not Path(protocol["cache"]["path"]).exists() or not protocol["cache"]["created_for_this_run"]
    if memory is not None:
        assert protocol["controller"]["memory"] == memory


def assert_interleaved(report: dict[str, Any], *, blocks: int, openings: int = 1) -> None:
    """An interleaved run's record (:mod:`specframe.bench.steadiness`): its pairing declared, ``blocks`` kept blocks
    none of which is also listed as retried, and the reference workload timed beside the fixed probe once when
    registered, at each of the ``openings`` fresh block openings, at each block's close (a dropped try adds a fresh
    opening and a close) and once at the end."""
    quiet = report["protocol"]["quiet"]
    assert quiet["pairing"] and min(quiet["reference_ms"]) > 0, quiet
    assert len(quiet["blocks"]) == blocks and not set(quiet["blocks"]) & set(quiet["retried"]), quiet
    expected = 1 + openings + blocks + 2 * len(quiet["retried"]) + 1
    assert len(quiet["reference_ms"]) == expected == len(quiet["probes_ms"]), quiet


def assert_tau_is_committed_over_rounds(row: dict[str, Any]) -> None:
    assert row["rounds"] >= 1 and row["tau"] == round(row["committed"] / row["rounds"], 3), row


def test_tree_construction(tmp_path: Path) -> None:
    """`make bench-trees`' script (it imported the removed RngStreams and died before the first round)."""
    report = run("tree_construction", ["--smoke"], tmp_path / "trees.json")
    assert report["smoke"] and set(report["methods"]) == {"heap", "heap_sequential", "dartree", "chain_then_heap"}
    assert all(m["n"] == 3 for m in report["methods"].values())


def test_loop_overhead(tmp_path: Path) -> None:
    """The loop-overhead benchmark on the tiny pair: every pipeline shape, batch 1 and 2, exact where greedy."""
    report = run("loop_overhead", ["--smoke"], tmp_path / "loop.json")
    assert report["smoke"] and {r["batch"] for r in report["rows"]} == {1, 2}
    shapes = {r["pipeline"] for r in report["rows"]}
    assert {"plain", "dflash-chain", "ddtree", "dartree-fixed", "dartree-auto", "sampled-tree-t0.7"} <= shapes
    assert all(r["exact"] in (True, None) for r in report["rows"])
    assert all(r["round"]["median_ms"] > 0 and r["else"]["median_ms"] is not None for r in report["rows"])


@real_model
def test_loop_overhead_on_the_shipped_pair(smoke_env: Path, tmp_path: Path) -> None:
    needs_sets(*SPEED_SETS)
    report = run("loop_overhead", ["--smoke", "--models", "smollm2", "--batch-sizes", "1",
                                   "--pipelines", "dflash-chain"], tmp_path / "loop.json")
    assert {r["pipeline"] for r in report["rows"]} == {"plain", "dflash-chain"} and all(r["exact"] for r in
                                                                                        report["rows"])


@real_model
def test_accelerator_check_on_cpu(smoke_env: Path, tmp_path: Path) -> None:
    needs_sets(*SPEED_SETS)
    report = run("accelerator_check", ["--device", "cpu", "--smoke"], tmp_path / "check.json")
    assert report["smoke"] and report["greedy_exact_all"] and report["sampled"]["same_seed_same_tokens"]
    assert report["demo"][0]["equals_hf_generate"] and len(report["demo"]) == 2
    assert report["tree_construction"]["config"]["smoke"] and report["tree_construction"]["median_ms"]
    assert {run["status"] for run in report["loop_overhead"].values()} == {0}
    assert {r["pipeline"] for r in report["loop_overhead"]["tiny"]["rows"]} >= {"plain", "dflash-chain"}


@real_model
def test_auto_budget(smoke_env: Path, tmp_path: Path) -> None:
    """The headline's script, run as a user runs it: a private cache of its own (created, then removed), the
    controllers frozen and restored before each of the 2 prompts x 5 measured methods."""
    needs_sets("gsm8k")
    report = run("auto_budget", ["--smoke", "--sets", "gsm8k"], tmp_path / "auto.json")
    assert report["smoke"] and set(report["sets"]) == {"gsm8k"} and set(report["groups"]) == {"math_code"}
    rows = {r["method"]: r for r in report["sets"]["gsm8k"]["rows"]}
    assert {"plain decoding", "hf_generate", "dartree-pruned B=16", "dartree-pruned auto"} <= set(rows)
    assert all(r["vs_plain"]["identical"] == r["prompts"] == 2 for r in rows.values())
    plain = rows["plain decoding"]
    assert plain["rounds"] == plain["committed"] and plain["tau"] == 1.0  # one token per plain round
    for r in rows.values():
        if r["method"] != "hf_generate":
            assert_tau_is_committed_over_rounds(r)
            # the prefill gives each request its first token; every other token is committed by a round
            assert r["tokens"] == r["committed"] + r["prompts"] == plain["tokens"]
        median = r["vs_plain"]["median_interval"]
        assert median["low"] <= median["value"] <= median["high"] and median["n"] == 2
    assert_protocol(report, memory="frozen")
    assert report["protocol"]["cache"]["created_for_this_run"] and report["protocol"]["cache"]["state"] == "cold"
    assert report["protocol"]["controller"]["restores"] == 2 * len(rows)
    # The physics bound is its formula on the recorded inputs, from the controller's own cost model: tau at the fixed
    # budget is that row's, the replayed smaller budgets never accept more, and the auto row is a share of it.
    from specframe.bench.physics import physics_bound
    from specframe.cost.profile import CostProfile

    bound, model = report["sets"]["gsm8k"]["physics_bound"], CostProfile.from_json(report["cost_model"])
    tau = {int(k): v for k, v in bound["tau_by_nodes"].items()}
    assert sorted(tau) == [1, 3, 7, 15, 16] and tau[16] == pytest.approx(rows["dartree-pruned B=16"]["tau"], abs=2e-3)
    assert all(tau[a] <= tau[b] + 1e-9 for a, b in itertools.pairwise(sorted(tau)))
    assert {int(n): ms for n, ms in bound["forward_ms"].items()} == pytest.approx(
        {n: model.cost(1, n) for n in (1, 2, 4, 8, 16, 17)}, abs=0.01)
    again = physics_bound(1, model, (bound["draft_ms"], 0.0), tau)
    assert again.nodes == bound["nodes"] and again.speedup == pytest.approx(bound["speedup"], rel=0.01)
    auto = rows["dartree-pruned auto"]
    assert auto["share_of_bound"] == pytest.approx(auto["vs_plain"]["aggregate"]["value"] / bound["speedup"], abs=2e-3)


@real_model
def test_batch_decoding(smoke_env: Path, tmp_path: Path) -> None:
    from specframe.bench.physics import physics_bound
    from specframe.cost.profile import CostProfile

    needs_sets(*SPEED_SETS)
    report = run("batch_decoding", ["--smoke", "--cache", str(smoke_env / "cache")], tmp_path / "batch.json")
    assert report["smoke"] and {r["batch_size"] for r in report["rows"]} == {1, 2}
    assert report["n"] == 3 and report["sets"] == list(SPEED_SETS)  # the out-of-distribution set among them
    bound = report["physics_bound"]
    assert set(bound["by_batch"]) == {"1", "2"}
    tau = {int(k): v for k, v in bound["tau_by_nodes"].items()}
    model = CostProfile.from_json(bound["cost_model"])  # the C(B, n) the controller decided with
    fixed, per_row = bound["draft_split_ms"]
    for b, at in bound["by_batch"].items():  # the bound is its formula on the recorded inputs
        assert {int(t): ms for t, ms in at["forward_ms"].items()} == pytest.approx(
            {t: model.cost(int(b), int(b) * t) for t in map(int, at["forward_ms"])}, abs=0.01)
        again = physics_bound(int(b), model, (fixed, per_row), tau)
        assert again.nodes == at["nodes"] and again.speedup == pytest.approx(at["speedup"], rel=0.02), (b, at)
    for r in report["rows"]:
        if r["method"].startswith("hf_generate"):
            continue
        assert r["exact"] and r["tokens"] == r["committed"] + report["n"]  # + each request's prefill token
        assert_tau_is_committed_over_rounds(r)
        if r["method"].startswith("DARTree"):
            assert r["share_of_bound"] == pytest.approx(r["vs_plain_same_batch"] / r["physics_bound"], abs=2e-3)
        else:
            assert r["tau"] == 1.0 and r["verified_nodes"] == 0
    assert_protocol(report, memory="frozen")
    assert report["protocol"]["cache"]["path"] == str((smoke_env / "cache").resolve())


@real_model
def test_batched_drafting(smoke_env: Path, tmp_path: Path) -> None:
    needs_sets(*SPEED_SETS)
    report = run("batched_drafting", ["--smoke"], tmp_path / "drafting.json")
    assert report["smoke"] and all(r["exact"] for r in report["rows"])
    assert {(r["way"], r["batch_size"]) for r in report["rows"]} == {(w, b) for w in ("native", "forked")
                                                                      for b in (1, 2)}


@real_model
def test_bf16_exactness(smoke_env: Path, tmp_path: Path) -> None:
    needs_sets("gsm8k")
    report = run("bf16_exactness", ["--smoke", "--cache", str(smoke_env / "cache")], tmp_path / "bf16.json")
    assert report["smoke"] and set(report["settings"]) == {"auto", "float32"}
    for rows in report["settings"].values():
        assert {r["set"] for r in rows} == {"gsm8k"} and all(r["prompts"] == 2 for r in rows)
        assert all(0 <= r["differ"] <= r["prompts"] and r["rate"] == r["differ"] / r["prompts"] for r in rows)
    assert_protocol(report, reference=False)  # counts bf16 against float32 outputs: no speed ratio to steady


@real_model
def test_draft_vocab(smoke_env: Path, tmp_path: Path) -> None:
    needs_sets(*SPEED_SETS)
    report = run("draft_vocab", ["--smoke", "--cache", str(smoke_env / "cache")], tmp_path / "vocab.json")
    assert report["smoke"] and [v["draft_vocab"] for v in report["variants"]] == ["8192", "full"]
    assert all(v["exact"] and len(v["tau_per_prompt"]) == len(SPEED_SETS) for v in report["variants"])
    for v in report["variants"]:  # the gain over the plain loop: paired over every prompt, its interval holds it
        gain = v["vs_plain_loop"]
        assert gain["n"] == len(SPEED_SETS) and gain["low"] <= gain["value"] <= gain["high"], v
        assert v["head"]["median_ms"] > 0
    kernel = report["plain_loop_vs_generate"]  # the kernel gain, apart: generate() decoded every prompt too
    assert kernel["n"] == len(SPEED_SETS) and kernel["low"] <= kernel["value"] <= kernel["high"]
    assert report["plain_equals_generate"]
    assert_protocol(report, memory="frozen")
    # interleaved: each prompt one block on every side, and the LM heads' calls one more
    assert "rotated" in report["protocol"]["quiet"]["pairing"]
    assert_interleaved(report, blocks=len(SPEED_SETS) + 1)


@real_model
def test_linear_kernels(smoke_env: Path, tmp_path: Path) -> None:
    """Both kernels timed at every row count, the ratio the table prints equal to the two medians', the rule
    ``auto`` derives recorded, the CPU named, and the record of a run with no prompts (no split)."""
    report = run("linear_kernels", ["--smoke", "--cache", str(smoke_env / "cache")], tmp_path / "kernels.json")
    assert report["smoke"] and [r["rows"] for r in report["rows"]] == [1, 4] and report["auto_rows"] == [1, 4]
    for r in report["rows"]:
        for kernel in ("default", "onednn"):
            assert 0 < r[kernel]["min_ms"] <= r[kernel]["median_ms"] <= r[kernel]["max_ms"], r
        assert r["default_over_onednn"] == round(r["default"]["median_ms"] / r["onednn"]["median_ms"], 3)
    assert report["auto_rule"] and report["machine"]["cpu"] and len(report["per_round"]) == 1
    protocol = report["protocol"]
    assert protocol["smoke"] and not protocol["published"] and protocol["split"] is None
    assert protocol["cpu"] == report["machine"]["cpu"]
    assert_interleaved(report, blocks=1)  # the one round is one block, its ratio taken on one machine


@real_model
def test_pctree_shapes(smoke_env: Path, tmp_path: Path) -> None:
    """Each shape decoded on every set of the tune split, exact, its mean τ over the sets as recorded, and the best
    shape the one of highest mean τ; a counts-only record."""
    needs_sets("gsm8k", "humaneval", "mt_bench")
    from pctree_shapes import best_shape

    report = run("pctree_shapes", ["--smoke"], tmp_path / "shapes.json")
    assert report["smoke"] and report["every_output_exact"] and len(report["rows"]) == 2
    for row in report["rows"]:
        assert set(row["sets"]) == {"math", "code", "chat"} and row["budget"] == 16
        assert all(1.0 <= s["tau"] <= 5.0 and s["rounds"] >= 1 for s in row["sets"].values()), row
        assert row["tau_mean_over_sets"] == round(sum(s["tau"] for s in row["sets"].values()) / 3, 4)
    assert report["best"] == best_shape(report["rows"])
    assert_protocol(report, memory="none: fixed budgets", reference=False)


@real_model
def test_smollm2_eval(smoke_env: Path, tmp_path: Path) -> None:
    needs_sets("gsm8k", "humaneval", "mt_bench", "spec_bench/translation")
    report = run("smollm2_eval", ["--smoke", "--cache", str(smoke_env / "cache")], tmp_path / "eval.json")
    assert report["smoke"] and set(report["datasets"]) == {"gsm8k", "humaneval", "mt_bench", "spec_bench/translation"}
    assert_protocol(report, memory="online")
    assert all(row["exact"] for rows in report["datasets"].values() for row in rows)
    assert {r["budget"] for r in report["budget_sweep"]} == {4}


@real_model
def test_simulator_validation(smoke_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every pipeline at both smoke batch sizes, every output equal to plain decoding's; each row's ratio is its
    prediction over its measurement; and `specframe simulate` on the written records and a pipeline's written profile
    prints the same predictions as the JSON (the table is what a user's command reproduces)."""
    from specframe.cli import run_cli

    needs_sets(*SPEED_SETS)
    out = tmp_path / "validation.json"
    report = run("simulator_validation", ["--smoke", "--cache", str(smoke_env / "cache")], out)
    assert report["smoke"] and {(r["pipeline"], r["batch_size"]) for r in report["rows"]} == {
        (p, b) for p in ("plain decoding", "DFlash chain", "DARTree (pruned, B = 16)") for b in (1, 2)}
    for r in report["rows"]:
        assert r["exact"] and r["ratio"] == pytest.approx(r["predicted_tokens_per_s"] / r["tokens_per_s"], abs=1e-3)
        assert r["within_tolerance"] == (abs(r["ratio"] - 1) <= report["tolerance"])
        assert (r["nodes_per_round"] == 0) == (r["pipeline"] == "plain decoding")
    assert_protocol(report, memory="none: fixed budgets")
    profile = tmp_path / report["files"]["profiles"]["DFlash chain"]
    for r in (r for r in report["rows"] if r["pipeline"] == "DFlash chain"):
        records = tmp_path / report["files"]["records"][str(r["batch_size"])]
        capsys.readouterr()
        assert run_cli(["simulate", str(records), "--costs", str(profile), "--json"]) == 0
        (shown,) = [s for s in json.loads(capsys.readouterr().out) if s["method"] == "DFlash chain"]
        assert shown["batch_size"] == r["batch_size"]
        assert shown["predicted_tokens_per_s"] == pytest.approx(r["predicted_tokens_per_s"], rel=1e-3)


@real_model
def test_sibling_acceptance(smoke_env: Path, tmp_path: Path) -> None:
    """Every pipeline on every set: outputs equal the plain loop's; the counts are consistent with the rounds (a
    round counts at most one stopped node, so a depth's total is at most the rounds; a chain only ever accepts the
    drafter's top choice, rank 0); the memory names the correction head of the pipelines that have one."""
    needs_sets(*SPEED_SETS)
    report = run("sibling_acceptance", ["--smoke"], tmp_path / "siblings.json")
    assert report["smoke"] and [p["label"] for p in report["pipelines"]] == [
        "DFlash chain", "DDTree", "Domino chain + DDTree", "DARTree (pruned, B = 16)"]
    for pipe in report["pipelines"]:
        assert set(pipe["sets"]) == {"math", "code", "translation"}
        for cell in pipe["sets"].values():
            assert cell["exact"] and cell["n"] == 1 and 1 <= cell["tau"] <= 17
            for depth, rank, continued, total in cell["sibling_continuation"]:
                assert 0 <= continued <= total and 1 <= total <= cell["rounds"] and depth >= 1 and rank >= 0
            if pipe["label"] == "DFlash chain":
                assert all(rank == 0 for _, rank, _, _ in cell["sibling_continuation"])
            memory = cell["memory"]
            assert memory["drafter_bytes"] > 0 and memory["kv_bytes"] == memory["kv_bytes_per_token"] * \
                memory["context_tokens"]
            assert ("corrector:ar" in memory["heads"]) == pipe["label"].startswith(("Domino", "DARTree"))
    assert "tokens_per_s" not in json.dumps(report) and "seconds" not in json.dumps(report["pipelines"])
    assert_protocol(report, memory="none: fixed budgets", reference=False)  # counts only: nothing timed


@real_model
def test_corrector_ablation(smoke_env: Path, tmp_path: Path) -> None:
    needs_sets("gsm8k", "humaneval", "mt_bench", "spec_bench/translation")
    evaluation = tmp_path / "eval.json"
    evaluation.write_text('{"datasets": {}}')
    report = run("corrector_ablation", ["--smoke", "--eval-json", str(evaluation)], tmp_path / "ablation.json")
    assert json.loads(evaluation.read_text()) == {"datasets": {}, "corrector_ablation": report}
    assert report["smoke"] and set(report["kinds"]) == {"math", "code", "chat", "translation"}
    cells = [c for kind in report["kinds"].values() for c in kind["cells"]]
    assert len(cells) == 4 * 4 * 2 and all(c["exact"] for c in cells)
    # a round commits at most its budget's drafted nodes plus the bonus token
    assert all(1 <= c["tau"] <= c["budget"] + 1 for c in cells)
    # a chain holds min(depths, budget) nodes and the shipped drafters propose 8 depths: at B = 16 it is the B = 8
    # decode, made once; a tree's two budgets are two pipelines
    for kind in report["kinds"].values():
        by = {(c["method"], c["budget"]): c for c in kind["cells"]}
        for (method, budget), c in by.items():
            shared = c["shape"] == "chain" and budget == 16
            assert c.get("same_as_budget") == (8 if shared else None), c
            if shared:
                assert {k: v for k, v in c.items() if k not in ("budget", "same_as_budget")} == \
                    {k: v for k, v in by[method, 8].items() if k != "budget"}
    for c in cells:  # each interval holds its estimate
        gain = c["vs_plain_loop"]
        assert gain["low"] <= gain["value"] <= gain["high"], c
    assert {c["shape"] for c in cells} == {"chain", "tree"}
    assert_protocol(report, memory="none: fixed budgets")
    # interleaved: each kind's one prompt is one block, timed around by the reference workload (the plain loop on
    # a fixed prompt): registered, per kind an opening and a closing timing (a dropped try adds a fresh opening and
    # a closing one), and one at the end
    quiet = report["protocol"]["quiet"]
    assert "rotated" in quiet["pairing"] and "plain loop" in quiet["reference"]
    assert_interleaved(report, blocks=4, openings=4)


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny random target saved as a model directory, its shards, a drafter recipe on them (YAML) and the
    drafter it trains (2 steps)."""
    from specframe_smollm2.cache import write_manifest
    from specframe_smollm2.testing import tiny_llama, tiny_recipe, write_tiny_shards
    from specframe_smollm2.training.recipe import Recipe
    from specframe_smollm2.training.trainer import train

    root = tmp_path_factory.mktemp("tiny-pair")
    model = tiny_llama()
    model.save_pretrained(root / "target")
    write_manifest(root / "target", {"test": "tiny random Llama"})  # `specframe train` checks a converted target
    write_tiny_shards(model, root / "data", num_seqs=16, taps=(0, 1, 2))
    fields = tiny_recipe("drafter", root, root / "data", steps=2, target=str(root / "target")).model_dump(
        mode="json", exclude_none=True)
    fields["data"].update(num_prompts=16, batch_size=8, topk=4)  # exactly the shards written: none is generated
    recipe = Recipe.model_validate(fields)
    path = root / "recipe.yaml"
    path.write_text(yaml.safe_dump(fields))
    train(recipe, target_dir=root / "target", target_model=model, progress=False, log=lambda m: None)
    return {"root": root, "recipe": path, "drafter": root / "out-drafter", "target": root / "target"}


def test_smollm2_heldout(tiny_pair: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # from another directory: paths on the command line are resolved first
    report = run("smollm2_heldout", [str(tiny_pair["recipe"]), "--drafter", f"tiny={tiny_pair['drafter']}",
                                     "--target", str(tiny_pair["target"]), "--anchors", "2"], tmp_path / "h.json")
    assert report["anchors"] == 2 and report["kinds"] and "tiny" in report["overall"]
    assert "| all (sequence-weighted) |" in capsys.readouterr().out


@pytest.mark.slow
def test_smollm2_recipe_ablations(tiny_pair: dict[str, Path], tmp_path: Path) -> None:
    """The base variant trained for 2 steps by `specframe train` in a subprocess (run from the repository)."""
    out = tmp_path / "ablate"
    status = importlib.import_module("smollm2_recipe_ablations").main(
        ["--smoke", "--recipe", str(tiny_pair["recipe"]), "--out", str(out)])
    assert status == 0
    rows = json.loads((out / "ablations.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == ["base"] and rows[0]["evals"]


def test_accelerator_check_records_a_failing_step_and_runs_the_next(tmp_path: Path) -> None:
    """A step that raises (a device-only bug, say) is recorded with its error, the summary file is rewritten after
    every step, the next step still runs, and the check does not pass."""
    import accelerator_check

    out, summary = tmp_path / "check.json", {"check": "accelerator"}

    def broken() -> None:
        raise RuntimeError("CUDA error: an illegal memory access")

    assert accelerator_check.run_step(summary, "demo", broken, out) is None
    assert "RuntimeError: CUDA error" in json.loads(out.read_text())["errors"]["demo"]["error"]
    assert accelerator_check.run_step(summary, "trees", lambda: {"median_ms": 1.0}, out) == {"median_ms": 1.0}
    written = json.loads(out.read_text())
    assert written["trees"] == {"median_ms": 1.0} and set(written["step_seconds"]) == {"demo", "trees"}
    assert not accelerator_check.passed(summary)
    del summary["errors"]
    assert accelerator_check.passed(summary)  # no step failed and no output differed
