"""Every benchmark script refuses bad arguments before any work (issue [2/5], class 8): one usage line naming the
flag, exit status 2, and no model loaded, no prompt read, no training started."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

SCRIPTS = ("accelerator_check", "auto_budget", "batch_decoding", "batched_drafting", "bf16_exactness",
           "corrector_ablation", "draft_vocab", "loop_overhead", "smollm2_eval", "smollm2_heldout",
           "smollm2_recipe_ablations", "sibling_acceptance", "simulator_validation", "tree_construction")
RECIPE = "recipes/smollm2/drafter-stage3.yaml"


def script(name: str) -> ModuleType:
    return importlib.import_module(name)


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every way a script starts its work fails the test (and is recorded)."""
    import _frame
    import prompt_sets
    import specframe_hf.loading

    from specframe.pipeline import Pipeline

    modules = [script(name) for name in SCRIPTS]  # imported first: a module imported under the patches below
    started: list[str] = []                      # would keep the forbidden functions for good

    def forbidden(what: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            started.append(what)
            raise AssertionError(f"{what} ran before the arguments were checked")
        return call

    monkeypatch.setattr(Pipeline, "from_yaml", forbidden("Pipeline.from_yaml"))
    monkeypatch.setattr(specframe_hf.loading, "load_model", forbidden("load_model"))
    monkeypatch.setattr(_frame, "measured_run", forbidden("the measured run (load check, private cache)"))
    monkeypatch.setattr(prompt_sets, "load_prompt_sets", forbidden("load_prompt_sets"))
    for name, module in zip(SCRIPTS, modules, strict=True):
        for attr in ("measured_run", "require_sets", "load_prompt_sets", "build_random_gru", "run_variant",
                     "load_recipe", "load_target"):
            if hasattr(module, attr):
                monkeypatch.setattr(module, attr, forbidden(f"{name}.{attr}"))
    return started


CASES = [
    ("auto_budget", ["--n", "-1"], "--n"),  # it used to mean "every prompt": hundreds of them
    ("auto_budget", ["--n", "0"], "--n"),
    ("auto_budget", ["--budgets", "0"], "--budgets"),
    ("auto_budget", ["--threads", "-3"], "--threads"),
    ("auto_budget", ["--sets", "gsm8k,nope"], "--sets"),
    ("auto_budget", ["--methods", "dartree"], "--methods"),
    ("auto_budget", ["--bootstrap", "0"], "--bootstrap"),
    ("auto_budget", ["--data", "no/such/dir"], "--data"),
    # the held-out split is for published runs: at least 20 prompts per set
    ("auto_budget", ["--split", "report", "--n", "19"], "--split"),
    ("smollm2_eval", ["--split", "report"], "--split"),  # its default --n is 6
    ("batch_decoding", ["--split", "report", "--n", "57"], "--split"),  # 19 per set of 3
    ("corrector_ablation", ["--split", "report", "--n", "8"], "--split"),
    ("draft_vocab", ["--split", "report"], "--split"),
    ("bf16_exactness", ["--split", "report", "--n", "5"], "--split"),
    ("sibling_acceptance", ["--split", "report", "--n", "19"], "--split"),
    ("sibling_acceptance", ["--max-new-tokens", "0"], "--max-new-tokens"),
    ("simulator_validation", ["--split", "report", "--n", "57"], "--split"),  # 19 per set of 3
    ("simulator_validation", ["--batch-sizes", "1,0"], "--batch-sizes"),
    ("simulator_validation", ["--threads", "-1"], "--threads"),
    ("auto_budget", ["--split", "all"], "--split"),
    ("auto_budget", ["--wait-quiet", "-1"], "--wait-quiet"),
    ("batch_decoding", ["--batch-sizes", "0"], "--batch-sizes"),
    ("batch_decoding", ["--batch-sizes", "1,2,-4"], "--batch-sizes"),
    ("batch_decoding", ["--n", "-1"], "--n"),
    ("batch_decoding", ["--repeats", "0"], "--repeats"),
    ("batch_decoding", ["--threads", "-1"], "--threads"),
    ("batched_drafting", ["--batch-sizes", "0"], "--batch-sizes"),
    ("batched_drafting", ["--max-new-tokens", "0"], "--max-new-tokens"),
    ("bf16_exactness", ["--n", "-1"], "--n"),
    ("bf16_exactness", ["--methods", "no-such-pipeline"], "--methods"),
    ("bf16_exactness", ["--logits", "float64"], "--logits"),
    ("draft_vocab", ["--n", "0"], "--n"),
    ("draft_vocab", ["--sizes", "0"], "--sizes"),
    ("draft_vocab", ["--sizes", "1000"], "--sizes"),  # no mapping of that size: refused before loading
    ("draft_vocab", ["--head-reps", "-1"], "--head-reps"),
    ("draft_vocab", ["--pipeline", "no-such.yaml"], "--pipeline"),
    ("smollm2_eval", ["--n", "-1"], "--n"),
    ("smollm2_eval", ["--budgets", "4,0"], "--budgets"),
    ("smollm2_eval", ["--sweep-n", "0"], "--sweep-n"),
    ("smollm2_heldout", [RECIPE, "--anchors", "0"], "--anchors"),
    ("smollm2_heldout", ["no-such-recipe.yaml", "--drafter", "a=checkpoints/smollm2-135m/drafter"], "recipe"),
    ("smollm2_heldout", [RECIPE, "--drafter", "a=no/such/dir"], "--drafter"),
    ("smollm2_recipe_ablations", ["--steps", "1"], "--steps"),
    ("smollm2_recipe_ablations", ["--variants", "base,nope"], "--variants"),
    ("tree_construction", ["--rounds", "0"], "--rounds"),
    ("tree_construction", ["--threads", "-3"], "--threads"),
    ("tree_construction", ["--methods", "heap,nope"], "--methods"),
    ("tree_construction", ["--vocab", "8", "--candidates", "64"], "--vocab"),
    ("corrector_ablation", ["--n", "-1"], "--n"),
    ("corrector_ablation", ["--budgets", "4,0"], "--budgets"),
    ("corrector_ablation", ["--max-new-tokens", "0"], "--max-new-tokens"),
    ("corrector_ablation", ["--methods", "DFlash chain,nope"], "--methods"),
    ("corrector_ablation", ["--methods", "DFlash chain", "--eval-json", "checkpoints/smollm2-135m/eval.json"],
     "--eval-json"),
    ("loop_overhead", ["--batch-sizes", "0"], "--batch-sizes"),
    ("loop_overhead", ["--repeats", "0"], "--repeats"),
    ("loop_overhead", ["--n", "-1"], "--n"),
    ("loop_overhead", ["--threads", "-3"], "--threads"),
    ("loop_overhead", ["--pipelines", "plain,nope"], "--pipelines"),
    ("accelerator_check", ["--max-new-tokens", "0"], "--max-new-tokens"),
    ("accelerator_check", ["--tree-rounds", "-1"], "--tree-rounds"),
    ("accelerator_check", ["--steps", "demo,nope"], "--steps"),
    ("accelerator_check", ["--methods", "DFlash chain,no such method"], "--methods"),
]


@pytest.mark.parametrize("name, argv, flag", CASES, ids=[f"{c[0]}:{' '.join(c[1])}" for c in CASES])
def test_bad_arguments_are_refused_before_any_work(name: str, argv: list[str], flag: str, no_work: list[str],
                                                   capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / ("ablate" if name == "smollm2_recipe_ablations" else "out.json"))]
    device = ["--device", "cpu"] if name == "accelerator_check" else []
    with pytest.raises(SystemExit) as exc:
        script(name).main([*argv, *out, *device])
    assert exc.value.code == 2 and no_work == []
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert "Traceback" not in err and len(errors) == 1 and f"argument {flag}:" in errors[0], err


