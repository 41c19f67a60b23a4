"""Every command the README or a Makefile target advertises runs in ``make test`` at smoke size, or is named as
run elsewhere.

:data:`COVERED` names, for each advertised command, the test that runs it; :data:`RUN_ELSEWHERE` names the
commands the suite cannot run (they build the environment the suite runs in, or vLLM's), with where they do run.
``test_every_advertised_command_is_covered`` reads the README's code blocks and command table and the Makefile's
targets, and fails on a command in neither (a new one must come with its smoke test) or on a test that does not
exist. No test here compares a Makefile recipe or ``.ci/run`` with a copy of its text: that would test the text,
not the command. The commands without a test elsewhere run here: ``bash benchmarks/rerun_docs_tables.sh`` (its
every command, smoke-sized), ``make bench-trees``' recipe, ``specframe profile`` and ``specframe demo --quick``.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from specframe.cli import run_cli
from tests.benchmarks.conftest import needs_sets

ROOT = Path(__file__).resolve().parents[2]

#: Advertised command -> "test file::test function" that runs it (smoke-sized where it measures).
COVERED: dict[str, str] = {
    "make demo": "tests/benchmarks/test_commands.py::test_specframe_demo_quick",
    "make docs": "tests/docs/test_docs_site.py::test_mkdocs_build_strict",
    "make bench-trees": "tests/benchmarks/test_commands.py::test_make_bench_trees_recipe",
    "specframe components": "tests/core/test_cli.py::test_components_json_lists_every_stage_kind",
    "specframe plugins": "tests/core/test_cli.py::test_plugins_json_shows_first_party_distributions_with_versions",
    "specframe schema": "tests/core/test_cli.py::test_schema_includes_plugin_components",
    "specframe validate": "tests/core/test_cli.py::test_example_pipelines_validate",
    "specframe run": "plugins/specframe-smollm2/tests/test_examples_compare_ar.py::"
                     "test_compare_ar_runs_on_every_example",
    "specframe bench": "tests/benchmarks/test_commands.py::test_rerun_docs_tables_smoke",
    "specframe report": "tests/benchmarks/test_commands.py::test_rerun_docs_tables_smoke",
    "specframe profile": "tests/benchmarks/test_commands.py::test_specframe_profile",
    "specframe profile-acceptance":
        "tests/bench/test_profile_acceptance.py::test_the_profile_counts_the_rounds_of_the_splits_prompts",
    "specframe simulate": "tests/bench/test_simulate.py::test_the_command_checks_its_inputs_and_prints_a_table",
    "specframe datasets": "tests/bench/test_bench_e2e.py::test_datasets_command_lists_where_each_set_is_found",
    "specframe setup-target": "tests/benchmarks/test_commands.py::test_specframe_setup_target_verifies",
    "specframe train": "tests/benchmarks/test_smoke.py::test_smollm2_recipe_ablations",  # `specframe train` runs
    "specframe vocab-subset": "plugins/specframe-smollm2/tests/test_vocab_subset.py::"
                              "test_the_command_writes_each_mapping_and_the_coverage",
    "specframe demo": "tests/benchmarks/test_commands.py::test_specframe_demo_quick",
    "torchrun -m specframe bench": "tests/bench/test_bench_distributed.py::"
                                   "test_two_gloo_ranks_equal_one_process_and_resume",
    "torchrun -m specframe train": "plugins/specframe-smollm2/tests/test_training_distributed.py::"
                                   "test_two_gloo_ranks_follow_the_single_process_loss_curve",
    "bash benchmarks/rerun_docs_tables.sh": "tests/benchmarks/test_commands.py::test_rerun_docs_tables_smoke",
    **{f"benchmarks/{name}.py": f"tests/benchmarks/test_smoke.py::test_{name}"
       for name in ("auto_budget", "batch_decoding", "batched_drafting", "bf16_exactness", "draft_vocab",
                    "linear_kernels", "pctree_shapes", "smollm2_eval", "smollm2_heldout", "smollm2_recipe_ablations",
                    "tree_construction", "loop_overhead", "corrector_ablation", "sibling_acceptance",
                    "simulator_validation")},
    "benchmarks/accelerator_check.py": "tests/benchmarks/test_smoke.py::test_accelerator_check_on_cpu",
    "specframe vllm-export": "plugins/specframe-vllm/tests/test_export.py::test_cli",
}

#: Advertised commands the suite does not run, and where they run.
RUN_ELSEWHERE: dict[str, str] = {
    "make setup": ".ci/run: `make test` builds the environment first",
    "make target": ".ci/run: `make test` converts the target first (its command: test_specframe_setup_target_verifies)",
    "make test": ".ci/run (ruff, mypy and this suite)",
    "make lint": ".ci/run: `make test` runs the same ruff and mypy",
    "make clean": "nowhere: it deletes the environment the suite runs in",
    "make vllm-setup": ".ci/run: `make vllm-check` builds vLLM's environment first",
    "make vllm-check": ".ci/run, after `make test` (minutes, vLLM's own environment)",
}


def advertised() -> set[str]:
    """The commands of the README (code blocks and the command table) and the Makefile's targets, normalised to
    ``make X``, ``specframe X``, ``torchrun -m specframe X``, ``benchmarks/X.py`` and ``bash benchmarks/X.sh``."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found: set[str] = set()
    found |= {f"make {t}" for t in re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.M)}
    found |= {f"make {t}" for t in re.findall(r"\bmake ([a-z-]+)", readme) if t not in ("sure",)}
    found |= {f"specframe {c}" for c in re.findall(r"`specframe ([a-z-]+)", readme)}
    found |= {f"specframe {c}" for c in re.findall(r"\.venv/bin/specframe ([a-z-]+)", readme)}
    found |= {f"torchrun -m specframe {c}" for c in re.findall(r"torchrun [^`\n]*-m specframe ([a-z-]+)", readme)}
    found |= set(re.findall(r"benchmarks/[a-z0-9_]+\.py", readme))
    found |= {f"bash {s}" for s in re.findall(r"bash (benchmarks/[a-z0-9_]+\.sh)", readme)}
    return found


