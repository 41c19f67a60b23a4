"""The target cache: manifest written and verified, damage detected, clear errors for a missing cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from specframe_smollm2.cache import MANIFEST, cache_root, target_dir, verify_manifest, write_manifest

from specframe.errors import CheckpointError
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost


def _fake_conversion(directory: Path) -> None:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text('{"model_type": "llama"}')
    (directory / "model.safetensors").write_bytes(b"\x00" * 1000)
    write_manifest(directory, {"package": "test"})


def test_cache_root_follows_env(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    assert cache_root() == tmp_path
    assert target_dir() == tmp_path / "smollm2-135m-instruct"
    monkeypatch.delenv("SPECFRAME_CACHE")
    assert cache_root() == Path("~/.cache/specframe").expanduser()


def test_manifest_round_trip(tmp_path) -> None:
    d = tmp_path / "m"
    _fake_conversion(d)
    manifest = verify_manifest(d)
    assert set(manifest["files"]) == {"config.json", "model.safetensors"}


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "model.safetensors").write_bytes(b"\x00" * 10), "bytes"),
    (lambda d: (d / "model.safetensors").write_bytes(b"\x01" * 1000), "SHA-256"),
    (lambda d: (d / "config.json").unlink(), "missing"),
    (lambda d: (d / MANIFEST).unlink(), "did not finish"),
    (lambda d: (d / MANIFEST).write_text("{not json"), "cannot read"),
])
def test_corrupted_cache_is_a_clear_error(tmp_path, damage, message) -> None:
    d = tmp_path / "m"
    _fake_conversion(d)
    damage(d)
    with pytest.raises(CheckpointError, match=message) as info:
        verify_manifest(d)
    assert "setup-target" in info.value.hint


def test_missing_cache_fails_the_pipeline_build(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "nowhere"))
    data = {"target": {"type": "smollm2"}, "drafter": {"type": "none"}, "budget": 1}
    with pytest.raises(CheckpointError, match="does not exist") as info:
        Pipeline.from_dict(data, host=PluginHost())
    assert "specframe setup-target" in info.value.hint


def test_corrupted_cache_fails_the_pipeline_build(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    d = tmp_path / "smollm2-135m-instruct"
    _fake_conversion(d)
    manifest = json.loads((d / MANIFEST).read_text())
    manifest["files"]["config.json"]["sha256"] = "0" * 64
    (d / MANIFEST).write_text(json.dumps(manifest))
    data = {"target": {"type": "smollm2"}, "drafter": {"type": "none"}, "budget": 1}
    with pytest.raises(CheckpointError, match="corrupted"):
        Pipeline.from_dict(data, host=PluginHost())


def _edit_manifest(d: Path, edit) -> None:
    manifest = json.loads((d / MANIFEST).read_text())
    edit(manifest["files"])
    (d / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize("edit", [
    lambda files: files.update({"../outside.bin": {"bytes": 4, "sha256": "0" * 64}}),
    lambda files: files.update({"config.json": "not an entry"}),
])
def test_hostile_manifest_entries_are_refused(tmp_path, edit) -> None:
    d = tmp_path / "m"
    _fake_conversion(d)
    (tmp_path / "outside.bin").write_bytes(b"1234")
    _edit_manifest(d, edit)
    with pytest.raises(CheckpointError, match="not a file entry inside"):
        verify_manifest(d)


def test_undecodable_manifest_is_named(tmp_path) -> None:
    d = tmp_path / "m"
    _fake_conversion(d)
    (d / MANIFEST).write_bytes(b"\xff\xfe{")
    with pytest.raises(CheckpointError, match="cannot read"):
        verify_manifest(d)


@pytest.mark.parametrize("kind", ["file", "foreign_dir"])
def test_setup_target_force_never_deletes_a_foreign_path(tmp_path, capsys, kind) -> None:
    from specframe.cli import run_cli

    victim = tmp_path / "precious"
    if kind == "file":
        victim.write_text("keep me")
    else:
        victim.mkdir()
        (victim / "thesis.tex").write_text("keep me")
    assert run_cli(["setup-target", "--force", "--path", str(victim)], host=PluginHost()) == 2
    err = capsys.readouterr().err
    assert "not a specframe target conversion" in err and "Traceback" not in err
    assert (victim.read_text() if kind == "file" else (victim / "thesis.tex").read_text()) == "keep me"


def test_conversion_gets_ordinary_permissions_and_force_replaces_it(monkeypatch, tmp_path) -> None:
    import os

    from specframe_smollm2 import convert

    def fake_convert(directory: Path, log) -> dict:  # a writer that creates a private file, as save_pretrained can
        (directory / "config.json").write_text("{}")
        fd = os.open(directory / "model.safetensors", os.O_CREAT | os.O_WRONLY, 0o600)
        os.write(fd, b"\x00" * 8)
        os.close(fd)
        return {"package": "test"}

    monkeypatch.setattr(convert, "_convert_into", fake_convert)
    monkeypatch.setattr(convert, "gguf_location", lambda: (tmp_path, "x.gguf"))
    final = tmp_path / "target"
    old = os.umask(0o022)
    try:
        convert.convert_target(final, log=lambda m: None)
        (final / "stale.txt").write_text("from the first conversion")
        _edit_manifest(final, lambda files: files.update({"stale.txt": {"bytes": 24, "sha256": "0"}}))
        convert.convert_target(final, force=True, log=lambda m: None)
    finally:
        os.umask(old)
    assert final.stat().st_mode & 0o777 == 0o755
    assert {p.name: p.stat().st_mode & 0o777 for p in final.iterdir()} == {
        "config.json": 0o644, "model.safetensors": 0o644, MANIFEST: 0o644}
    verify_manifest(final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]  # no temporary or old copy left behind


def test_a_cache_path_that_is_a_file_or_a_deep_manifest_is_named(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="is a file, not a directory"):
        verify_manifest(tmp_path / "file")
    d = tmp_path / "m"
    _fake_conversion(d)
    (d / MANIFEST).write_text("[" * 200_000)
    with pytest.raises(CheckpointError, match="nested too deeply"):
        verify_manifest(d)