@pytest.mark.parametrize("name", [n for n in SCRIPTS if n != "smollm2_recipe_ablations"])
def test_an_output_that_is_a_directory_is_refused_before_any_work(name: str, no_work: list[str], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`batch_decoding.py --out DIR` used to run the whole benchmark and then fail to write."""
    extra = {"smollm2_heldout": [RECIPE, "--drafter", "a=checkpoints/smollm2-135m/drafter"],
             "accelerator_check": ["--device", "cpu"]}.get(name, [])
    with pytest.raises(SystemExit) as exc:
        script(name).main([*extra, "--out", str(tmp_path)])
    assert exc.value.code == 2 and no_work == []
    err = capsys.readouterr().err
    assert "argument --out:" in err and "is a directory" in err


def test_threads_zero_means_torchs_default() -> None:
    import _frame

    before = torch.get_num_threads()
    args = script("tree_construction").parse_args(["--threads", "0", "--out", "/tmp/specframe-unused.json"])
    _frame.apply_threads(args.threads)
    assert args.threads == 0 and torch.get_num_threads() == before


SPLIT_SCRIPTS = ("auto_budget", "batch_decoding", "bf16_exactness", "corrector_ablation", "draft_vocab",
                 "sibling_acceptance", "simulator_validation", "smollm2_eval")


@pytest.mark.parametrize("name", SPLIT_SCRIPTS)
def test_the_tune_split_is_the_default_and_report_must_be_asked_for(name: str, tmp_path: Path) -> None:
    """Settings are developed on `tune`; only a published run reads `report`, with 20 prompts per set or more, and a
    smoke run never does."""
    out = ["--out", str(tmp_path / "x.json")]
    module = script(name)
    assert module.parse_args(out).split == "tune"
    assert module.parse_args(["--split", "report", "--n", "60", *out]).split == "report"
    assert module.parse_args(["--split", "report", "--n", "60", "--smoke", *out]).split == "tune"


def test_smoke_arguments_are_small_whatever_else_is_given(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "x.json")]
    assert script("auto_budget").parse_args(["--n", "500", "--smoke", *out]).n == 2
    assert script("batch_decoding").parse_args(["--quick", *out]).batch_sizes == [1, 2]  # --quick: the old name
    assert script("tree_construction").parse_args(["--smoke", *out]).vocab == 4096


def test_the_corrector_ablation_runs_the_methods_named_even_in_a_smoke_run() -> None:
    """`--smoke --methods X` used to run the smoke set and ignore X."""
    ablation = script("corrector_ablation")
    named = ["DFlash chain", "chat zoo: Domino GRU DARTree"]
    for smoke in (False, True):
        assert [m[0] for m in ablation.selected_methods(named, smoke)] == named
    assert [m[0] for m in ablation.selected_methods(None, True)] == [
        m[0] for m in ablation.METHODS if m[0] in ablation.SMOKE_METHODS]
    # without --methods: the ablation proper; the other tree shapes (their own table) and the chat zoo when named
    assert ablation.selected_methods(None, False) == ablation.ABLATION_METHODS
    assert not {m[0] for m in ablation.ABLATION_METHODS} & {*ablation.TREE_SHAPE_BASELINES,
                                                            *(m[0] for m in ablation.CHAT_ZOO_METHODS)}
    assert set(ablation.TREE_SHAPE_BASELINES) <= {m[0] for m in ablation.METHODS}


def test_pipelines_of_equal_configurations_are_decoded_once_by_the_first() -> None:
    first_equal = script("corrector_ablation").first_equal
    assert first_equal(["a", "b", "b", "c", "a"]) == [0, 1, 1, 3, 0]
    assert first_equal([]) == []


def _ablation_file(methods: list[str], *, n: int = 20, quiet: bool = True) -> dict[str, Any]:
    cells = [{"method": m, "budget": b, "tau": 2.0, "draft_ms_per_round": 8.0, "vs_plain_loop": {"value": 1.1}}
             for m in methods for b in (4, 8)]
    protocol = {"split": "report", "prompts_per_set": n, "smoke": False,
                "quiet": {"threads": 1, "start": 0.1, "during_max": 1.1 if quiet else 2.0, "samples": 3}}
    return {"smoke": False, "split": "report", "n": n, "max_new_tokens": 64, "budgets": [4, 8], "threads": 1,
            "machine": {"cpu": "a test CPU"}, "protocol": protocol, "wall_seconds": 10.0,
            "kinds": {k: {"plain_loop_tokens_per_s": 15.0, "cells": [dict(c) for c in cells]}
                      for k in ("math", "code")}}


def test_an_ablation_file_extended_by_a_later_run_holds_both_runs_rows_and_is_judged_by_its_weakest_run() -> None:
    extended = script("corrector_ablation").extended
    earlier = _ablation_file(["DFlash + DDTree heap", "old pruner"])
    later = _ablation_file(["old pruner", "new pruner"], quiet=False)
    out = extended(earlier, later)
    for kind in out["kinds"].values():
        rows = [(c["method"], c["budget"]) for c in kind["cells"]]
        assert rows == [("DFlash + DDTree heap", 4), ("DFlash + DDTree heap", 8), ("old pruner", 4),
                        ("old pruner", 8), ("new pruner", 4), ("new pruner", 8)]
        assert kind["plain_loop_tokens_per_s"] == 15.0  # the earlier run's plain loop stays the header
    assert [r["methods"] for r in out["runs"]] == [["DFlash + DDTree heap", "old pruner"], ["new pruner", "old pruner"]]
    assert out["protocol"] is not None and out["protocol"]["quiet"]["during_max"] == 2.0  # the run that was not quiet
    assert earlier["kinds"]["math"]["cells"][2]["method"] == "old pruner"  # the earlier file is not changed in place
    with pytest.raises(SystemExit, match="n=20 there, 8 here"):
        extended(earlier, _ablation_file(["new pruner"], n=8))


def _this_cpu() -> str:
    from specframe.metrics.machine_info import machine_summary

    return str(machine_summary()["cpu"])


def _file_of_a_default_run(**changes: Any) -> dict[str, Any]:
    """What a run with the default settings (tune split, 6 prompts, 64 tokens, budgets 4, 8, 16, 1 thread) on this
    machine wrote, with ``changes``."""
    kinds = script("corrector_ablation").KINDS
    data = {"smoke": False, "split": "tune", "n": 6, "max_new_tokens": 64, "budgets": [4, 8, 16], "threads": 1,
            "machine": {"cpu": _this_cpu()}, "protocol": None, "wall_seconds": 3600.0,
            "kinds": {k: {"plain_loop_tokens_per_s": 15.0,
                          "cells": [{"method": "DFlash chain", "budget": b} for b in (4, 8, 16)]} for k in kinds}}
    return {**data, **changes}


EXTEND_CASES = [
    (_file_of_a_default_run, [], ["--n", "8"], "n=6 there, 8 here"),
    (_file_of_a_default_run, [], ["--budgets", "4,8"], "budgets=[4, 8, 16] there, [4, 8] here"),
    (_file_of_a_default_run, [], ["--smoke"], "smoke=False there, True here"),
    (_file_of_a_default_run, [], ["--max-new-tokens", "32"], "max_new_tokens=64 there, 32 here"),
    (_file_of_a_default_run, [("threads", 2)], [], "threads=2 there, 1 here"),
    (_file_of_a_default_run, [("split", "report"), ("n", 20)], [], "split='report' there, 'tune' here"),
    (_file_of_a_default_run, [("machine", {"cpu": "Some Other CPU"})], [], "another CPU ('Some Other CPU' there"),
    (_file_of_a_default_run, [("machine", None)], [], "another CPU (None there"),
    (_file_of_a_default_run, [("kinds", {"algebra": {"cells": []}})], [], "not a corrector ablation result file"),
    (_file_of_a_default_run, [("kinds", {})], [], "not a corrector ablation result file"),
    (_file_of_a_default_run, [("machine", {"cpu": "CPU A"})], ["--kinds", "chat"],
     "holds rows of chat (another CPU ('CPU A' there"),
    (_file_of_a_default_run, [("kinds", None)], [], "not a corrector ablation result file"),
    (lambda: [1, 2, 3], [], [], "not a corrector ablation result file"),
    (None, [], [], "not a readable JSON result file"),
]


@pytest.mark.parametrize("make, changes, argv, message", EXTEND_CASES, ids=[c[3] for c in EXTEND_CASES])
def test_an_extend_file_of_other_settings_or_corrupt_is_refused_before_any_work(
        make: Any, changes: list[tuple[str, Any]], argv: list[str], message: str, no_work: list[str],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--extend FILE` used to be read only after the hour-long run: a mismatch or a corrupt file lost it."""
    earlier = tmp_path / "earlier.json"
    earlier.write_text('{"kinds": {"math": ' if make is None else json.dumps(make(**dict(changes))))
    with pytest.raises(SystemExit) as exc:
        script("corrector_ablation").main([*argv, "--extend", str(earlier), "--out", str(tmp_path / "out.json")])
    assert exc.value.code == 2 and no_work == []
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert "Traceback" not in err and len(errors) == 1 and "argument --extend:" in errors[0], err
    assert message in errors[0], err


def test_an_extend_file_of_the_same_settings_and_cpu_is_read_at_parse_time(tmp_path: Path) -> None:
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(_file_of_a_default_run()))
    args = script("corrector_ablation").parse_args(["--extend", str(earlier), "--out", str(tmp_path / "out.json")])
    assert args.earlier == _file_of_a_default_run()


