"""Append-only JSONL result files that survive crashes: resume without duplicating or losing a record.

One line per (method, dataset, question, turn). Writing: each record is one ``write`` of a JSON line
followed by ``flush`` and ``fsync``, so after a crash the file holds complete records plus, at worst, one
partial last line. Opening a file for writing repairs that: a last line that does not parse is cut off (the
record is run again); a last line that parses but lacks its newline gets one. A malformed line *before* the
last is not crash damage (two writers? an edit?) and is an error naming the line.

Keys: ``(method, dataset, str(question_id), turn)``. :meth:`ResultStore.append` refuses a key already
present, so a resumed run can never duplicate a record. Another process writing the same file is refused
through an advisory lock (POSIX ``flock``) while a store is open.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from specframe.errors import SpecframeError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

RecordKey = tuple[str, str, str, int]
KEY_FIELDS = ("method", "dataset", "question_id", "turn")


class ResultsFileError(SpecframeError):
    """A result file is corrupt, locked, or inconsistent with the run that wants to extend it."""


def record_key(record: dict[str, Any]) -> RecordKey:
    return str(record["method"]), str(record["dataset"]), str(record["question_id"]), int(record["turn"])


def _scan(data: bytes, path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """Parse complete records; return them, the byte length of the good prefix, and whether it needs a newline.

    The last line may be partial (crash): it is dropped if it does not parse.
    """
    records: list[dict[str, Any]] = []
    offset = 0
    lines = data.split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        is_last = lineno == len(lines)
        end = offset + len(line) + (0 if is_last else 1)
        if line.strip():
            try:
                record = json.loads(line)
                if not isinstance(record, dict) or any(k not in record for k in KEY_FIELDS):
                    raise ValueError("not a specframe result record")
            except (ValueError, UnicodeDecodeError) as exc:
                # The final chunk, or a last line followed only by blank space, is crash damage.
                if is_last or not any(rest.strip() for rest in lines[lineno:]):
                    return records, offset, False
                raise ResultsFileError(f"line {lineno} is not a valid result record ({exc})", where=f"{path}:{lineno}",
                                       hint="only the last line can be cut by a crash; fix or remove this line, "
                                            "or write to a new file with --output") from None
            records.append(record)
            if is_last:
                return records, end, True
        offset = end
    return records, offset, False


def read_results(path: Path) -> list[dict[str, Any]]:
    """Records of a result file (read-only: a partial last line is ignored, not repaired)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResultsFileError(f"cannot read result file {path}: {exc.strerror}",
                               hint="give a file written by `specframe bench`") from None
    return _scan(data, path)[0]


#: Values of record fields that older result files do not hold (a file from before batched decoding ran at 1).
FIELD_DEFAULTS: dict[str, Any] = {"batch_size": 1}


class ResultStore:
    """An open result file: the records already in it, and :meth:`append` for new ones.

    Use as a context manager (``with ResultStore(path) as store:``); opening repairs a crash-cut last line
    and takes the advisory lock.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: dict[RecordKey, dict[str, Any]] = {}
        self.repaired_bytes = 0  # bytes of a partial last line removed on open
        self._handle: IO[bytes] | None = None

    def __enter__(self) -> ResultStore:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(self.path, "a+b")  # kept open (and locked) until close()
        except OSError as exc:
            raise ResultsFileError(f"cannot open result file {self.path}: {exc.strerror}",
                                   hint="give a writable file path with --output") from None
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                raise ResultsFileError(f"{self.path} is being written by another process",
                                       hint="wait for that run, or write to another file with --output") from None
        handle.seek(0)
        data = handle.read()
        records, good, needs_newline = _scan(data, self.path)
        if good < len(data):
            self.repaired_bytes = len(data) - good
            handle.truncate(good)
        if needs_newline:
            handle.seek(0, os.SEEK_END)
            handle.write(b"\n")
        handle.flush()
        os.fsync(handle.fileno())
        for record in records:
            key = record_key(record)
            if key in self.records:
                handle.close()
                raise ResultsFileError(f"{self.path} holds two records for {key}",
                                       hint="remove one of them; `specframe bench` never writes duplicates")
            self.records[key] = record
        self._handle = handle

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing releases the lock
            self._handle = None

    def __contains__(self, key: RecordKey) -> bool:
        return key in self.records

    def get(self, key: RecordKey) -> dict[str, Any] | None:
        return self.records.get(key)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records.values())

    def __len__(self) -> int:
        return len(self.records)

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably; a key already present is an error (never a duplicate)."""
        if self._handle is None:
            raise ResultsFileError(f"{self.path} is not open for writing", hint="use `with ResultStore(path):`")
        key = record_key(record)
        if key in self.records:
            raise ResultsFileError(f"{self.path} already holds a record for {key}",
                                   hint="the bench runner skips finished keys; this is a bug in the caller")
        self._handle.write((json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8"))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.records[key] = record

    def check_consistent(self, method: str, fields: dict[str, Any]) -> None:
        """Refuse to extend ``method``'s records if they were written with different settings.

        ``fields`` holds values that must match every existing record of the method (config hash,
        max_new_tokens, ...); a mismatch means the resumed run would mix two configurations.
        """
        for record in self.records.values():
            if record["method"] != method:
                continue
            for name, value in fields.items():
                if record.get(name, FIELD_DEFAULTS.get(name)) != value:
                    raise ResultsFileError(
                        f"{self.path} holds results of method '{method}' with {name} = {record.get(name)!r}, "
                        f"but this run has {name} = {value!r}",
                        hint="write to a new file with --output, or give the method another `name:`")
            return


def load_result_files(paths: Sequence[str | Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Records of several result files (first occurrence of a key wins) and warnings about duplicates."""
    seen: dict[RecordKey, str] = {}
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_file():
            raise ResultsFileError(f"result file not found: {path}", hint="give files written by `specframe bench`")
        for record in read_results(path):
            key = record_key(record)
            if key in seen:
                warnings.append(f"{path}: {key} also in {seen[key]}; the first one is used")
                continue
            seen[key] = str(path)
            records.append(record)
    return records, warnings
