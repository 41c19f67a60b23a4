"""Published result files against the one quiet rule (issue [1/5]: the load bar had been moved to fit the data).

Every result file the docs render is judged by :func:`specframe.bench.published.verdict` (the quiet rule of
:mod:`specframe.bench.quiet` on its recorded loads, the report split, 20 prompts per set): the docs may call a file
published only when it meets the protocol, and each rendered table carries the file's status line. Every timing
script refuses, before any work, a start the rule rejects (a 1-minute load of 0.85 on 2 cores, which the old
``--max-load 1.1`` default let through).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from specframe.bench import quiet
from specframe.bench.published import RESULT_FILES, ResultFile, status_line, sub_report, verdict

ROOT = Path(__file__).resolve().parents[2]
CPU = "Intel(R) Xeon(R) Processor"
TIMING_SCRIPTS = ("auto_budget", "batch_decoding", "batched_drafting", "bf16_exactness", "corrector_ablation",
                  "draft_vocab", "linear_kernels", "loop_overhead", "simulator_validation", "smollm2_eval")


def report_of(entry: ResultFile) -> dict[str, Any]:
    path = ROOT / entry.path
    if entry.pending and not path.exists():
        pytest.skip(f"{entry.path} is not measured yet (its table says so)")
    return dict(sub_report(json.loads(path.read_text(encoding="utf-8")), entry.key))


@pytest.mark.parametrize("entry", RESULT_FILES, ids=[f"{e.path}:{e.key or e.script}" for e in RESULT_FILES])
def test_a_file_is_called_published_only_when_its_recorded_loads_meet_the_rule(entry: ResultFile) -> None:
    judged = verdict(report_of(entry), per_set=entry.per_set, timed=entry.timed)
    assert judged.published == entry.published, (entry.path, judged.reasons)


@pytest.mark.parametrize("entry", RESULT_FILES, ids=[f"{e.path}:{e.key or e.script}" for e in RESULT_FILES])
def test_every_rendered_table_carries_its_files_status(entry: ResultFile) -> None:
    """The docs page holds the status line of every file it renders (``docs_gen --check`` keeps it current)."""
    pages = (ROOT / "README.md").read_text(encoding="utf-8") + (ROOT / "docs" / "benchmarks.md").read_text(
        encoding="utf-8")
    assert status_line(report_of(entry), per_set=entry.per_set, timed=entry.timed) in pages


def test_the_rule_rejects_what_the_old_default_let_through() -> None:
    """0.61-1.05 at the start (the files published before the rule) is not quiet; 0.12 with a run that stays
    within its own thread is; a neighbour's job during the run is caught by the samples."""
    record = {"threads": 1, "start": 0.85, "during_max": 1.1, "samples": 3}
    assert not quiet.judge(record)[0] and "0.85 at the start" in quiet.judge(record)[1]
    assert quiet.judge({**record, "start": 0.12})[0]
    assert not quiet.judge({**record, "start": 0.12, "during_max": 1.45})[0]
    assert not quiet.judge(None)[0] and not quiet.judge({"start": 0.1})[0]
    published = {"protocol": {"quiet": {**record, "start": 0.12}, "split": "report", "prompts_per_set": 20,
                              "cpu": CPU}}
    assert verdict(published).published
    assert verdict({**published, "smoke": True}).reasons == ["a smoke run"]
    assert not verdict({"protocol": {**published["protocol"], "split": "tune"}}).published
    assert not verdict({"protocol": {**published["protocol"], "prompts_per_set": 5}}).published


def test_a_run_whose_controller_learnt_from_what_it_measured_is_not_published() -> None:
    """A run that never froze its ``budget: auto`` controllers (``protocol.controller`` is the recorder's default)
    is barred whatever its loads: its request memory recalled prompts it then measured. A frozen controller, none, or
    online learning over prompts measured once each pass."""
    record = {"threads": 1, "start": 0.12, "during_max": 1.1, "samples": 3}
    base = {"quiet": record, "split": "report", "prompts_per_set": 20, "cpu": CPU}
    unfrozen = verdict({"protocol": {**base, "controller": {"memory": "not frozen"}}})
    assert not unfrozen.published and "not frozen" in unfrozen.reasons[0]
    for controller in ({"memory": "frozen", "restores": 3}, {"memory": "none: fixed budgets"},
                       {"memory": "online", "learnt_from": "the earlier prompts of the run"}):
        assert verdict({"protocol": {**base, "controller": controller}}).published


