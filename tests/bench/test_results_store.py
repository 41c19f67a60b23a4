"""The append-only result file: resume after a crash (truncated last line), no duplicates, no lost records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specframe.bench.results import ResultsFileError, ResultStore, load_result_files, read_results
from tests.bench.test_report import record


def rec(qid: int, turn: int = 0, method: str = "m") -> dict:
    return {**record(method, qid, [1, 0], 1.0), "turn": turn}


def write_three(path: Path) -> None:
    with ResultStore(path) as store:
        for q in range(3):
            store.append(rec(q))


def test_append_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_three(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[1])["question_id"] == 1
    with ResultStore(path) as store:
        assert len(store) == 3 and ("m", "gsm8k", "2", 0) in store and store.repaired_bytes == 0
        store.append(rec(2, turn=1))
    assert len(read_results(path)) == 4


def test_duplicate_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_three(path)
    with ResultStore(path) as store, pytest.raises(ResultsFileError, match="already holds"):
        store.append(rec(1))
    assert len(read_results(path)) == 3


@pytest.mark.parametrize("cut", [1, 17, -2])
def test_truncated_last_line_is_repaired_and_rerun(tmp_path: Path, cut: int) -> None:
    """A crash mid-write leaves a partial line: it is cut off, and only that record is missing."""
    path = tmp_path / "r.jsonl"
    write_three(path)
    data = path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last_start + cut] if cut > 0 else data[:cut])  # partial third record
    assert len(read_results(path)) == 2  # readers ignore the partial line without touching the file
    with ResultStore(path) as store:
        assert store.repaired_bytes > 0 and len(store) == 2
        assert ("m", "gsm8k", "2", 0) not in store
        store.append(rec(2))
    records = read_results(path)
    assert [r["question_id"] for r in records] == [0, 1, 2]
    assert path.read_bytes().endswith(b"\n") and path.read_bytes().count(b"\n") == 3


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_three(path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    with ResultStore(path) as store:
        assert len(store) == 3
        store.append(rec(3))
    assert [r["question_id"] for r in read_results(path)] == [0, 1, 2, 3]


def test_corruption_before_the_last_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_three(path)
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:20]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsFileError, match="line 2") as info:
        ResultStore(path).open()
    assert f"{path}:2" in info.value.render()


def test_second_writer_is_locked_out(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultStore(path), pytest.raises(ResultsFileError, match="another process"):
        ResultStore(path).open()


def test_consistency_check_refuses_a_changed_config(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultStore(path) as store:
        store.append({**rec(0), "config_hash": "aaa", "max_new_tokens": 64})  # type: ignore[dict-item]
        store.check_consistent("m", {"config_hash": "aaa", "max_new_tokens": 64})
        store.check_consistent("other", {"config_hash": "zzz"})
        with pytest.raises(ResultsFileError, match="config_hash"):
            store.check_consistent("m", {"config_hash": "bbb", "max_new_tokens": 64})


def test_load_result_files_merges_and_warns_on_duplicates(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_three(a)
    with ResultStore(b) as store:
        store.append(rec(2))
        store.append(rec(5))
    records, warnings = load_result_files([a, b])
    assert [r["question_id"] for r in records] == [0, 1, 2, 5]
    assert len(warnings) == 1 and "b.jsonl" in warnings[0]
    with pytest.raises(ResultsFileError, match="not found"):
        load_result_files([tmp_path / "missing.jsonl"])


def test_unwritable_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsFileError, match="is a directory"):
        ResultStore(tmp_path).open()  # a directory


@pytest.mark.parametrize("content", [
    b"hello, this is my notes file",  # one line, no trailing newline
    b"notes\nmore notes",
    b'{"not": "a record"}',
    b"\xff\xfe{\x00",  # UTF-16
])
def test_a_file_that_is_not_a_result_file_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(ResultsFileError, match="not a valid result record") as info:
        ResultStore(path).open()
    assert f"{path}:" in info.value.render()
    assert path.read_bytes() == content


def test_a_complete_record_followed_by_a_foreign_last_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_three(path)
    content = path.read_bytes() + b"# my comment"
    path.write_bytes(content)
    with pytest.raises(ResultsFileError, match="line 4"):
        ResultStore(path).open()
    assert path.read_bytes() == content


@pytest.mark.parametrize("field, value, message", [
    ("total_ns", "12", "total_ns"),
    ("turn", 1.5, "turn"),
    ("turn", True, "turn"),
    ("choices", None, "choices"),
    ("accepted", [1, "x"], "accepted.1"),
    ("stage_ns", {"draft": -1.5}, "stage_ns.draft"),
    ("total_ns", 0, "total_ns"),
    ("prefill_ns", 10**15, "prefill_ns"),
    ("accepted", [-5, 3], "accepted.0"),
    ("accepted", [10**9, 0], "accepted.0"),
    ("accepted", [1, 1, 1], "one entry per round"),
])
def test_records_with_wrong_types_are_errors_naming_file_and_line(tmp_path: Path, field: str, value: object,
                                                                  message: str) -> None:
    path = tmp_path / "r.jsonl"
    write_three(path)
    lines = path.read_text().splitlines()
    bad = json.loads(lines[1])
    if value is None:
        del bad[field]
    else:
        bad[field] = value
    lines[1] = json.dumps(bad)
    content = ("\n".join(lines) + "\n").encode()
    path.write_bytes(content)
    for read in (read_results, lambda p: load_result_files([p]), lambda p: ResultStore(p).open()):
        with pytest.raises(ResultsFileError, match=message) as info:
            read(path)
        assert f"{path}:2" in info.value.render()
    assert path.read_bytes() == content


@pytest.mark.parametrize("text, message", [
    ('{"question_id": NaN}', "NaN"),
    ('{"question_id": "\\ud800"}', "surrogate"),
    ("[" * 100_000, "nested too deeply"),
])
def test_hostile_json_in_result_files_is_an_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(text + "\n")
    with pytest.raises(ResultsFileError, match=message):
        read_results(path)


def test_report_warns_about_a_cut_last_record(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    write_three(path)
    path.write_bytes(path.read_bytes()[:-30])
    records, warnings = load_result_files([path])
    assert len(records) == 2 and "cut short" in warnings[0]


@pytest.mark.parametrize("make", [lambda d: d, lambda d: d / "f" / "sub.jsonl", lambda d: Path("/dev/zero")])
def test_unusable_result_paths_are_clear_errors(tmp_path: Path, make) -> None:
    (tmp_path / "f").write_text("x")
    path = make(tmp_path)
    with pytest.raises(ResultsFileError, match=r"directory|not a regular file|is a file"):
        ResultStore(path).open()
