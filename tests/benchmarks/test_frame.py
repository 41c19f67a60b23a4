"""The benchmark scripts' argument frame (``benchmarks/_frame.py``): typed counts and lists, outputs and inputs
checked at parse time, one-line usage errors naming the flag."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest
from _frame import (
    REPO,
    BenchParser,
    RunProtocol,
    count,
    counts,
    finite,
    in_repository,
    name_list,
    resolve_input,
    run_script,
)

from specframe.bench.published import verdict
from specframe.bench.quiet import QuietRecord
from specframe.errors import ConfigError


def parser() -> BenchParser:
    ap = BenchParser(prog="bench")
    ap.add_argument("--n", type=count(), default=2)
    ap.add_argument("--warmup", type=count(0), default=0)
    ap.add_argument("--batch-sizes", type=counts(), default=[1])
    ap.add_argument("--budgets", type=counts(allow_empty=True), default=[16])
    ap.add_argument("--sets", type=name_list(["gsm8k", "mt_bench"]), default=["gsm8k"])
    ap.add_threads(1)
    ap.add_protocol()
    ap.add_input("--data", None, kind="dir")
    ap.add_output("out/results.json")
    return ap


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The usage error of ``argv``: exit status 2, one ``error:`` line naming the problem."""
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


@pytest.mark.parametrize("argv, flag", [
    (["--n", "-1"], "--n"), (["--n", "0"], "--n"), (["--n", "two"], "--n"), (["--n", "1.5"], "--n"),
    (["--warmup", "-1"], "--warmup"),
    (["--batch-sizes", "0"], "--batch-sizes"), (["--batch-sizes", "1,-2"], "--batch-sizes"),
    (["--batch-sizes", ""], "--batch-sizes"), (["--batch-sizes", "1,x"], "--batch-sizes"),
    (["--budgets", "0"], "--budgets"),
    (["--threads", "-3"], "--threads"),
    (["--wait-quiet", "nan"], "--wait-quiet"), (["--wait-quiet", "-1"], "--wait-quiet"),
    (["--wait-quiet", "inf"], "--wait-quiet"),
    (["--sets", "gsm9k"], "--sets"),
])
def test_bad_counts_lists_and_names_are_usage_errors_naming_the_flag(argv: list[str], flag: str,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = refused(argv, capsys)
    assert f"argument {flag}:" in line


def test_good_values_parse_to_numbers_and_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = parser().parse_args(["--n", "3", "--batch-sizes", "1, 2,4", "--budgets", "", "--threads", "0",
                                "--sets", "mt_bench,gsm8k", "--wait-quiet", "30"])
    assert (args.n, args.batch_sizes, args.budgets, args.threads, args.sets, args.wait_quiet) == \
        (3, [1, 2, 4], [], 0, ["mt_bench", "gsm8k"], 30.0)
    assert args.out == tmp_path / "out" / "results.json" and args.out.parent.is_dir()


def test_an_output_that_is_a_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["--out", str(tmp_path)], capsys)
    assert "argument --out:" in line and "is a directory" in line


def test_an_output_under_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "results.json"
    blocker.write_text("{}")
    line = refused(["--out", str(blocker / "more.json")], capsys)
    assert "argument --out:" in line and "not a directory" in line


def test_an_output_where_no_file_can_be_created_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["--out", "/proc/specframe-results.json"], capsys)
    assert "argument --out:" in line


def test_an_output_directory_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ap = BenchParser(prog="bench")
    ap.add_output("runs/x", kind="dir")
    blocker = tmp_path / "x"
    blocker.write_text("")
    with pytest.raises(SystemExit):
        ap.parse_args(["--out", str(blocker)])
    assert "is a file; give a directory" in capsys.readouterr().err


def test_a_missing_input_is_refused_naming_both_places_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    line = refused(["--data", "no-such-dir"], capsys)
    assert "argument --data:" in line and "does not exist" in line and str(REPO) in line