def test_every_advertised_command_is_covered() -> None:
    commands = advertised()
    assert {"make bench-trees", "make docs", "benchmarks/accelerator_check.py", "specframe profile"} <= commands
    assert not set(COVERED) & set(RUN_ELSEWHERE)
    missing = sorted(commands - set(COVERED) - set(RUN_ELSEWHERE))
    assert not missing, f"advertised without a smoke test in COVERED (or a place in RUN_ELSEWHERE): {missing}"
    scripts = {f"benchmarks/{p.name}" for p in (ROOT / "benchmarks").glob("[a-z]*.py")} - {"benchmarks/prompt_sets.py"}
    assert scripts <= set(COVERED), f"benchmark scripts without a smoke test: {sorted(scripts - set(COVERED))}"
    for command, test in COVERED.items():
        path, _, name = test.partition("::")
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(encoding="utf-8"), re.M), (command, test)


def makefile_recipe(target: str) -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        out.append(line.strip())
    return out


def test_make_bench_trees_recipe(tmp_path: Path) -> None:
    """`make bench-trees` runs tree_construction.py (its recipe, plus --smoke and a private --out)."""
    (recipe,) = makefile_recipe("bench-trees")
    words = shlex.split(recipe)
    assert words[:2] == ["$(PY)", "benchmarks/tree_construction.py"]
    out = tmp_path / "trees.json"
    assert importlib.import_module("tree_construction").main([*words[2:], "--smoke", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["smoke"]


def rerun_commands(out: Path, *names: str) -> list[list[str]]:
    from prompt_sets import data_dirs

    found = [d for d in data_dirs(None) if d.is_dir()]
    env = {**os.environ, "SMOKE": "1", "DRY_RUN": "1", "OUT": str(out), **({"DATA": str(found[0])} if found else {})}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "rerun_docs_tables.sh"), *names], env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    return [shlex.split(line) for line in proc.stdout.splitlines() if line.strip()]


def test_rerun_docs_tables_lists_every_table_and_refuses_smoke_into_docs(tmp_path: Path) -> None:
    full = rerun_commands(tmp_path)
    assert [c[2] for c in full if c[:2] == [".venv/bin/specframe", "report"]] == [
        str(tmp_path / "results" / f"{n}.jsonl") for n in ("strategies", "budget", "width", "beta", "candidates",
                                                           "ngram-smollm2")]
    assert all("--smoke" in c for c in full if c[0] == ".venv/bin/python")
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "rerun_docs_tables.sh")], env={**env, "SMOKE": "1"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "needs OUT=DIR" in proc.stderr


@pytest.mark.real_model
@pytest.mark.slow
def test_rerun_docs_tables_smoke(smoke_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command of `bash benchmarks/rerun_docs_tables.sh` (SMOKE=1: 1 prompt, 1 token, no warm-up), run in
    this process from the repository root, as the script runs them. The benchmark script's command line is parsed
    here (its smoke run is test_smoke.py::test_auto_budget)."""
    needs_sets("gsm8k", "humaneval", "spec_bench/translation")
    monkeypatch.chdir(ROOT)
    for command in rerun_commands(tmp_path, "strategies", "budget", "width", "beta", "candidates", "ngram-smollm2",
                                  "auto-budget", "batch-decoding", "simulator-validation", "bf16-exactness"):
        if command[0] == ".venv/bin/specframe":
            assert run_cli(command[1:]) == 0, command
        else:
            assert command[0] == ".venv/bin/python" and command[1].startswith("benchmarks/"), command
            module = importlib.import_module(Path(command[1]).stem)
            assert module.parse_args(command[2:]).smoke, command
    for name in ("strategies", "budget", "width", "beta", "candidates", "ngram-smollm2"):
        assert (tmp_path / name / "report.md").is_file(), name


@pytest.mark.real_model
def test_specframe_setup_target_verifies(smoke_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`make target`'s `specframe setup-target` on a converted cache: the checksums are verified, nothing is
    converted again."""
    assert run_cli(["setup-target"]) == 0
    assert "already converted and verified" in capsys.readouterr().err


@pytest.mark.real_model
def test_specframe_profile(smoke_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's `specframe profile examples/smollm2/dartree-pruned.yaml -o runs/profile`, one rep."""
    status = run_cli(["profile", str(ROOT / "examples" / "smollm2" / "dartree-pruned.yaml"), "--reps", "1",
                      "-o", str(tmp_path / "profile"), "--json"])
    assert status == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "profile" / "profile.json").read_text())["verify_ms"]


@pytest.mark.real_model
def test_specframe_demo_quick(smoke_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`make demo`'s `specframe demo`, quick and short: the table, and the two gains quoted apart."""
    status = run_cli(["demo", "--quick", "--max-new-tokens", "4", "--threads", "1", "--json-out",
                      str(tmp_path / "demo.json")])
    out = capsys.readouterr().out
    assert status == 0
    rows = json.loads((tmp_path / "demo.json").read_text())["rows"]
    assert all(r["exact"] for r in rows)
    assert "specframe's plain loop vs transformers' generate()" in out
    assert "speculation vs specframe's plain loop" in out