def test_rows_of_two_cpus_are_not_merged_into_one_table() -> None:
    extended = script("corrector_ablation").extended
    earlier = {**_ablation_file(["old pruner"]), "machine": {"cpu": "CPU A"}}
    with pytest.raises(SystemExit, match="another CPU \\('CPU A' there, 'CPU B' here\\)"):
        extended(earlier, {**_ablation_file(["new pruner"]), "machine": {"cpu": "CPU B"}})


@pytest.mark.parametrize("same_file", [False, True])
@pytest.mark.parametrize("earlier_changes", [{"machine": {"cpu": "CPU A"}}, {"kinds": {"math": {}, "code": {}}}],
                         ids=["another CPU", "a file that breaks the merge"])
def test_a_failed_merge_writes_this_runs_own_rows_first(tmp_path: Path, same_file: bool,
                                                        earlier_changes: dict[str, Any]) -> None:
    """Whatever stops the merge, the run's measured rows are on disk before the script stops; an --out that is the
    --extend file itself is left as it was and the rows go beside it."""
    from types import SimpleNamespace

    earlier = {**_ablation_file(["old pruner"]), "machine": {"cpu": "CPU B"}, **earlier_changes}
    path = tmp_path / "ablation.json"
    path.write_text(json.dumps(earlier))
    report = {**_ablation_file(["new pruner"]), "machine": {"cpu": "CPU B"}}
    out = path if same_file else tmp_path / "out.json"
    args = SimpleNamespace(earlier=earlier, extend=path, out=out)
    with pytest.raises(SystemExit) as exc:
        script("corrector_ablation").merged(args, report)
    written = tmp_path / "ablation.unmerged.json" if same_file else out
    assert json.loads(written.read_text()) == report
    assert json.loads(path.read_text()) == earlier
    assert str(exc.value.code).startswith("error: argument --extend:") and f"written to {written}" in str(exc.value)