def test_relative_inputs_are_found_from_another_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command copied from the README (``--data ../shared/data``, ``recipes/...``) works from any directory:
    a relative path missing from the current directory is taken from the repository."""
    monkeypatch.chdir(tmp_path)
    assert resolve_input(Path("recipes/smollm2/drafter.yaml"), "file")[0] == REPO / "recipes/smollm2/drafter.yaml"
    args = parser().parse_args(["--data", "examples"])
    assert args.data == REPO / "examples"
    (tmp_path / "examples").mkdir()  # the current directory comes first
    assert parser().parse_args(["--data", "examples"]).data == tmp_path / "examples"
    assert resolve_input(Path("examples/smollm2/plain.yaml"), "dir")[0] is None  # a file where a directory is due


def test_in_repository_runs_from_the_repository_and_restores_the_directory(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with in_repository() as root:
        assert Path.cwd() == root == REPO
    assert Path.cwd() == tmp_path
    with pytest.raises(RuntimeError), in_repository():
        raise RuntimeError("boom")
    assert Path.cwd() == tmp_path


def test_run_script_turns_a_specframe_error_into_one_screen(capsys: pytest.CaptureFixture[str]) -> None:
    def main() -> int:
        raise ConfigError("recipe.yaml: invalid recipe: unknown field 'stpes'", hint="fields are ...")

    assert run_script(main) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: recipe.yaml") and "hint: fields are" in err and "Traceback" not in err
    assert run_script(lambda: 0) == 0


def test_finite_and_count_types_name_their_bounds() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=">= 2, got 1"):
        count(2)("1")
    with pytest.raises(argparse.ArgumentTypeError, match="finite"):
        finite()("inf")
    assert finite()("0") == 0.0 and os.fspath(REPO) == os.fspath(Path(__file__).resolve().parents[2])


class _Sampler:
    """A load sampler whose record is given (the steadiness and load figures of a finished run)."""

    def __init__(self, **quiet: Any) -> None:
        self.quiet = QuietRecord(threads=1, start=0.1, during_max=1.1, during_mean=1.0, samples=40, other_cpus=0.0,
                                 wall_s=600.0, **quiet)

    def record(self) -> QuietRecord:
        return self.quiet


STEADY = {"probes_ms": [9.0, 9.2], "reference_ms": [1500.0, 1540.0], "reference": "the plain loop"}


@pytest.mark.parametrize(("split", "prompts", "quiet", "published"), [
    ("report", 20, STEADY, True),
    ("report", 20, {**STEADY, "reference_ms": [1500.0, 1900.0]}, False),  # decoding slowed 27 %: not steady
    ("report", 20, {"probes_ms": [9.0, 9.2]}, False),  # the fixed probe alone: not shown steady
    ("report", 19, STEADY, False),  # too few prompts per set
    ("tune", 20, STEADY, False),  # developed on, never published
    (None, 20, STEADY, False),  # a per-set report of no split: not held out
    (None, None, STEADY, True),  # a file of no prompt sets (the loop overhead): the machine is what counts
    (None, None, {"probes_ms": [9.0, 9.2]}, False),
])
def test_the_recorded_published_flag_is_the_docs_verdict(split: str | None, prompts: int | None,
                                                          quiet: dict[str, Any], published: bool) -> None:
    """The ``published`` a result file records is what the docs' verdict says of it: the load, the steadiness (a
    reference that drifted more than 15 % fails), the split and the prompt count all count, not the load alone; and
    a run that neither froze its ``budget: auto`` controllers nor declared it has none is never published."""
    args = argparse.Namespace(split=split, smoke=False)
    run = RunProtocol(args, _Sampler(**quiet), {"path": "/tmp/x"})
    record = run.record(prompts_per_set=prompts, controller={"memory": "none: fixed budgets"})
    assert record["published"] is published
    assert verdict({"protocol": record}, per_set=prompts is not None).published is published
    assert run.record(prompts_per_set=prompts)["published"] is False  # controllers never frozen


def test_a_block_is_measured_again_while_its_machine_moves_and_kept_at_the_last_try() -> None:
    """``RunProtocol.blocks``: a try whose reference timings disagree by more than 15 % is dropped and the block
    decoded again after a fresh opening timing (one outlying timing costs one try, not two); after the last try
    the block is kept whatever it says (and the run then fails the steadiness rule)."""
    from specframe.bench.quiet import LoadSampler, judge
    from specframe.bench.steadiness import BLOCK_TRIES

    rising = [2400.0 * 1.3 ** k for k in range(2 * BLOCK_TRIES)]  # +30 % per timing: no try of it holds
    timings = iter([1000.0, 1000.0, 1010.0, 1400.0, 1005.0, 1012.0, *rising])
    with LoadSampler(1, start=0.1, every_s=0.01, read=lambda: 1.0, probe=lambda: 8.0) as sampler:
        run = RunProtocol(argparse.Namespace(split="report", smoke=False), sampler, {"path": "/x"})
        sampler.set_reference(lambda: next(timings), "a decode")
        run.interleave("one prompt")
        run.open_block()
        tries = []
        for _block in range(3):
            decoded = 0
            for attempt in run.blocks():
                decoded += 1
                attempt.close()
            tries.append(decoded)
        with pytest.raises(RuntimeError, match="closed"):
            for _attempt in run.blocks():
                pass
    assert tries == [1, 2, BLOCK_TRIES], tries  # 1010 held; the 1400 outlier, then 1005 -> 1012; never
    record = sampler.record().to_dict()
    last = 5 + 2 * (BLOCK_TRIES - 1)  # the third block's last try
    assert record["blocks"] == [1, 4, last] and record["retried"] == [2, *range(5, last, 2)], record
    assert not judge(record)[0] and f"block {last}" in judge(record)[1]
