"""The append-only result file: resume after a crash (truncated last line), no duplicates, no lost records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specframe.bench.results import ResultsFileError, ResultStore, load_result_files, read_results


def rec(qid: int, turn: int = 0, method: str = "m") -> dict:
    return {"method": method, "dataset": "gsm8k", "question_id": qid, "turn": turn, "payload": "x" * 50}


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
        store.append({**rec(0), "config_hash": "aaa", "max_new_tokens": 64})
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
    with pytest.raises(ResultsFileError, match="cannot open result file"):
        ResultStore(tmp_path).open()  # a directory
