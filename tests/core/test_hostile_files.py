"""The one reader and the one writer: prompt files, data files and outputs that cannot be written are one-screen
errors naming the path; whole-file outputs are atomic (the old file survives a failed write)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from specframe import PluginHost
from specframe.cli import run_cli
from specframe.datasets import DatasetError
from specframe.datasets.base import read_records
from specframe.errors import GenerationError
from specframe.files import OutputError, read_text, write_text
from specframe.files.prompts import read_prompts_file

ROOT = Path(__file__).resolve().parents[2]
PLAIN = str(ROOT / "examples/plain.yaml")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = run_cli(list(args), host=PluginHost())
    return code, " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("name, content, message", [
    ("p.jsonl", b'{"prompt": "a"}\n{"prompt": 3}\n', "p.jsonl:2: 'prompt' is a JSON int, not a string"),
    ("p.jsonl", b'{"prompt": "a"}\n\n{"text": "b"}\n', "p.jsonl:3: the record has no 'prompt' field"),
    ("p.jsonl", b'{"prompt": "a"}\n{"prompt": "b"\n', "p.jsonl:2: malformed JSON"),
    ("p.jsonl", b'["a"]\n', "p.jsonl:1: the line holds a JSON list, not an object"),
    ("p.jsonl", b'{"prompt": "\\ud800"}\n', "p.jsonl:1: the string"),
    ("p.jsonl", b'{"prompt": NaN}\n', "NaN is not a JSON number"),
    ("p.txt", b"first\nsecond \xff\n", "p.txt:2: not UTF-8 text"),
    ("p.txt", "first\n".encode("utf-16"), "p.txt:1: the file is UTF-16"),
])
def test_bad_prompts_files_name_the_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                  content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(GenerationError):
        read_prompts_file(path)
    code, err = cli(capsys, "run", PLAIN, "--prompts-file", str(path))
    assert code == 2 and message in err and "Traceback" not in err


def test_prompts_file_that_is_a_directory_or_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "run", PLAIN, "--prompts-file", str(tmp_path))[1].endswith("is a directory, not a file "
                                                                                   "hint: give the path of a file")
    assert "prompts file not found" in cli(capsys, "run", PLAIN, "--prompts-file", str(tmp_path / "none.txt"))[1]


def test_prompts_files_are_read_as_utf8_lines_or_jsonl(tmp_path: Path) -> None:
    text = tmp_path / "p.txt"
    text.write_bytes(b"\xef\xbb\xbfcaf\xc3\xa9\r\n\n  second\n")  # UTF-8 BOM, CRLF, blank line
    assert read_prompts_file(text) == ["café", "  second"]
    lines = tmp_path / "p.jsonl"
    lines.write_text('{"prompt": "a\\u2028b", "id": 1}\n{"prompt": ""}\n', encoding="utf-8")
    assert read_prompts_file(lines) == ["a\u2028b", ""]


def test_devices_are_not_read_forever(tmp_path: Path) -> None:
    with pytest.raises(GenerationError, match="device"):
        read_prompts_file("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:  # writer end of the pipe
        with open(fifo, "wb") as handle:
            handle.write(b"x" * 4096)
        os._exit(0)
    with pytest.raises(DatasetError, match="larger than 1000 bytes"):
        read_text(fifo, what="data file", max_bytes=1000, error=DatasetError)
    os.waitpid(pid, 0)


def test_data_files_use_the_same_reader(tmp_path: Path) -> None:
    path = tmp_path / "test.jsonl"
    path.write_bytes(b'{"question": "a"}\n{"question": "\xff"}\n')
    with pytest.raises(DatasetError, match="not UTF-8") as info:
        read_records(path)
    assert f"{path}:2" in info.value.render()
    path.write_bytes(b'{"question": Infinity}\n')
    with pytest.raises(DatasetError, match="Infinity"):
        read_records(path)


@pytest.mark.parametrize("target, message", [
    ("file/schema.json", "file is a file, not a directory"),
    ("dir", "is a directory"),
    ("/dev/full", "not a regular file"),
    ("/proc/specframe-schema.json", "cannot write schema file /proc/specframe-schema.json"),
    ("fifo", "not a regular file"),
])
def test_schema_output_problems_say_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str,
                                                  message: str) -> None:
    (tmp_path / "file").write_text("keep me")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    code, err = cli(capsys, "schema", "-o", str(tmp_path / target))
    assert code == 2 and message in err and "Traceback" not in err and "None" not in err
    assert (tmp_path / "file").read_text() == "keep me"


def test_report_out_dir_under_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from specframe.bench.results import ResultStore
    from tests.bench.test_report import fixture_records

    results = tmp_path / "r.jsonl"
    with ResultStore(results) as store:
        for record in fixture_records():
            store.append(record)
    (tmp_path / "report.md").write_text("mine")
    for out in ("report.md", "report.md/sub"):
        code, err = cli(capsys, "report", str(results), "--out-dir", str(tmp_path / out), "--no-plots")
        assert code == 2 and "is a file" in err and "File exists" not in err
    assert (tmp_path / "report.md").read_text() == "mine"


def test_whole_file_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out.json"
    write_text(path, "old\n", what="schema file")
    os.chmod(path, 0o640)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="the file system is full"):
        write_text(path, "new\n" * 1000, what="schema file")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    monkeypatch.undo()
    write_text(path, "new\n", what="schema file")
    assert path.read_text() == "new\n" and (path.stat().st_mode & 0o777) == 0o640


def test_a_directory_or_file_in_the_wrong_place_is_named_as_such(tmp_path: Path) -> None:
    from specframe.draft_vocab import load_draft_vocab
    from specframe.errors import CheckpointError
    from specframe.files import path_problem
    from specframe.tensor_files import load_tensor_file

    (tmp_path / "file").write_text("x")
    assert path_problem(tmp_path) == "is a directory, not a file"
    assert path_problem(tmp_path / "file", directory=True) == "is a file, not a directory"
    assert path_problem(tmp_path / "none") == "does not exist"
    assert "a parent of it is a file" in str(path_problem(tmp_path / "file" / "x"))
    assert path_problem(tmp_path / "file") is None and path_problem(tmp_path, directory=True) is None
    with pytest.raises(CheckpointError, match="is a directory, not a file"):
        load_draft_vocab(tmp_path)
    with pytest.raises(CheckpointError, match="is a directory, not a file"):
        load_tensor_file(tmp_path, what="data shard")
