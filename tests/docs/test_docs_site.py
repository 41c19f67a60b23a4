"""The documentation site: generated pages are current, deterministic and complete; `mkdocs build --strict` passes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from specframe import docs_gen, docs_reference
from specframe.docs_reference import field_table, render_catalog, render_pipeline_reference, repo_registry

ROOT = docs_gen.ROOT
GENERATED = ("docs/plugins/hooks.md", "docs/reference/pipeline.md", "docs/plugins/catalog.md")


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return repo_registry()


def test_every_generated_page_is_registered_and_current() -> None:
    assert set(GENERATED) <= set(docs_gen.PAGES)
    assert docs_gen.main(["--check"]) == 0, "run `python -m specframe.docs_gen` and commit the result"


def test_the_check_fails_on_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(docs_gen, "ROOT", tmp_path)
    monkeypatch.setattr(docs_gen, "PAGES", {"docs/page.md": lambda: "current\n"})
    monkeypatch.setattr(docs_gen, "BLOCKS", {})
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/page.md").write_text("stale\n")
    assert docs_gen.main(["--check"]) == 1
    assert "docs/page.md" in capsys.readouterr().err
    assert docs_gen.main([]) == 0 and (tmp_path / "docs/page.md").read_text() == "current\n"


def test_a_block_of_a_hand_written_page_is_checked_against_its_source(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A speed figure in the README changes only with its JSON: a block that disagrees fails `--check`, and a
    page without the block's markers is named."""
    monkeypatch.setattr(docs_gen, "ROOT", tmp_path)
    monkeypatch.setattr(docs_gen, "PAGES", {})
    monkeypatch.setattr(docs_gen, "BLOCKS", {("README.md", "speed"): lambda: "1.15× [1.04, 1.27], 10 prompts"})
    page = tmp_path / "README.md"
    page.write_text("# r\n\n<!-- generated: speed -->\n1.46×\n<!-- /generated: speed -->\n\nafter\n")
    assert docs_gen.main(["--check"]) == 1 and "README.md" in capsys.readouterr().err
    assert docs_gen.main([]) == 0 and docs_gen.main(["--check"]) == 0
    assert page.read_text() == ("# r\n\n<!-- generated: speed -->\n1.15× [1.04, 1.27], 10 prompts\n"
                                "<!-- /generated: speed -->\n\nafter\n")
    page.write_text("# r\n")
    assert docs_gen.main(["--check"]) == 1 and "no block 'speed'" in capsys.readouterr().err


def test_every_speed_claim_block_quotes_the_two_gains_apart() -> None:
    from specframe import docs_claims

    for (page, name), render in docs_claims.BLOCKS.items():
        text = render()
        if text.startswith(docs_claims.NOT_MEASURED):  # a pending file, absent: no figure to quote
            assert ".json" in text and "not in the repository" in text, (page, name)
            continue
        if (page, name) in docs_claims.TIMING_BLOCKS:  # milliseconds per round: the result file, CPU and threads
            assert ".json" in text and " cores, " in text and "torch thread(s)" in text, (page, name)
            continue
        if (page, name) in docs_claims.COUNT_BLOCKS:  # τ only: no speed to split into gains
            assert ".json" in text and "prompts per set" in text and "split" in text and " ms" not in text, name
            assert "×" not in text, name
            continue
        if (page, name) in docs_claims.PEER_BLOCKS:  # specframe / the peer engine, both plain loops in the table
            assert ".json" in text and " cores)" in text and "prompts" in text and "specframe plain" in text, name
            continue
        assert "prompts" in text and ".json" in text, (page, name)  # the prompt count and the result file
        assert "specframe's plain loop vs transformers' generate()" in text, (page, name)
        assert "speculation vs specframe's plain loop" in text, (page, name)
        assert "vs generate() [" not in text and "auto vs generate" not in text


def test_the_method_table_quotes_each_gain_with_its_interval() -> None:
    """The method table's file records per-prompt times: every speculation cell carries its bootstrap interval."""
    from specframe import docs_claims

    text = docs_claims.eval_table()
    rows = [line for line in text.splitlines() if line.startswith("| ") and " / " in line and "× " in line]
    assert rows, text
    for row in rows:
        cells = row.strip("|").split("|")[1:]
        assert all("× [" in cell for cell in cells), row


def test_the_draft_vocabulary_table_quotes_each_gain_with_its_interval() -> None:
    """The draft-vocabulary run pairs every vocabulary with the plain loop prompt by prompt: each row's gain is the
    file's paired estimate with its bootstrap interval and prompt count."""
    import json

    from specframe import docs_claims

    text = docs_claims.draft_vocab_table("docs/benchmarks.md")
    variants = json.loads((docs_claims.ROOT / docs_claims.DRAFT_VOCAB_JSON).read_text())["variants"]
    rows = [line for line in text.splitlines() if line.startswith("| ") and "faster" in line]
    assert len(rows) == len(variants) >= 2, text
    for row, variant in zip(rows, variants, strict=True):
        gain = variant["vs_plain_loop"]
        assert f"{gain['value']:.2f}× [{gain['low']:.2f}, {gain['high']:.2f}], {gain['n']} prompts" in row, row


