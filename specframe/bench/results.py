"""Append-only JSONL result files that survive crashes: resume without duplicating or losing a record.

One line per (method, dataset, question, turn). Writing: each record is one ``write`` of a JSON line
followed by ``flush`` and ``fsync``, so after a crash the file holds complete records plus, at worst, one
partial last line (a failed write is cut back at once). Every line is checked against the record schema
(:mod:`specframe.bench.record_schema`) whenever a file is read. Opening a file for writing repairs crash
damage only: a last line without a newline that is recognisably the start of a record of this format cut
short is removed (the record is run again); a last record that is complete but lacks its newline gets one.
Any other line that is not a valid record (an edit, another file given by mistake) is an error naming the line,
and the file is left untouched.

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

from specframe.bench.record import RECORD_PREFIX
from specframe.bench.record_schema import record_problem
from specframe.errors import SpecframeError
from specframe.files.read import MiB, describe_os_error, parse_json, read_bytes
from specframe.files.write import OutputError, check_output_file
from specframe.locking import lock_exclusive

RecordKey = tuple[str, str, str, int]
#: Largest result file read (tens of MiB for a full paper-sized run).
MAX_RESULTS_BYTES = 1024 * MiB
KEY_FIELDS = ("method", "dataset", "question_id", "turn")


class ResultsFileError(SpecframeError):
    """A result file is corrupt, locked, or inconsistent with the run that wants to extend it."""


def record_key(record: dict[str, Any]) -> RecordKey:
    return str(record["method"]), str(record["dataset"]), str(record["question_id"]), int(record["turn"])


def _parse_line(line: bytes, where: str) -> tuple[dict[str, Any] | None, str, bool]:
    """``(record, problem, parsed)``: the valid record, or what is wrong and whether the JSON itself parsed."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"byte 0x{line[exc.start]:02x} at column {exc.start + 1} is not UTF-8", False
    try:
        value = parse_json(text, where=where, error=ResultsFileError)
    except ResultsFileError as exc:
        return None, exc.message, False
    problem = record_problem(value)
    return (value, "", True) if problem is None else (None, problem, True)


def _is_cut_record(line: bytes) -> bool:
    """True if ``line`` can be the start of a record this module wrote (what a crash mid-write leaves)."""
    return line.startswith(RECORD_PREFIX) or RECORD_PREFIX.startswith(line)


def _scan(data: bytes, path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """Parse and check every record; return them, the byte length of the good prefix, and whether the last
    record lacks its newline.

    Only the final chunk (no newline after it) may be invalid, and only if it is recognisably a record of this
    format cut short (:func:`_is_cut_record`); it is then left out of the good prefix. Anything else that is not
    a valid record is an error naming the line, so a file that is not a result file is refused untouched.
    """
    records: list[dict[str, Any]] = []
    offset = 0
    lines = data.split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        is_last = lineno == len(lines)
        end = offset + len(line) + (0 if is_last else 1)
        if line.strip():
            record, problem, parsed = _parse_line(line, f"{path}:{lineno}")
            if record is None:
                if is_last and not parsed and _is_cut_record(line):
                    return records, offset, False
                raise ResultsFileError(
                    f"line {lineno} is not a valid result record: {problem}", where=f"{path}:{lineno}",
                    hint="this is not a result file of `specframe bench`, or it was edited (only a last line cut "
                         "by a crash is repaired); fix or remove this line, or write to a new file with --output")
            records.append(record)
            if is_last:
                return records, end, True
        offset = end
    return records, offset, False


def read_results(path: Path) -> list[dict[str, Any]]:
    """Records of a result file (read-only: a last record cut by a crash is left out, not repaired)."""
    return read_results_checked(path)[0]


def read_results_checked(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Records of a result file and the byte length of a cut last record left out (0 if none)."""
    data = read_bytes(path, what="result file", max_bytes=MAX_RESULTS_BYTES, error=ResultsFileError,
                      hint="give files written by `specframe bench`")
    records, good, _ = _scan(data, path)
    return records, len(data) - good


#: Values of record fields that older result files do not hold (a file from before batched decoding ran at 1).
FIELD_DEFAULTS: dict[str, Any] = {"batch_size": 1, "reference": False}


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
            check_output_file(self.path, what="result file")
        except OutputError as exc:
            raise ResultsFileError(exc.message, hint=exc.hint) from None
        try:
            handle = open(self.path, "a+b")  # kept open (and locked) until close()
        except OSError as exc:
            raise ResultsFileError(f"cannot open result file {self.path}: {describe_os_error(exc)}",
                                   hint="give a writable file path with --output") from None
        lock_exclusive(handle, self.path, error=ResultsFileError,
                       hint="wait for that run, or write to another file with --output")
        try:
            records = self._repair(handle)
        except BaseException:
            handle.close()
            raise
        for record in records:
            key = record_key(record)
            if key in self.records:
                handle.close()
                raise ResultsFileError(f"{self.path} holds two records for {key}",
                                       hint="remove one of them; `specframe bench` never writes duplicates")
            self.records[key] = record
        self._handle = handle

    def _repair(self, handle: IO[bytes]) -> list[dict[str, Any]]:
        """Check the whole file, then cut a crash-cut last record or add a missing final newline."""
        handle.seek(0)
        data = handle.read(MAX_RESULTS_BYTES + 1)
        if len(data) > MAX_RESULTS_BYTES:
            raise ResultsFileError(f"result file {self.path} is larger than {MAX_RESULTS_BYTES // MiB} MiB",
                                   hint="write to a new file with --output")
        records, good, needs_newline = _scan(data, self.path)
        try:
            if good < len(data):
                self.repaired_bytes = len(data) - good
                handle.truncate(good)
            if needs_newline:
                handle.seek(0, os.SEEK_END)
                handle.write(b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        except OSError as exc:
            raise ResultsFileError(f"cannot repair result file {self.path}: {describe_os_error(exc)}",
                                   hint="give a writable file path with --output") from None
        return records

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
        line = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        start = self._handle.seek(0, os.SEEK_END)
        try:
            self._handle.write(line)
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            self._undo(start)
            raise ResultsFileError(f"cannot write to result file {self.path}: {describe_os_error(exc)}",
                                   hint="free space or write to another file with --output; the records already "
                                        "in the file are kept") from None
        self.records[key] = record

    def _undo(self, start: int) -> None:
        """Cut a record whose write failed half-way, so the file stays a sequence of whole records."""
        try:
            self._handle.truncate(start)  # type: ignore[union-attr]
        except (OSError, ValueError):
            pass

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
        file_records, cut = read_results_checked(path)
        if cut:
            warnings.append(f"{path}: the last record is cut short ({cut} bytes, left by a crash) and is left out")
        for record in file_records:
            key = record_key(record)
            if key in seen:
                warnings.append(f"{path}: {key} also in {seen[key]}; the first one is used")
                continue
            seen[key] = str(path)
            records.append(record)
    return records, warnings
