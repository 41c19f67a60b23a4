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


def worked_example(text: str) -> str:
    """The section "A method from a paper" of the page ``text``."""
    assert SECTION in text, f"{PAGE} has no section '{SECTION}'"
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def mismatches(page: str) -> list[str]:
    """Every excerpt of the page text ``page``'s worked example that is not a piece of the file it names."""
    problems = []
    for path, body in excerpts(worked_example(page)):
        source = ROOT / path
        if not source.is_file():
            problems.append(f"the worked example names {path}, which does not exist")
        elif body not in source.read_text(encoding="utf-8"):
            problems.append(f"this excerpt is not in {path}:\n{body}")
    return problems


def test_every_excerpt_is_a_piece_of_the_file_it_names() -> None:
    page = PAGE.read_text(encoding="utf-8")
    found = excerpts(worked_example(page))
    assert len(found) >= 7, found  # the rule, config, builder, factory, registration, conformance, property, row
    assert mismatches(page) == [], "\n".join(mismatches(page))


def test_an_edited_excerpt_is_caught() -> None:
    """Negative control: the checker itself, run on a copy of the page with one bound of one excerpt changed,
    reports that excerpt (and only it)."""
    page = PAGE.read_text(encoding="utf-8")
    section = worked_example(page)
    path, body = next((p, b) for p, b in excerpts(section) if "ge=0.0" in b)
    edited_body = body.replace("ge=0.0", "ge=0.5", 1)
    edited = page.replace(section, section.replace(body, edited_body, 1), 1)
    assert edited != page
    assert mismatches(edited) == [f"this excerpt is not in {path}:\n{edited_body}"]


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