def test_a_benchmark_of_several_processes_is_judged_and_labelled_by_the_cpu_outside_its_tree() -> None:
    """The vLLM peer's record (``measure: process-tree``): its own engine's load does not bar it, other processes'
    CPU does, and its status line names what was measured."""
    record = {"threads": 1, "start": 0.12, "during_max": 2.63, "samples": 300, "measure": "process-tree",
              "outside_max": 0.07, "window_s": 60.0, "max_gap_s": 5.1}
    published: dict[str, Any] = {"protocol": {"quiet": record, "split": "report", "prompts_per_set": 20},
                                 "machine": {"cpu": CPU}}
    assert verdict(published).published
    line = status_line(published)
    assert line.startswith("Measured under the protocol") and "at most 0.07 of a core over any minute" in line
    assert "up to 2.63" in line
    busy = {**published, "protocol": {**published["protocol"], "quiet": {**record, "outside_max": 0.45}}}
    assert not verdict(busy).published and "used 0.45 of a core" in verdict(busy).reasons[0]
    late = {**published, "protocol": {**published["protocol"], "quiet": {**record, "start": 0.5}}}
    assert not verdict(late).published


def test_a_timed_file_that_does_not_name_its_cpu_is_not_published() -> None:
    """A speed means nothing without its machine: a timed file must name its CPU (its machine record, or the
    protocol record the recorder writes), and its status line says when it does not; a file of counts need not."""
    record = {"threads": 1, "start": 0.12, "during_max": 1.05, "samples": 40}
    nameless: dict[str, Any] = {"protocol": {"quiet": record, "split": "report", "prompts_per_set": 20}}
    judged = verdict(nameless)
    assert not judged.published and judged.reasons == [
        "the CPU is not recorded (a speed names the machine it was measured on)"]
    assert "CPU: not recorded" in status_line(nameless)
    assert verdict(nameless, timed=False).published
    for named in ({**nameless, "machine": {"cpu": CPU}}, {"protocol": {**nameless["protocol"], "cpu": CPU}}):
        assert verdict(named).published and f"CPU: {CPU};" in status_line(named)


def test_a_status_line_says_when_a_runs_steadiness_was_not_checked() -> None:
    """A timed file measured before the protocol timed a speed probe is judged by its loads alone; its line says
    that its steadiness was not checked. One with probes, or a file of counts, does not say it."""
    record = {"threads": 1, "start": 0.12, "during_max": 1.05, "samples": 40}
    unprobed: dict[str, Any] = {"protocol": {"quiet": record, "split": "report", "prompts_per_set": 20},
                                "machine": {"cpu": CPU}}
    note = "its steadiness was not checked"
    assert verdict(unprobed).published and note in status_line(unprobed)
    probed = {**unprobed, "protocol": {**unprobed["protocol"], "quiet": {
        **record, "probes_ms": [7.0, 7.2], "reference_ms": [980.0, 1010.0]}}}
    assert verdict(probed).published and note not in status_line(probed)
    assert note not in status_line(unprobed, timed=False)


def test_a_file_of_counts_is_spared_the_quiet_rule_but_not_the_split_or_the_prompt_count() -> None:
    """A τ/acceptance file (``timed=False``) quotes no time: a busy machine does not bar it, and its status line says
    so; the report split, 20 prompts per set and no smoke run still apply, and a timed file stays barred."""
    busy = {"protocol": {"quiet": {"threads": 1, "start": 1.4, "during_max": 2.1, "samples": 9},
                         "split": "report", "prompts_per_set": 20}}
    assert verdict(busy, timed=False).published and not verdict(busy).published
    line = status_line(busy, timed=False)
    assert line.startswith("Measured under the protocol for counts") and "the machine was not quiet" in line
    assert "1-minute load 1.40 at the start, at most 2.10 during the run" in line
    assert verdict({"protocol": {**busy["protocol"], "split": "tune"}}, timed=False).reasons == [
        "split tune, not report"]
    assert not verdict({"protocol": {**busy["protocol"], "prompts_per_set": 19}}, timed=False).published
    assert verdict({**busy, "smoke": True}, timed=False).reasons == ["a smoke run"]


@pytest.mark.parametrize("name", TIMING_SCRIPTS)
def test_every_timing_script_refuses_a_start_the_rule_rejects(name: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(name)
    monkeypatch.setattr(quiet, "load_average", lambda: 0.85)
    if hasattr(module, "require_sets"):
        monkeypatch.setattr(module, "require_sets", lambda *a, **k: None)  # the data is not what this tests
    argv = ["--models", "smollm2"] if name == "loop_overhead" else []
    with pytest.raises(SystemExit) as exc:
        module.main([*argv, "--out", str(tmp_path / "out.json")])
    assert exc.value.code == 2 and not (tmp_path / "out.json").exists()
    err = capsys.readouterr().err
    assert "1-minute load 0.85 before the start" in err and "Traceback" not in err

