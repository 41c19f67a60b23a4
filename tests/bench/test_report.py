"""`specframe report` from a hand-made result file whose every number is known."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from specframe.bench.results import ResultStore
from specframe.cli import run_cli
from specframe.report import ALL, Report, SummaryOptions, summarize
from specframe.report.tables import main_table, stage_table


def record(method: str, qid: int, accepted: list[int], seconds: float, *, dataset: str = "gsm8k",
           baseline: bool = False, sweep: dict[str, Any] | None = None, tokens: list[int] | None = None,
           reference: bool = False) -> dict:
    """A result line with ``len(accepted) + 1`` tokens (prefill token + one bonus per round, no trimming)."""
    committed = [a + 1 for a in accepted]
    n = 1 + sum(committed)
    round_ns = int(seconds * 0.8e9 / len(accepted))
    return {
        "question_id": qid, "category": dataset, "model_id": method,
        "choices": [{"index": 0, "turns": ["text"], "new_tokens": [n], "wall_time": [seconds],
                     "decoding_steps": [len(accepted)], "accept_lengths": committed}],
        "method": method, "dataset": dataset, "turn": 0, "baseline": baseline,
        "base_method": method.split("[")[0], "sweep": sweep or {}, "config_hash": method, "target_hash": "t",
        "seed": 0, "temperature": 0.0, "max_new_tokens": n, "prompt_tokens": 5,
        "tokens": tokens if tokens is not None else list(range(n)), "stop_reason": "length",
        "prefill_ns": int(seconds * 0.2e9), "total_ns": int(seconds * 1e9), "accepted": accepted,
        "tree_nodes": [4] * len(accepted) if not baseline else [0] * len(accepted),
        "stage_ns": {"draft": round_ns * len(accepted) // 2, "target": round_ns * len(accepted) // 2},
        **({"reference": True, "reference_kernels": "default kernels"} if reference else {}),
    }


def fixture_records() -> list[dict]:
    """AR: 9 tokens in 1 s and 2 s. Method m: 9 tokens in 0.5 s each (ratios 2 and 4), τ = 8 / 4 and 8 / 2.
    Sweep m2[budget=*]: τ rises with the budget. On math500 only the AR baseline and m ran (one question)."""
    return [
        record("ar", 1, [0] * 8, 1.0, baseline=True),
        record("ar", 2, [0] * 8, 2.0, baseline=True),
        record("m", 1, [3, 1, 0, 0], 0.5),
        record("m", 2, [3, 3], 0.5, tokens=[0, 1, 2, 3, 4, 5, 6, 7, 99]),  # differs from the baseline's output
        record("m2[budget=2]", 1, [1, 1, 1, 1], 0.5, sweep={"budget": 2}),
        record("m2[budget=8]", 1, [7], 0.5, sweep={"budget": 8}),
        record("ar", 1, [0] * 5, 1.0, baseline=True, dataset="math500"),
        record("m", 1, [4], 0.25, dataset="math500"),
    ]


def test_summary_numbers() -> None:
    summary = summarize(fixture_records(), SummaryOptions(resamples=200))
    assert [m.name for m in summary.methods] == ["ar", "m", "m2[budget=2]", "m2[budget=8]"]
    assert summary.datasets == ["gsm8k", "math500"] and summary.baseline_names == ["ar"]
    m = summary.cell("m", "gsm8k")
    assert m.tau_per_response == pytest.approx((8 / 4 + 8 / 2) / 2) and m.tau_pooled == pytest.approx(16 / 6)
    assert m.speedup_geomean.value == pytest.approx(math.sqrt(2 * 4))
    assert m.speedup_aggregate.value == pytest.approx((18 / 1.0) / (18 / 3.0))
    assert m.speedup_tpot == pytest.approx((0.8 / 8 + 1.6 / 8) / 2 / (0.4 / 8))
    assert m.identical == (1, 2)
    assert m.depth.unconditional == pytest.approx((4 / 6, 3 / 6, 3 / 6))
    ar = summary.cell("ar", ALL)
    assert ar.speedup_aggregate.value == 1.0 and ar.tau_pooled == 1.0 and ar.depth.unconditional == ()
    assert summary.cell("m", ALL).responses == 3 and summary.cell("m2[budget=2]", "math500") is None


def test_main_table_layout_and_average() -> None:
    summary = summarize(fixture_records(), SummaryOptions(resamples=200))
    header, rows = main_table(summary)
    assert header == ["method", "gsm8k", "math500", "average"]
    assert rows[0] == ["ar", "1.00× / 1.00", "1.00× / 1.00", "1.00× / 1.00"]
    m = rows[1]
    assert m[1] == "3.00× / 3.00" and m[2] == "4.00× / 5.00" and m[3] == "3.50× / 4.00"  # mean of the cells
    assert rows[2][2] == ""  # no run on that dataset
    header, rows = main_table(summary, speedup="geomean", tau="pooled")
    assert rows[1][1] == "2.83× / 2.67"


def test_stage_table_explains_speedup_by_tau_and_round_time() -> None:
    summary = summarize(fixture_records(), SummaryOptions(resamples=200))
    header, rows = stage_table(summary)
    assert header[:3] == ["method", "draft ms", "target ms"]
    ar_round = summary.cell("ar", ALL).round_seconds
    assert ar_round == pytest.approx(3.2 / 21)  # 0.8 of the time is in rounds, 21 rounds
    m = summary.cell("m", ALL)
    row = next(r for r in rows if r[0] == "m")
    assert row[-2] == f"{m.tau_pooled * ar_round / m.round_seconds:.2f}×"


@pytest.fixture
def fixture_file(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    with ResultStore(path) as store:
        for r in fixture_records():
            store.append(r)
    return path


def test_report_cli_writes_markdown_csv_and_plots(fixture_file: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert run_cli(["report", str(fixture_file), "--out-dir", str(out), "--bootstrap", "200"]) == 0
    markdown = capsys.readouterr().out
    assert "| m | 3.00× / 3.00 | 4.00× / 5.00 | 3.50× / 4.00 |" in markdown
    assert "## Paired speedup" in markdown and "| m | gsm8k | 2 | 3.00× [" in markdown
    assert "| m | 3.00× / 3.00 |" in (out / "report.md").read_text()
    rows = list(csv.DictReader((out / "summary.csv").open()))
    m_all = next(r for r in rows if r["method"] == "m" and r["dataset"] == "all")
    assert float(m_all["tau_pooled"]) == pytest.approx(21 / 7) and m_all["identical"] == "2"
    depth = list(csv.DictReader((out / "depth.csv").open()))
    assert {r["depth"] for r in depth if r["method"] == "m2[budget=8]"} == {str(d) for d in range(1, 8)}
    assert {r["stage"] for r in csv.DictReader((out / "stages.csv").open())} == {"draft", "target"}
    png, svg = out / "m2_budget.png", out / "m2_budget.svg"
    assert png.read_bytes().startswith(b"\x89PNG") and b"<svg" in svg.read_bytes()
    first_svg = svg.read_bytes()
    assert run_cli(["report", str(fixture_file), "--out-dir", str(out), "--bootstrap", "200", "--format", "csv"]) == 0
    assert svg.read_bytes() == first_svg  # deterministic plots


def test_report_json_and_errors(fixture_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["report", str(fixture_file), "--json", "--bootstrap", "200"]) == 0
    rows = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert any(r["method"] == "m" and r["dataset"] == "gsm8k" and r["pairs"] == 2 for r in rows)
    assert next(r for r in rows if r["method"] == "ar")["speedup_aggregate_low"] is None  # NaN -> null
    assert run_cli(["report", str(fixture_file), "--baseline", "nope"]) == 2
    assert "no records of baseline method 'nope'" in capsys.readouterr().err
    assert run_cli(["report", str(fixture_file), "--format", "html"]) == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert run_cli(["report", str(empty)]) == 2
    assert "no records" in capsys.readouterr().err


def test_report_markdown_without_baseline() -> None:
    records = [r for r in fixture_records() if not r["baseline"]]
    text = Report(summarize(records, SummaryOptions(resamples=200))).markdown()
    assert "Baseline: none" in text and "| m | — / 3.00 |" in text


def _load(contended: bool | None) -> dict:
    return {"loadavg_before": 1.0, "loadavg_after": 2.5, "other_cpu_s": 3.0 if contended else 0.0,
            "wall_s": 4.0, "cpus": 2, "contended": contended}


def test_cells_measured_under_contention_are_marked_with_a_footnote() -> None:
    records = fixture_records()
    records[3]["machine_load"] = _load(True)  # m, gsm8k question 2
    records[6]["machine_load"] = _load(True)  # the math500 baseline: m's math500 speedup leans on it
    records[0]["machine_load"] = _load(False)
    records[1]["machine_load"] = _load(None)  # unknown counts as quiet; other records predate the field
    summary = summarize(records, SummaryOptions(resamples=50))
    assert summary.cell("m", "gsm8k").contended == 1 and summary.cell("m", "math500").contended == 1
    assert summary.cell("ar", "gsm8k").contended == 0 and summary.cell("m2[budget=2]", "gsm8k").contended == 0
    _, rows = main_table(summary)
    assert rows[1] == ["m", "3.00× / 3.00†", "4.00× / 5.00†", "3.50× / 4.00†"]
    assert rows[0] == ["ar", "1.00× / 1.00", "1.00× / 1.00†", "1.00× / 1.00†"]
    assert "†" not in "".join(rows[2])
    text = Report(summary).markdown()
    assert "† measured under contention" in text and "m (2)" in text
    assert "measured under contention" not in Report(summarize(fixture_records(), SummaryOptions(resamples=50))
                                                     ).markdown()


def test_speedups_against_the_generate_reference_sit_beside_those_against_the_baseline() -> None:
    """generate() ran 9 tokens in 0.8 s and 1.6 s on gsm8k (the plain loop: 1 s and 2 s), 6 in 0.5 s on math500."""
    records = [*fixture_records(),
               record("gen", 1, [0] * 8, 0.8, reference=True), record("gen", 2, [0] * 8, 1.6, reference=True),
               record("gen", 1, [0] * 5, 0.5, reference=True, dataset="math500")]
    summary = summarize(records, SummaryOptions(resamples=200))
    assert summary.reference_names == ["gen"] and summary.reference_kernels == ["default kernels"]
    assert [m.name for m in summary.methods][:2] == ["ar", "gen"]
    m = summary.cell("m", "gsm8k")
    assert m.speedup_aggregate.value == pytest.approx(3.0)  # against the plain loop, unchanged
    assert m.versus_reference.aggregate.value == pytest.approx((18 / 1.0) / (18 / 2.4))
    assert m.versus_reference.geomean.value == pytest.approx(math.sqrt((0.8 / 0.5) * (1.6 / 0.5)))
    assert m.versus_reference.identical == (1, 2) and m.versus_reference.aggregate.n == 2
    assert summary.cell("ar", "gsm8k").versus_reference.aggregate.value == pytest.approx(0.8)  # the plain loop
    gen = summary.cell("gen", ALL)
    assert gen.versus_reference.aggregate.value == 1.0 and gen.speedup_aggregate.value == pytest.approx(
        (24 / 2.9) / (24 / 4.0))
    report = Report(summary).markdown()
    section = report.split("## Speedup against transformers' generate() (gen)")[1].split("##")[0]
    assert "| ar | 0.80× | 0.50× | 0.65× |" in section and "| m | 2.40× | 2.00× | 2.20× |" in section
    assert "| gen |" not in section and "It ran with default kernels." in section
    assert "| m | gsm8k | 2 | 3.00× [" in report and "| 2.40× [" in report
    assert "| gen | d1" not in report
    plain = Report(summarize(fixture_records(), SummaryOptions(resamples=200))).markdown()
    assert "generate()" not in plain  # files without reference records: no reference columns


def test_plain_rounds_are_counted_per_reason() -> None:
    """Records that say why rounds went plain (`plain_reasons`) give a table of counts per method and reason; files
    without reasons give none. (Made to fail once by summing only the first record's reasons.)"""
    records = fixture_records()
    records[2]["plain_reasons"] = {"no_gain": 2, "context_full": 1}
    records[3]["plain_reasons"] = {"no_gain": 1, "explore_declined": 4}
    summary = summarize(records, SummaryOptions(resamples=50))
    assert summary.cell("m", ALL).plain_reasons == {"no_gain": 3, "context_full": 1, "explore_declined": 4}
    text = Report(summary).markdown()
    assert "## Plain rounds and why" in text and "| m | 7 | 1 | 4 | 3 |" in text
    without = Report(summarize(fixture_records(), SummaryOptions(resamples=50))).markdown()
    assert "## Plain rounds and why" not in without
