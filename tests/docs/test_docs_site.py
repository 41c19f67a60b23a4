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
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/page.md").write_text("stale\n")
    assert docs_gen.main(["--check"]) == 1
    assert "docs/page.md" in capsys.readouterr().err
    assert docs_gen.main([]) == 0 and (tmp_path / "docs/page.md").read_text() == "current\n"


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


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (it is in the `docs` extra, which `make setup` installs)")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(site)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tutorial = (site / "plugins/writing/index.html").read_text(encoding="utf-8")
    assert "build_lm_draft" in tutorial and "--8&lt;--" not in tutorial  # the package's real code was included
    assert "lm_draft" in (site / "plugins/catalog/index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis" not in (site / "index.html").read_text(encoding="utf-8")


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
