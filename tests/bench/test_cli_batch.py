"""`specframe run --batch-size` on the toy target: same texts as one by one, per-request refusal, drafter refusal."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Literal

import pytest

from specframe import ComponentSpec, hookimpl
from specframe.cli import run_cli
from specframe.testing.load_window import fix_machine_load
from specframe.testing.toy import ToyDrafter

from .toy_plugin import ToyDrafterConfig, toy_host, write_pipeline

PROMPTS = ["what is two and two", "hi", "name three colours of the rainbow please"]


def run_json(pipeline: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict, str]:
    args = ["run", str(pipeline), "--json", "--max-new-tokens", "9"]
    for p in PROMPTS:
        args += ["--prompt", p]
    code = run_cli([*args, *extra], host=toy_host())
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


def test_batched_run_prints_the_texts_of_one_by_one_decoding(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = write_pipeline(tmp_path / "toy.yaml")
    code, single, _ = run_json(pipeline, capsys)
    assert code == 0
    code, batched, _ = run_json(pipeline, capsys, "--batch-size", "2", "--compare-ar")
    assert code == 0
    assert [r["text"] for r in batched["results"]] == [r["text"] for r in single["results"]]
    assert [r["batch_size"] for r in batched["results"]] == [2, 2, 2]
    assert batched["identical_to_ar"] == [True, True, True]


@pytest.mark.parametrize("batch_size", ["1", "3"])
def test_a_prompt_past_the_context_is_refused_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     batch_size: str) -> None:
    pipeline = tmp_path / "toy.yaml"
    pipeline.write_text(write_pipeline(pipeline).read_text().replace("seed: 3}", "seed: 3, max_length: 30}"))
    code, report, err = run_json(pipeline, capsys, "--batch-size", batch_size)
    assert code == 2
    assert [r["request"] for r in report["refused"]] == [0, 2]  # with the chat template: 38 and 59 tokens
    assert [r["request"] for r in report["results"]] == [1]  # the other request's result is kept, with its index
    assert "context is 30" in report["refused"][0]["error"]
    assert "2 of 3 requests refused" in err and "--prompt #3:" in err and "Traceback" not in err


def test_refusals_name_the_prompts_file_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = tmp_path / "toy.yaml"
    pipeline.write_text(write_pipeline(pipeline).read_text().replace("seed: 3}", "seed: 3, max_length: 30}"))
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("hi\n\n\n" + PROMPTS[2] + "\nhello\n")  # blank lines before the long prompt
    code = run_cli(["run", str(pipeline), "--json", "--max-new-tokens", "4", "--prompts-file", str(prompts)],
                   host=toy_host())
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 2
    assert [(r["request"], r["source"]) for r in report["refused"]] == [(1, f"{prompts}:4")]
    assert [r["source"] for r in report["results"]] == [f"{prompts}:1", f"{prompts}:5"]
    assert f"{prompts}:4:" in captured.err


class PlainToyConfig(ToyDrafterConfig):
    type: Literal["plain_toy"] = "plain_toy"  # type: ignore[assignment]


class PlainToyDrafter(ToyDrafter):
    supports_batch = False  # a third-party drafter that never declared batch support


def test_an_undeclared_drafter_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = toy_host()
    mod = types.ModuleType("undeclared")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="plain_toy", config=PlainToyConfig, summary="undeclared",
                            factory=lambda cfg, ctx: PlainToyDrafter(ctx.target))

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    host.register(mod, "undeclared")
    pipeline = tmp_path / "toy.yaml"
    pipeline.write_text(write_pipeline(pipeline).read_text().replace("type: toy,", "type: plain_toy,"))
    assert run_cli(["run", str(pipeline), "--prompt", "a", "--prompt", "b", "--batch-size", "2"], host=host) == 2
    err = capsys.readouterr().err
    assert "drafter 'plain_toy'" in err and "batch support" in err and "Traceback" not in err


def test_streamed_pieces_of_each_request_add_up_to_its_text(tmp_path: Path) -> None:
    from specframe.pipeline import Pipeline

    pipe = Pipeline.from_yaml(write_pipeline(tmp_path / "toy.yaml"), host=toy_host())
    pieces: dict[int, str] = {}
    results = pipe.generate_batch(PROMPTS, 9, batch_size=2,
                                  stream=lambda i, text: pieces.__setitem__(i, pieces.get(i, "") + text))
    assert pieces == {i: r.text for i, r in enumerate(results)} and all(pieces.values())


@pytest.mark.parametrize("batch_size", ["1", "2"])
def test_a_refused_prompt_keeps_the_others_results_and_names_its_file_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], batch_size: str) -> None:
    pipeline = tmp_path / "toy.yaml"
    pipeline.write_text(write_pipeline(pipeline).read_text().replace("seed: 3}", "seed: 3, max_length: 40}"))
    prompts = tmp_path / "p.txt"
    prompts.write_text("hi\n\n" + "x" * 60 + "\n\nwhat\n")  # prompts on lines 1, 3 (too long) and 5
    code = run_cli(["run", str(pipeline), "--json", "--max-new-tokens", "5", "--prompts-file", str(prompts),
                    "--batch-size", batch_size], host=toy_host())
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 2 and "Traceback" not in captured.err
    assert [(r["request"], r["source"]) for r in report["results"]] == [(0, f"{prompts}:1"), (2, f"{prompts}:5")]
    assert all(r["text"] for r in report["results"])
    assert [(r["request"], r["source"]) for r in report["refused"]] == [(1, f"{prompts}:3")]
    err = " ".join(captured.err.split())
    assert "1 of 3 requests refused" in err and f"request 1: {prompts}:3: the prompt has" in err


@pytest.mark.parametrize("batch_size", ["1", "2"])
def test_budget_auto_with_an_empty_cache_measures_under_a_long_first_prompt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        batch_size: str) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    fix_machine_load(monkeypatch)  # a quiet machine: the measured curve is cached
    pipeline = tmp_path / "toy.yaml"
    pipeline.write_text(write_pipeline(pipeline).read_text().replace("seed: 3}", "seed: 3, max_length: 140}")
                        .replace("budget: 8", "budget: auto"))
    code = run_cli(["run", str(pipeline), "--json", "--max-new-tokens", "4", "--prompt", "y" * 110,
                    "--prompt", "hi", "--batch-size", batch_size], host=toy_host())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert [r["request"] for r in json.loads(captured.out)["results"]] == [0, 1]
    assert list((tmp_path / "cache" / "profiles").glob("*.json"))  # the measured curve was cached
