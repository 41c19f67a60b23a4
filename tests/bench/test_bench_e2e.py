"""`specframe bench` end to end on the toy target: records, baseline pairing, multi-turn, interleaving, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specframe.bench.results import read_results, record_key
from specframe.cli import run_cli

from .toy_plugin import CharTokenizer, toy_host, write_pipeline

#: A small data directory inside the repository (GSM8K and MT-Bench in the published layout): these tests never
#: depend on the benchmark copies outside it.
DATA = Path(__file__).parent / "data"
METHODS = ["autoregressive", "toy-spec[drafter.depth=1]", "toy-spec[drafter.depth=3]"]


def bench(tmp_path: Path, *extra: str) -> int:
    pipeline = write_pipeline(tmp_path / "toy.yaml", extra="sweep: {drafter.depth: [1, 3]}\n")
    args = ["bench", str(pipeline), "-d", "gsm8k:3", "-d", "mt_bench:2", "--data-dir", str(DATA),
            "-o", str(tmp_path / "res.jsonl"), "--no-progress", *extra]
    return run_cli(args, host=toy_host())


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bench")
    assert bench(folder) == 0
    return folder / "res.jsonl"


@pytest.fixture
def results(pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy of one bench run (tests may damage or extend it)."""
    copy = tmp_path / "res.jsonl"
    copy.write_bytes(pristine.read_bytes())
    return copy


def test_records_cover_every_method_question_and_turn(results: Path) -> None:
    records = read_results(results)
    assert len(records) == len(METHODS) * (3 + 2 * 2)  # 3 GSM8K questions, 2 MT-Bench questions × 2 turns
    assert len({record_key(r) for r in records}) == len(records)
    assert {r["method"] for r in records} == set(METHODS)
    for r in records:
        choice = r["choices"][0]
        assert choice["new_tokens"] == [12] and len(r["tokens"]) == 12
        assert choice["decoding_steps"] == [len(choice["accept_lengths"])] == [len(r["accepted"])]
        assert sum(choice["accept_lengths"]) == 12 - 1  # the prefill token belongs to no round
        assert choice["wall_time"][0] == r["total_ns"] / 1e9 > 0
        assert set(r["stage_ns"]) == {"draft", "build", "prune", "target", "verify", "commit"}
        assert r["plugins"]["specframe"] and r["config_hash"] and r["dataset_source"].startswith(str(DATA))
    baseline = [r for r in records if r["method"] == "autoregressive"]
    assert all(r["baseline"] and set(r["accepted"]) == {0} and r["tree_nodes"][0] == 0 for r in baseline)
    deep = [r for r in records if r["method"] == METHODS[2]]
    assert max(max(r["accepted"]) for r in deep) > 1 and max(max(r["tree_nodes"]) for r in deep) == 3


def test_records_carry_the_machine_load_of_their_measurement(results: Path) -> None:
    for r in read_results(results):
        load = r["machine_load"]
        assert set(load) == {"loadavg_before", "loadavg_after", "other_cpu_s", "wall_s", "cpus", "contended"}
        assert load["wall_s"] >= round(r["total_ns"] / 1e9, 4) - 1e-4 and load["cpus"] >= 1
        assert load["contended"] in (True, False, None)


def test_records_carry_sibling_continuation_counts_that_match_their_rounds(results: Path) -> None:
    """A chain accepts rank-0 nodes only; each round but the last (which may be trimmed) continues a - 1 times."""
    for r in read_results(results):
        rows = r["sibling_continuation"]
        assert all(rank == 0 and 0 <= c <= n for _, rank, c, n in rows)
        continued = sum(c for _, _, c, _ in rows)
        untrimmed = sum(max(a - 1, 0) for a in r["accepted"][:-1])
        assert untrimmed <= continued <= untrimmed + 2, r["accepted"]  # the last verdict (depth <= 3) may be cut
        assert (continued > 0) == (r["method"] == METHODS[2] and max(r["accepted"]) > 1)


def test_records_carry_the_pipelines_memory_at_their_context_length(results: Path) -> None:
    for r in read_results(results):
        mem = r["memory"]
        assert mem["context_tokens"] == r["prompt_tokens"] + len(r["tokens"])
        assert mem["target_bytes"] > 0 and mem["heads"] == {}
        assert (mem["drafter_bytes"] > 0) == (r["method"] != "autoregressive")  # the toy drafter's table


def test_greedy_outputs_equal_the_baseline_token_for_token(results: Path) -> None:
    by_key = {(r["dataset"], str(r["question_id"]), r["turn"]): r for r in read_results(results) if r["baseline"]}
    for r in read_results(results):
        if r["turn"] == 0:
            assert r["tokens"] == by_key[(r["dataset"], str(r["question_id"]), 0)]["tokens"]


def test_second_turn_is_conditioned_on_the_methods_own_first_answer(results: Path) -> None:
    records = {(r["method"], r["question_id"], r["turn"]): r for r in read_results(results) if r["dataset"] ==
               "mt_bench"}
    questions = [json.loads(line) for line in (DATA / "mt_bench/question.jsonl").read_text().splitlines()]
    turns = {q["question_id"]: q["turns"] for q in questions}
    tok = CharTokenizer(16)
    for (method, qid, turn), r in records.items():
        if turn != 1:
            continue
        answer = records[(method, qid, 0)]["choices"][0]["turns"][0]
        messages = [{"role": "user", "content": turns[qid][0]}, {"role": "assistant", "content": answer},
                    {"role": "user", "content": turns[qid][1]}]
        assert r["prompt_tokens"] == len(tok(tok.apply_chat_template(messages))["input_ids"])


