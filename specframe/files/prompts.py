"""``--prompts-file``: one prompt per line of a text file, or a JSON Lines file (``*.jsonl``) of objects with a
string ``prompt`` field.

Every problem is a :class:`~specframe.errors.GenerationError` naming the file and line: a missing file or a
directory, text that is not UTF-8, a malformed JSON line, a record that is not an object, lacks ``prompt`` or
holds a non-string one.

Example (``prompts.jsonl``)::

    {"prompt": "Write a haiku about trees."}
    {"prompt": "What is 2 + 2?", "id": 7}
"""

from __future__ import annotations

from pathlib import Path

from specframe.errors import GenerationError
from specframe.files.read import MiB, json_lines, read_text

#: Largest prompts file accepted.
MAX_PROMPTS_FILE_BYTES = 64 * MiB
_HINT = "give a text file with one prompt per line, or a .jsonl file of objects with a string 'prompt' field"


def read_prompts_file(path: str | Path) -> list[str]:
    """The prompts of ``path`` in file order (blank lines skipped); see the module docstring."""
    return [prompt for _, prompt in read_numbered_prompts(path)]


def read_numbered_prompts(path: str | Path) -> list[tuple[int, str]]:
    """``(line number, prompt)`` for every prompt of ``path`` (1-based lines of the file, blank ones skipped), so
    a message about a prompt names the line the user sees."""
    path = Path(path)
    text = read_text(path, what="prompts file", max_bytes=MAX_PROMPTS_FILE_BYTES, error=GenerationError, hint=_HINT)
    if not path.name.endswith(".jsonl"):
        return [(lineno, line.rstrip("\r")) for lineno, line in enumerate(text.split("\n"), start=1)
                if line.strip()]
    prompts = []
    for lineno, record in json_lines(text, source=str(path), error=GenerationError, hint=_HINT):
        where = f"{path}:{lineno}"
        if not isinstance(record, dict):
            raise GenerationError(f"the line holds a JSON {type(record).__name__}, not an object", where=where,
                                  hint=_HINT)
        if "prompt" not in record:
            raise GenerationError(f"the record has no 'prompt' field (it has {', '.join(map(repr, record)) or 'none'})",
                                  where=where, hint=_HINT)
        prompt = record["prompt"]
        if not isinstance(prompt, str):
            raise GenerationError(f"'prompt' is a JSON {type(prompt).__name__}, not a string", where=where,
                                  hint=_HINT)
        prompts.append((lineno, prompt))
    return prompts