def test_a_table_measured_in_parts_is_published_only_by_the_part_that_completes_it(
        tmp_path: Path, no_work: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`--eval-json` publishes the whole table: it is refused before any work while the earlier parts (`--extend`)
    and this run's `--methods` and `--kinds` lack a row of the ablation, and accepted once they hold every one."""
    ablation = script("corrector_ablation")
    labels = [m[0] for m in ablation.ABLATION_METHODS]
    earlier = tmp_path / "parts.json"
    kinds = {k: {"cells": [{"method": m, "budget": b} for m in labels[:5] for b in (4, 8, 16)]} for k in ablation.KINDS}
    kinds["chat"]["cells"] = [c for c in kinds["chat"]["cells"] if (c["method"], c["budget"]) != (labels[0], 16)]
    earlier.write_text(json.dumps(_file_of_a_default_run(kinds=kinds)))
    evaluation = tmp_path / "eval.json"
    evaluation.write_text("{}")
    common = ["--extend", str(earlier), "--eval-json", str(evaluation), "--out", str(tmp_path / "out.json")]
    with pytest.raises(SystemExit) as exc:
        ablation.main(["--methods", ",".join(labels[5:-1]), *common])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and no_work == [] and "Traceback" not in err
    lacking = err.split("lack", 1)[1]
    assert "argument --eval-json:" in err and f"math: {labels[-1]}" in lacking and labels[1] not in lacking, err
    assert f"chat: {labels[0]}" in lacking and f"math: {labels[0]}" not in lacking  # chat's row at B = 16 is missing
    args = ablation.parse_args(["--methods", ",".join([labels[0], *labels[5:]]), *common])
    assert args.eval_json == evaluation
    assert ablation.missing_rows(args.earlier, args.methods, args.kinds, args.budgets) == []
    assert ablation.missing_rows(args.earlier, None, None, args.budgets) == []  # no --methods: the ablation's
    # a run of some kinds only, with no file of the others, cannot publish
    with pytest.raises(SystemExit) as exc:
        ablation.main(["--kinds", "math", "--eval-json", str(evaluation), "--out", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and no_work == [] and "code: " in err and "math: " not in err.split("lack", 1)[1]


def _part(kinds: tuple[str, ...], cpu: str, methods: list[str], *, quiet: bool = True) -> dict[str, Any]:
    """A corrector ablation file of ``kinds`` measured on ``cpu``."""
    report = {**_ablation_file(methods, quiet=quiet), "machine": {"cpu": cpu}}
    report["kinds"] = {kind: {"plain_loop_tokens_per_s": 15.0, "cells": report["kinds"]["math"]["cells"]}
                       for kind in kinds}
    return report


def test_a_table_measured_kind_by_kind_names_each_kinds_machine_and_is_judged_by_its_weakest_part() -> None:
    """Kinds measured on two machines join one file, each kind's rows from one; the file's protocol is the part
    that fails the protocol, and each kind's report carries its own part's machine and protocol."""
    from specframe.bench.parts import kind_report, parts, split_by_kind

    extended = script("corrector_ablation").extended
    methods = ["DFlash chain", "DFlash + DDTree heap"]
    first = _part(("math", "code"), "CPU A", methods)
    second = _part(("chat", "translation"), "CPU B", methods, quiet=False)
    out = extended(first, second)
    assert list(out["kinds"]) == ["math", "code", "chat", "translation"] and split_by_kind(out)
    assert [(p.kinds, p.cpu) for p in parts(out)] == [(("math", "code"), "CPU A"), (("chat", "translation"), "CPU B")]
    assert out["protocol"]["quiet"]["during_max"] == 2.0  # judged by the part that was not quiet
    assert kind_report(out, "math")["machine"]["cpu"] == "CPU A"
    assert kind_report(out, "math")["protocol"]["quiet"]["during_max"] == 1.1
    assert kind_report(out, "chat")["machine"]["cpu"] == "CPU B"
    assert not split_by_kind(first)  # one run: one status line for the file
    # rows of a kind both hold come from one CPU: math again on CPU B is refused; on CPU A it replaces the rows
    with pytest.raises(SystemExit, match="math \\(another CPU \\('CPU A' there, 'CPU B' here\\)\\)"):
        extended(out, _part(("math",), "CPU B", ["DFlash chain"]))
    again = extended(out, _part(("math",), "CPU A", ["lattice chain"]))
    assert [c["method"] for c in again["kinds"]["math"]["cells"]][-2:] == ["lattice chain", "lattice chain"]
    assert [p.kinds for p in parts(again)] == [("math", "code"), ("chat", "translation"), ("math",)]