def test_the_auto_budget_table_has_a_column_pair_per_dartree_pipeline_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The published JSON holds the shipped DARTree's rows; a run that also measured the chat zoo renders a column
    pair more for it, with the header as wide as the rows."""
    import copy
    import json

    from specframe import docs_claims

    report = json.loads((ROOT / docs_claims.AUTO_BUDGET_JSON).read_text())
    shipped = docs_claims.auto_budget_table("docs/benchmarks.md")
    with_zoo = copy.deepcopy(report)
    for scope in (*with_zoo["sets"].values(), *with_zoo["groups"].values()):
        zoo = {**next(r for r in scope["rows"] if r["method"] == "dartree-pruned auto"), "method": "dartree-chat auto"}
        scope["rows"].append(zoo)
    monkeypatch.setattr(docs_claims, "load", lambda rel: with_zoo)
    both = docs_claims.auto_budget_table("docs/benchmarks.md")
    assert "chat zoo" in both and "chat zoo" not in shipped
    widths = []
    for text in (shipped, both):
        table = [line for line in text.splitlines() if line.startswith("|")]
        assert len({line.count("|") for line in table}) == 1, text
        widths.append(table[0].count("|"))
    assert widths[1] == widths[0] + 2


def test_generated_pages_are_deterministic_and_portable(registry) -> None:  # type: ignore[no-untyped-def]
    for render in (render_catalog, render_pipeline_reference):
        text = render(registry)
        assert text == render(registry)
        assert str(ROOT) not in text and str(Path.home()) not in text
        assert " at 0x" not in text  # no object reprs


def test_catalog_and_reference_cover_every_component_with_its_provider(registry) -> None:  # type: ignore[no-untyped-def]
    catalog, reference = render_catalog(registry), render_pipeline_reference(registry)
    distributions = set(docs_reference.repo_distributions())
    assert {"specframe-example-lmdraft", "specframe-trees", "specframe-verifiers", "specframe-hf"} <= distributions
    for rec in registry:
        anchor = f"{{#{rec.spec.kind}-{rec.spec.name}}}"
        assert anchor in catalog and anchor in reference, rec.spec.name
        assert f"| [`{rec.spec.name}`](#{rec.spec.kind}-{rec.spec.name}) | `{rec.distribution}` |" in catalog
        for field in rec.spec.config.model_fields:
            if field != "type":
                assert f"| `{field}` |" in catalog, (rec.spec.name, field)
    assert "Provided by `specframe-example-lmdraft`" in reference
    assert "[`auto`](#verifier-auto)" in reference


class _Example(BaseModel):
    type: Literal["example"] = "example"
    width: int = Field(4, ge=1, description="nodes per depth")
    mode: Literal["fixed", "pruned"] = Field("fixed", description="keep | cut")
    depth: int | None = Field(None, description="*L*, or None")
    path: str = Field(description="a <dir>")


def test_field_table_renders_types_defaults_and_descriptions() -> None:
    assert field_table(_Example).splitlines() == [
        "| field | type | default | description |",
        "|---|---|---|---|",
        "| `width` | integer ≥ 1 | `4` | nodes per depth |",
        '| `mode` | "fixed" \\| "pruned" | `"fixed"` | keep \\| cut |',
        "| `depth` | integer or null | `null` | \\*L\\*, or None |",
        "| `path` | string | *required* | a &lt;dir> |",
    ]


def mkdocs_build(config: Path, site: Path) -> tuple[int, str]:
    """`make docs`' `mkdocs build --strict` (no `-q`, which hides the warnings strict mode counts): the exit
    status and every warning or error line."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, env=env, timeout=300)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines()
                if line.startswith(("WARNING", "ERROR")) or "Aborted" in line]
    return proc.returncode, "\n".join(problems)


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (it is in the `docs` extra, which `make setup` installs)")
    site = tmp_path / "site"
    status, problems = mkdocs_build(ROOT / "mkdocs.yml", site)
    assert status == 0 and problems == "", problems
    tutorial = (site / "plugins/writing/index.html").read_text(encoding="utf-8")
    assert "build_lm_draft" in tutorial and "--8&lt;--" not in tutorial  # the package's real code was included
    assert "lm_draft" in (site / "plugins/catalog/index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis" not in (site / "index.html").read_text(encoding="utf-8")


def test_the_strict_build_fails_on_a_link_out_of_the_docs_tree(tmp_path: Path) -> None:
    """Negative control: a page linking a file beside the docs tree (as docs/benchmarks.md once linked
    ../checkpoints/smollm2-135m/eval.json) fails the build the test above runs."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed")
    (tmp_path / "docs").mkdir()
    (tmp_path / "eval.json").write_text("{}")
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [eval.json](../eval.json).\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\ndocs_dir: docs\nvalidation:\n  links:\n"
                                          "    unrecognized_links: warn\n")
    status, problems = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert status != 0 and "eval.json" in problems


def test_code_cites_only_pages_of_this_repository() -> None:
    """Modules cite the project's own concept pages (in the mkdocs nav), never design notes kept elsewhere."""
    import re

    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    sources = [p for d in ("specframe", "plugins", "benchmarks", "examples") for p in (ROOT / d).rglob("*")
               if p.suffix in (".py", ".yaml") and "build" not in p.parts]
    cited: set[str] = set()
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(algorithms|architecture|environment)\.md", text), path
        cited |= set(re.findall(r"docs/((?:concepts|plugins)/[\w-]+\.md)", text))
    assert {"concepts/block-drafters.md", "concepts/correction-heads.md", "concepts/tree-construction.md",
            "concepts/benchmark-protocol.md"} <= cited
    for page in cited:
        assert (ROOT / "docs" / page).is_file() and page in nav, page
