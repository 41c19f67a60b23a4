"""`specframe run` with every prompt refused, and results of a batch as they finish (issue 28, class 6).

Every prompt refused (one prompt past the context, with or without ``--json``, ``--compare-ar``, ``budget: auto``,
a batch) ended in ``ZeroDivisionError``; it now prints the refusals and exits with status 2. With ``--batch-size``
above 1 nothing was printed until every prompt was done; each text is now printed when its request ends.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specframe.decode.request import RefusedRequest
from specframe.metrics.records import GenerationResult

from .probe import assert_clean, command, toy_pipe, toy_pipeline

LONG = "x" * 60  # 78 tokens with the chat template: past a context of 30


@pytest.mark.parametrize("extra", [[], ["--json"], ["--compare-ar"], ["--set", "budget=auto"],
                                   ["--batch-size", "3"], ["--json", "--batch-size", "2", "--compare-ar"],
                                   ["--no-stream", "--set", "budget=auto", "--compare-ar"]],
                         ids=["plain", "json", "compare-ar", "auto", "batch", "json-batch-compare", "no-stream-auto"])
def test_every_prompt_refused_prints_the_refusals_and_exits_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, extra: list[str]) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    pipeline = toy_pipeline(tmp_path / "toy.yaml", target="max_length: 30")
    outcome = command(capsys, "run", str(pipeline), "--prompt", LONG, "--prompt", LONG + "y", *extra)
    assert_clean(outcome, code=2, says=("2 of 2 requests refused", "request 0: --prompt #1: the prompt has 78 tokens",
                                        "context is 30", "no request was decoded"))
    if "--json" in extra:
        report = json.loads(outcome.out)
        assert report["results"] == [] and [r["request"] for r in report["refused"]] == [0, 1]
        assert "request 1 (--prompt #2): refused" in outcome.err  # progress, as each request is known


def test_a_batch_prints_each_text_when_its_request_ends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Request 1 has room for 12 tokens, request 0 for 30: request 1's text is printed first, as soon as it ends."""
    pipeline = toy_pipeline(tmp_path / "toy.yaml", target="max_length: 60")
    outcome = command(capsys, "run", str(pipeline), "--prompt", "hi", "--prompt", "x" * 30, "--batch-size", "2",
                      "--max-new-tokens", "30")
    assert_clean(outcome, code=0)
    first, second = outcome.out.index("request 1 (--prompt #2)"), outcome.out.index("request 0 (--prompt #1)")
    assert first < second


def test_on_finish_hands_out_each_outcome_as_it_is_known(tmp_path: Path) -> None:
    pipe = toy_pipe(tmp_path, target="max_length: 60")
    seen: list[tuple[int, str]] = []
    outcomes = pipe.generate_batch(["hi", "x" * 30, "y" * 60], 30, batch_size=2,
                                   on_finish=lambda i, o: seen.append((i, type(o).__name__)))
    assert seen == [(2, "RefusedRequest"), (1, "GenerationResult"), (0, "GenerationResult")]
    assert isinstance(outcomes[2], RefusedRequest) and all(isinstance(o, GenerationResult) for o in outcomes[:2])
    assert [len(o.tokens) for o in outcomes[:2]] == [30, 12]


def test_json_with_many_prompts_reports_progress_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = toy_pipeline(tmp_path / "toy.yaml", target="max_length: 30")
    outcome = command(capsys, "run", str(pipeline), "--json", "--prompt", "hi", "--prompt", LONG, "--prompt", "ho",
                      "--batch-size", "2", "--max-new-tokens", "4")
    assert_clean(outcome, code=2, says=("1 of 3 requests refused", "the other requests were decoded"))
    assert [r["request"] for r in json.loads(outcome.out)["results"]] == [0, 2]
    for line in ("request 1 (--prompt #2): refused", "request 0 (--prompt #1): 4 tokens (length)",
                 "request 2 (--prompt #3): 4 tokens (length)"):
        assert line in outcome.err
