"""Hostile result records in `specframe report` (issue 28, class 7).

A record must agree with itself (`specframe.bench.record_schema`: bounded times, ``new_tokens`` = the tokens it
holds, stage times inside the turn's time, ...), or the file is refused naming the line and field; and a record is
paired only with a baseline that ran under the same sampling settings on the same machine
(`specframe.report.summary`), the others set aside with a summary of why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specframe.report import SummaryOptions, summarize
from tests.bench.test_report import fixture_records

from .probe import assert_clean, command

AMD = {"cpu": "AMD EPYC 9B45", "cores": 2, "gpu": None}
INTEL = {"cpu": "Intel(R) Xeon(R) Platinum 8581C", "cores": 8, "gpu": None}


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def edited(change: Any) -> list[dict[str, Any]]:
    records = fixture_records()
    change(records[2])  # method m, gsm8k question 1, the file's line 3
    return records


@pytest.mark.parametrize("change, says", [
    (lambda r: r.update(total_ns=10**400), "field 'total_ns' is 1000000000"),
    (lambda r: r.update(prefill_ns=10**30), "field 'prefill_ns'"),
    (lambda r: r["stage_ns"].update(draft=10**400), "field 'stage_ns.draft'"),
    (lambda r: r["choices"][0].update(new_tokens=[9000]), "new_tokens says 9000 tokens but the record holds 9"),
    (lambda r: r["stage_ns"].update(draft=r["total_ns"] * 50), "stage times add up to"),
    (lambda r: r.update(max_new_tokens=3), "more than max_new_tokens (3)"),
    (lambda r: r["choices"][0].update(accept_lengths=[40, 1, 1, 1]), "the rounds commit 43 tokens"),
    (lambda r: r.update(sampling={"temperature": 0.7, "top_k": 0, "top_p": 1.0}), "is not the record's temperature"),
    (lambda r: r.update(machine={"cpu": 5}), "field 'machine.cpu'"),
    (lambda r: r.update(machine_load={"contended": "yes"}), "field 'machine_load.contended'"),
], ids=["total-overflow", "prefill-huge", "stage-overflow", "new-tokens", "stages-beyond-total", "over-max-new",
        "commits-beyond-tokens", "sampling-disagrees", "machine-type", "load-type"])
def test_a_record_that_contradicts_itself_is_refused_naming_line_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, says: str) -> None:
    path = write(tmp_path / "r.jsonl", edited(change))
    outcome = command(capsys, "report", str(path), "--bootstrap", "100")
    assert_clean(outcome, code=2, says=(f"{path}:3", says))
    assert len(outcome.err) < 1200  # one screen, not a 400-digit number


def test_a_sampled_method_is_not_timed_against_a_greedy_baseline(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    records = fixture_records()
    for r in records:
        if r["method"] == "m":
            r["temperature"] = 0.7
    path = write(tmp_path / "r.jsonl", records)
    outcome = command(capsys, "report", str(path), "--bootstrap", "100", "--json")
    assert_clean(outcome, code=0, says=("set aside: m: 3 record(s) not paired with the baseline: ran T = 0.7, "
                                        "its partner greedy",))
    rows = json.loads(outcome.out)
    m = next(r for r in rows if r["method"] == "m" and r["dataset"] == "gsm8k")
    assert m["speedup_aggregate"] is None and m["pairs"] == 0
    sampled_baseline = [{**r, "method": "ar-sampled", "temperature": 0.7} for r in records if r["method"] == "ar"]
    summary = summarize([*records, *sampled_baseline], SummaryOptions(resamples=50))  # two baselines, T = 0 and 0.7
    assert summary.cell("m", "gsm8k").speedup_aggregate.n == 2 and not [
        s for s in summary.set_aside if s.method == "m"]  # paired with the sampled baseline, like with like


def test_records_of_another_machine_are_set_aside_and_older_records_still_pair(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    older = fixture_records()  # written before records named their machine: they pair among themselves
    summary = summarize(older, SummaryOptions(resamples=50))
    assert summary.cell("m", "gsm8k").speedup_aggregate.n == 2 and summary.set_aside == []
    mixed = fixture_records()
    for r in mixed:
        r["machine"] = INTEL if r["method"] == "m" else AMD
    path = write(tmp_path / "r.jsonl", mixed)
    outcome = command(capsys, "report", str(path), "--bootstrap", "100")
    assert_clean(outcome, code=0, says=("set aside: m: 3 record(s) not paired with the baseline: ran on Intel(R) "
                                        "Xeon(R) Platinum 8581C (8 cores), its partner on AMD EPYC 9B45 (2 cores)",
                                        "## Set aside"))
    half = fixture_records()
    for r in half:
        if r["method"] == "ar":
            r["machine"] = AMD
    summary = summarize(half, SummaryOptions(resamples=50))
    assert summary.cell("m", "gsm8k").speedup_aggregate.n == 0
    assert any("unnamed machine" in s.reason for s in summary.set_aside)


def test_bench_records_carry_the_machine_and_the_sampling_settings() -> None:
    """What the pairing reads is written by `bench` (RunInfo -> build_record)."""
    from specframe.bench.record import RunInfo, build_record
    from specframe.bench.record_schema import record_problem
    from specframe.datasets.base import Sample
    from specframe.metrics.machine_info import machine_identity
    from specframe.metrics.records import GenerationResult

    info = RunInfo(method="m", base_method="m", baseline=False, config_hash="c", target_hash="t", temperature=0.7,
                   seed=0, max_new_tokens=8, top_k=20, top_p=0.9, machine=machine_identity())
    result = GenerationResult(tokens=[1, 2], text="ab", prompt_len=3, rounds=[], prefill_ns=5, total_ns=10,
                              stop_reason="length")
    out = build_record(info, Sample(dataset="gsm8k", question_id=1, category="math", turns=("q",)), 0, result, [10],
                       "here")
    assert out["sampling"] == {"temperature": 0.7, "top_k": 20, "top_p": 0.9} and out["machine"]["cpu"]
    assert out["machine"]["cores"] >= 1 and record_problem(out) is None


def test_implausible_times_are_flagged_in_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report` took a baseline's `total_ns` of 1e15 (inside the schema's bound) and printed an 8e8x speedup with
    intervals and no warning. Records slower than 1e-3 tokens/s or an hour per round are flagged (kept)."""
    records = fixture_records()
    for r in records:
        if r["method"] == "ar":
            r["total_ns"] = 10**15
    path = write(tmp_path / "r.jsonl", records)
    outcome = command(capsys, "report", str(path), "--bootstrap", "100")
    assert_clean(outcome, code=0, says=("warning: ar: 3 record(s) with implausible times", "## Implausible records"))
    quiet = command(capsys, "report", str(write(tmp_path / "ok.jsonl", fixture_records())), "--bootstrap", "100")
    assert_clean(quiet, code=0)
    assert "implausible" not in quiet.text