def test_methods_are_interleaved_per_question_with_rotation(results: Path) -> None:
    order = [(r["question_id"], r["method"]) for r in read_results(results) if r["dataset"] == "gsm8k"]
    questions = list(dict.fromkeys(q for q, _ in order))
    per_question = [[m for q2, m in order if q2 == q] for q in questions]
    assert per_question == [METHODS, METHODS[1:] + METHODS[:1], METHODS[2:] + METHODS[:2]]


def test_resume_skips_finished_turns_and_rebuilds_a_crash_cut_record(results: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    before = read_results(results)
    assert bench(tmp_path, "--json") == 0
    assert json.loads(capsys.readouterr().out)["recorded"] == 0
    assert read_results(results) == before
    # Crash: the file ends inside the 11th record; records 11.. were never written.
    data = results.read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    results.write_bytes(data[: starts[10] + 40])
    assert bench(tmp_path, "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["recorded"] == len(before) - 10 and summary["skipped"] == 10
    after = read_results(results)
    assert sorted(map(record_key, after)) == sorted(map(record_key, before))
    old = {record_key(r): r["tokens"] for r in before}
    assert all(r["tokens"] == old[record_key(r)] for r in after)
    assert results.read_bytes().count(b"\n") == len(before)


def test_bench_refuses_an_output_that_is_not_a_result_file_and_leaves_it_untouched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "res.jsonl"
    notes.write_bytes(b"my notes, one line and no newline")
    assert bench(tmp_path) == 2
    err = capsys.readouterr().err
    assert f"{notes}:1" in err and "not a valid result record" in err and "Traceback" not in err
    assert notes.read_bytes() == b"my notes, one line and no newline"


def test_resume_with_other_settings_is_refused(results: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert bench(tmp_path, "--max-new-tokens", "8") == 2
    err = capsys.readouterr().err
    assert "max_new_tokens = 12" in err and "--output" in err


def test_resume_with_another_batch_size_is_refused(results: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert bench(tmp_path, "--batch-size", "2") == 2
    assert "batch_size = 1" in capsys.readouterr().err
    old = [json.loads(line) for line in results.read_text().splitlines()]  # a file from before batching
    results.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "batch_size"}) + "\n" for r in old))
    assert bench(tmp_path, "--batch-size", "2") == 2  # records without the field ran one request at a time
    assert bench(tmp_path) == 0  # and resume at batch size 1 (nothing left to run)


def test_report_from_a_bench_run(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    assert run_cli(["report", str(results), "--out-dir", str(out)], host=toy_host()) == 0
    markdown = capsys.readouterr().out
    assert "| method | gsm8k | mt_bench | average |" in markdown
    assert "| 3/3 |" in markdown and "| 4/4 |" in markdown  # identical outputs to the baseline at T = 0
    assert (out / "toy-spec_drafter.depth.png").stat().st_size > 0 and (out / "toy-spec_drafter.depth.svg").exists()


def test_usage_errors_are_one_screen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = write_pipeline(tmp_path / "toy.yaml")
    assert run_cli(["bench", str(pipeline)], host=toy_host()) == 2
    assert "no dataset chosen" in capsys.readouterr().err
    assert run_cli(["bench", str(pipeline), "-d", "gsm8k:2", "--data-dir", str(tmp_path)], host=toy_host()) == 2
    err = capsys.readouterr().err
    assert "not available locally" in err and "Traceback" not in err
    (tmp_path / "bad.yaml").write_text(pipeline.read_text().replace("type: toy,", "type: tpy,"))
    assert run_cli(["bench", str(tmp_path / "bad.yaml"), "-d", "gsm8k:2", "--data-dir", str(DATA)],
                   host=toy_host()) == 2
    assert "did you mean 'toy'" in capsys.readouterr().err


def test_repeats_record_the_median_run_and_progress_bar_runs(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "toy.yaml")
    out = tmp_path / "rep.jsonl"
    args = ["bench", str(pipeline), "-d", "gsm8k:1", "--data-dir", str(DATA), "-o", str(out), "--repeats", "3",
            "--warmup", "0", "--progress", "--no-baseline"]
    assert run_cli(args, host=toy_host()) == 0
    [record] = read_results(out)
    assert record["method"] == "toy-spec" and len(record["total_ns_repeats"]) == 3
    assert record["total_ns"] == sorted(record["total_ns_repeats"])[1]


def test_datasets_command_lists_where_each_set_is_found(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["datasets", "--data-dir", str(DATA), "--json"], host=toy_host()) == 0
    rows = json.loads(capsys.readouterr().out)
    found = {row["name"]: row["found"] for row in rows}
    assert len(rows) == 8 and found["gsm8k"].startswith(str(DATA)) and found["mt_bench"].startswith(str(DATA))
    assert next(r for r in rows if r["name"] == "gsm8k")["paper_n"] == 128


def test_batched_bench_records_the_same_tokens_with_its_batch_size(pristine: Path, tmp_path: Path) -> None:
    assert bench(tmp_path, "--batch-size", "3") == 0
    serial = {record_key(r): r for r in read_results(pristine)}
    batched = read_results(tmp_path / "res.jsonl")
    assert {record_key(r) for r in batched} == set(serial)  # every method, question and turn, once
    for r in batched:
        assert r["batch_size"] == 3 and serial[record_key(r)]["batch_size"] == 1
        assert r["tokens"] == serial[record_key(r)]["tokens"]  # greedy: batching changes no token
        assert r["choices"][0]["turns"] == serial[record_key(r)]["choices"][0]["turns"]
