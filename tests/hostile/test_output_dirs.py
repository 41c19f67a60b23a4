"""Hostile output directories (issue 39, data loss and tracebacks): one rule for every directory a command replaces.

`specframe vllm-export -o` and `specframe train`'s `output:` replace a directory only when it is new, empty or
holds what the same kind of command wrote before (its `.specframe-output.json` marker); never the command's own
input (also through a symbolic link), never another model (a `config.json` without the marker), never another
kind's output. Paths that cannot become a directory (a dangling link, a path below a regular file, a directory
that does not accept files, a 300-character name) are refused in one screen before any tensor is prepared.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from specframe_diffusion.testing import random_checkpoint
from specframe_hf.testing import tiny_causal_lm

from specframe.cli import run_cli
from specframe.files.outputs import MARKER_FILE, marker_text
from specframe.plugins import PluginHost

from .probe import Outcome, assert_clean


@pytest.fixture(scope="module")
def drafter_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tiny_causal_lm("qwen3", num_layers=2)
    return random_checkpoint(tmp_path_factory.mktemp("src") / "drafter", target=model, taps=(1, 0), block_size=4)


@pytest.fixture
def drafter(tmp_path: Path, drafter_source: Path) -> Path:
    out = tmp_path / "drafter"
    out.mkdir()
    for f in drafter_source.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    return out


def digest(directory: Path) -> dict[str, str]:
    """Every file of ``directory`` and its hash: what must survive a refused command unchanged."""
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(directory.iterdir())}


def export(capsys: pytest.CaptureFixture[str], *args: str) -> Outcome:
    try:
        code, escaped = run_cli(["vllm-export", *args], host=PluginHost()), None
    except BaseException as exc:  # a traceback is what the probe reports
        code, escaped = None, exc
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err, escaped)


def test_export_onto_its_own_drafter_is_refused(capsys: pytest.CaptureFixture[str], drafter: Path) -> None:
    before = digest(drafter)
    assert_clean(export(capsys, str(drafter), "-o", str(drafter)), code=2, says=("the drafter", "own input"))
    link = drafter.parent / "link"
    link.symlink_to(drafter)
    assert_clean(export(capsys, str(drafter), "-o", str(link)), code=2, says=("the drafter",))
    assert_clean(export(capsys, str(drafter), "-o", str(drafter.parent)), code=2, says=("contains the drafter",))
    assert digest(drafter) == before


def test_export_over_another_model_is_refused(capsys: pytest.CaptureFixture[str], drafter: Path,
                                              tmp_path: Path) -> None:
    other = tmp_path / "smollm2-target"
    other.mkdir()
    (other / "config.json").write_text('{"model_type": "llama"}')
    (other / "model.safetensors").write_bytes(b"precious weights")
    before = digest(other)
    assert_clean(export(capsys, str(drafter), "-o", str(other)), code=2,
                 says=("another model", "delete", MARKER_FILE))
    assert digest(other) == before


def test_export_over_another_kinds_output_is_refused(capsys: pytest.CaptureFixture[str], drafter: Path,
                                                     tmp_path: Path) -> None:
    head = tmp_path / "markov-head"
    head.mkdir()
    (head / "config.json").write_text("{}")
    (head / MARKER_FILE).write_text(marker_text("train markov_head", "smollm2-markov-head"))
    before = digest(head)
    assert_clean(export(capsys, str(drafter), "-o", str(head)), code=2,
                 says=("train markov_head", "not of `vllm-export`"))
    assert digest(head) == before


def test_an_earlier_export_or_an_empty_directory_is_replaced(capsys: pytest.CaptureFixture[str], drafter: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "vllm"
    out.mkdir()
    assert_clean(export(capsys, str(drafter), "-o", str(out)), code=0, says=("speculative_config",))
    marker = json.loads((out / MARKER_FILE).read_text())
    assert marker == {"kind": "vllm-export", "source": str(drafter.resolve())}
    assert_clean(export(capsys, str(drafter), "-o", str(out)), code=0, says=("speculative_config",))


def test_paths_that_cannot_be_a_directory_are_refused_before_work(capsys: pytest.CaptureFixture[str], drafter: Path,
                                                                   tmp_path: Path) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    blocker = tmp_path / "notes.txt"
    blocker.write_text("keep me")
    cases = {
        str(dangling): "symbolic link to a missing directory",
        str(blocker / "out"): "is a file, not a directory",
        str(blocker): "is a file, not a directory",
        str(tmp_path / ("x" * 300)): "300 bytes long",
        "/proc/specframe-export": "does not accept new files",
    }
    for output, words in cases.items():
        assert_clean(export(capsys, str(drafter), "-o", output), code=2, says=(words,))
    assert blocker.read_text() == "keep me" and not (tmp_path / "nowhere").exists()


RECIPE = "kind: {kind}\nname: t\noutput: '{output}'\nwork_dir: '{work}'\ntarget: '{target}'\ndata: {{dir: '{data}'}}\n"


@pytest.mark.parametrize("marker", [None, "train markov_head"])
def test_training_over_another_model_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                marker: str | None) -> None:
    head = tmp_path / "markov-head"
    head.mkdir()
    (head / "config.json").write_text("{}")
    (head / "model.safetensors").write_bytes(b"a DSpark head")
    if marker:
        (head / MARKER_FILE).write_text(marker_text(marker, "smollm2-markov-head"))
    before = digest(head)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(kind="drafter", output=head, work=tmp_path / "work", target=tmp_path / "no-t",
                                    data=tmp_path / "no-data"))
    try:
        code, escaped = run_cli(["train", str(recipe)], host=PluginHost()), None
    except BaseException as exc:
        code, escaped = None, exc
    captured = capsys.readouterr()
    assert_clean(Outcome(code, captured.out, captured.err, escaped), code=2,
                 says=("output", "train markov_head" if marker else "another model"))
    assert digest(head) == before


def test_shipped_checkpoints_carry_the_marker_of_their_recipe_kind() -> None:
    root = Path(__file__).resolve().parents[2] / "checkpoints"
    kinds = {"drafter": "drafter", "ar-head": "ar_head", "markov-head": "markov_head",
             "path-selector": "path_selector", "lattice-head": "lattice_head"}
    found = 0
    for directory in root.glob("smollm2-135m*/*"):
        if directory.name in kinds:
            marker = json.loads((directory / MARKER_FILE).read_text())
            assert marker["kind"] == f"train {kinds[directory.name]}", directory
            found += 1
    assert found >= 5


def test_training_output_through_a_link_to_its_target_is_refused(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    """`output:` a symbolic link to the target model (or a directory holding it) is the target: refused."""
    target = tmp_path / "models" / "smollm2"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"the target")
    before = digest(target)
    link = tmp_path / "export"
    link.symlink_to(target)
    for output, says in ((link, "is also the target"), (tmp_path / "models", "contains the target")):
        recipe = tmp_path / "r.yaml"
        recipe.write_text(RECIPE.format(kind="drafter", output=output, work=tmp_path / "work", target=target,
                                        data=tmp_path / "no-data"))
        try:
            code, escaped = run_cli(["train", str(recipe)], host=PluginHost()), None
        except BaseException as exc:
            code, escaped = None, exc
        captured = capsys.readouterr()
        assert_clean(Outcome(code, captured.out, captured.err, escaped), code=2, says=(says,))
    assert digest(target) == before
