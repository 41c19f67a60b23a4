"""The one reader for text files the user gives: pipelines, recipes, prompt files, data files, result files.

:func:`read_bytes` refuses what is not a readable file (missing, a directory, larger than the caller's limit,
including endless devices such as ``/dev/zero``) and transparently decompresses ``*.gz`` files within the same
limit. :func:`decode_text` accepts UTF-8 only (a UTF-8 byte-order mark is dropped); UTF-16/32 files, bytes that
are not UTF-8 and NUL bytes are errors naming the file and line. :func:`parse_json` and
:func:`json_lines` parse JSON strictly: no ``NaN``/``Infinity`` (nor ``1e400``, which overflows to it), no lone
surrogates such as ``"\\ud800"`` (they cannot be written back as UTF-8), no nesting deep enough to exhaust the
stack.

Every error is a :class:`~specframe.errors.SpecframeError` of the class the caller names (``error=``), so a
pipeline file fails with a ``ConfigError`` and a result file with a ``ResultsFileError``.

Example::

    text = read_text("prompts.txt", what="prompts file", max_bytes=64 * MiB, error=GenerationError)
    for lineno, record in json_lines(text, source="prompts.jsonl", error=GenerationError): ...
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specframe.errors import ConfigError, SpecframeError

MiB = 1 << 20
ErrorClass = type[SpecframeError]

#: Characters that cannot be encoded as UTF-8 (lone UTF-16 surrogates).
SURROGATE = re.compile("[\ud800-\udfff]")


def describe_os_error(exc: OSError) -> str:
    """A readable reason for an OSError (``strerror`` can be None)."""
    return exc.strerror or str(exc) or type(exc).__name__


def path_problem(path: str | Path, *, directory: bool = False) -> str | None:
    """Why ``path`` is not the file (or, with ``directory``, the directory) a caller needs, as the end of a
    sentence naming it ("does not exist", "is a directory, not a file", ...); None when it is one. Every
    "not found" message uses it, so a directory is never reported as missing."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        return "is a symbolic link to a missing file" if os.path.islink(path) else "does not exist"
    except NotADirectoryError:
        return "does not exist (a parent of it is a file, not a directory)"
    except OSError as exc:
        return f"cannot be read ({describe_os_error(exc)})"
    if directory:
        return None if stat.S_ISDIR(info.st_mode) else "is a file, not a directory"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not a file"
    return None if stat.S_ISREG(info.st_mode) else "is a device or socket, not a file"


def read_bytes(path: str | Path, *, what: str, max_bytes: int, error: ErrorClass = ConfigError,
               hint: str = "") -> bytes:
    """The bytes of a user-given file (decompressed when it ends in ``.gz``), at most ``max_bytes``.

    ``hint`` is shown when the file is missing or unreadable.
    """
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise error(f"{what} not found: {path}", hint=hint or "check the path") from None
    except NotADirectoryError:
        raise error(f"{what} not found: {path} (a parent of it is a file, not a directory)",
                    hint=hint or "check the path") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {describe_os_error(exc)}", hint=hint) from None
    if stat.S_ISDIR(info.st_mode):
        raise error(f"{what} {path} is a directory, not a file", hint="give the path of a file")
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        raise error(f"{what} {path} is a device or socket, not a file", hint="give the path of a file")
    too_big = error(f"{what} {path} is larger than {_size(max_bytes)}, far more than such a file holds",
                    hint="check the path: this does not look like the file expected here")
    if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes and not path.name.endswith(".gz"):
        raise too_big
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {describe_os_error(exc)}", hint=hint) from None
    if len(data) > max_bytes:
        raise too_big
    if path.name.endswith(".gz"):
        data = _gunzip(data, path, what=what, max_bytes=max_bytes, error=error, too_big=too_big)
    return data


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n} bytes"


def _gunzip(data: bytes, path: Path, *, what: str, max_bytes: int, error: ErrorClass,
            too_big: SpecframeError) -> bytes:
    inflater = zlib.decompressobj(wbits=31)  # gzip header
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise error(f"{what} {path} is not a valid gzip file ({exc})", hint="decompress it, or give the file as "
                    "published") from None
    if len(out) > max_bytes:
        raise too_big
    if not inflater.eof:
        raise error(f"{what} {path} is a truncated gzip file", hint="the file is incomplete; copy it again")
    return out


def decode_text(data: bytes, *, source: str, error: ErrorClass = ConfigError) -> str:
    """UTF-8 text of ``data`` (a UTF-8 BOM is dropped); anything else is an error naming ``source:line``."""
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                      (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):
        if data.startswith(bom):
            raise error(f"the file is {name} text (it starts with a {name} byte-order mark), not UTF-8",
                        where=f"{source}:1", hint="save it as UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _line_col(data, exc.start)
        raise error(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} cannot be decoded",
                    where=f"{source}:{line}", hint="save the file as UTF-8") from None
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise error("the file holds NUL bytes (is it a binary file?)", where=f"{source}:{line}",
                    hint="give a UTF-8 text file")
    return text


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    return data.count(b"\n", 0, offset) + 1, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def read_text(path: str | Path, *, what: str, max_bytes: int, error: ErrorClass = ConfigError,
              hint: str = "") -> str:
    """:func:`read_bytes` then :func:`decode_text`."""
    data = read_bytes(path, what=what, max_bytes=max_bytes, error=error, hint=hint)
    return decode_text(data, source=str(path), error=error)


def check_strings(value: Any, *, where: str, error: ErrorClass = ConfigError) -> None:
    """Refuse lone surrogates (``"\\ud800"``) in any string or key of a parsed value."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if SURROGATE.search(item):
                raise error(f"the string {_preview(item)} holds a lone UTF-16 surrogate (such as \\ud800, or a "
                            "byte that is not UTF-8 in a command-line argument), which is not a character",
                            where=where, hint="write the character itself, or a valid surrogate pair")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def _preview(text: str) -> str:
    shown = text if len(text) <= 40 else text[:37] + "..."
    return ascii(shown)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 overflows to infinity, which JSON cannot hold
        raise ValueError(f"the number {text[:40]} is too large for a double")
    return value


def parse_json(text: str, *, where: str, error: ErrorClass = ConfigError, hint: str = "") -> Any:
    """Strict JSON: no NaN/Infinity (nor numbers such as 1e400 that overflow to it), no lone surrogates, no nesting
    deep enough to exhaust the stack."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON: {exc.msg} (column {exc.colno})", where=where,
                    hint=hint or "each line must be one complete JSON value") from None
    except RecursionError:
        raise error("JSON nested too deeply", where=where, hint=hint) from None
    except ValueError as exc:
        raise error(f"malformed JSON: {exc}", where=where, hint=hint) from None
    check_strings(value, where=where, error=error)
    return value


def json_lines(text: str, *, source: str, error: ErrorClass = ConfigError,
               hint: str = "") -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of JSON Lines text."""
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield lineno, parse_json(line, where=f"{source}:{lineno}", error=error, hint=hint)

