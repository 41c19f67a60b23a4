"""The worked example of docs/plugins/writing.md ("A method from a paper") quotes specframe's real code.

Each excerpt there is a fenced block whose first line is ``# <repository path>``; the rest of the block must be a
contiguous piece of that file, so an excerpt cannot drift from the code it explains (a renamed field, a changed
bound or a new registration line fails here until the page is updated).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "plugins" / "writing.md"
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```$", re.M | re.S)
SECTION = "## A method from a paper"


def excerpts(text: str) -> list[tuple[str, str]]:
    """(path, excerpt) for every fenced block of ``text`` that starts with ``# <path of a file>``."""
    found = []
    for block in FENCE.findall(text):
        first, _, body = block.partition("\n")
        path = first.removeprefix("# ").strip()
        if first.startswith("# ") and "/" in path and " " not in path:
            found.append((path, body))
    return found


def worked_example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert SECTION in text, f"{PAGE} has no section '{SECTION}'"
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def test_every_excerpt_is_a_piece_of_the_file_it_names() -> None:
    found = excerpts(worked_example())
    assert len(found) >= 7, found  # the rule, config, builder, factory, registration, conformance, property, row
    for path, body in found:
        source = ROOT / path
        assert source.is_file(), f"the worked example names {path}, which does not exist"
        assert body in source.read_text(encoding="utf-8"), f"this excerpt is not in {path}:\n{body}"


def test_an_edited_excerpt_is_caught() -> None:
    """Negative control: the same check on an excerpt with one bound changed fails."""
    path, body = next((p, b) for p, b in excerpts(worked_example()) if "ge=0.0" in b)
    assert body.replace("ge=0.0", "ge=0.5") not in (ROOT / path).read_text(encoding="utf-8")


def test_the_methods_from_papers_table_names_real_files_and_ablation_rows() -> None:
    """docs/plugins/index.md's catalogue of stages from papers: each row's module, tests and example pipeline exist
    and its ablation label is a row of ``benchmarks/corrector_ablation.py``."""
    text = (ROOT / "docs" / "plugins" / "index.md").read_text(encoding="utf-8")
    rows = [line for line in text.split("## Methods from papers", 1)[1].splitlines() if line.startswith("| tree")
            or line.startswith("| pruner")]
    assert len(rows) >= 2, rows
    script = (ROOT / "benchmarks" / "corrector_ablation.py").read_text(encoding="utf-8")
    for row in rows:
        paths = re.findall(r"`([\w./-]+/[\w./-]+)`", row)
        assert len(paths) >= 3, row  # module, tests, example pipeline
        for path in paths:
            assert (ROOT / path).is_file(), f"{path} (methods-from-papers table) does not exist"
        label = row.rstrip(" |").rsplit("|", 1)[1].strip()
        assert f'("{label}", ' in script, f"no ablation row labelled {label!r}"
