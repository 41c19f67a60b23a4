"""`SPECFRAME_TRACE_PLUGINS=1` through the CLI prints every hook call, and `specframe plugins` names the
distribution supplying each component (the example third-party plugin included)."""

from __future__ import annotations

import json

import pytest

from specframe.cli import run_cli


def test_trace_switch_prints_hook_calls_from_the_cli(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPECFRAME_TRACE_PLUGINS", "1")
    monkeypatch.setenv("SPECFRAME_LOAD_PLUGINS", "lmdraft,trees")
    assert run_cli(["plugins", "--json"]) == 0
    captured = capsys.readouterr()
    assert "[specframe trace] specframe_drafters() -> [lmdraft]" in captured.err
    assert "[specframe trace] specframe_drafters returned" in captured.err
    assert "[specframe trace] specframe_tree_builders() -> [trees]" in captured.err
    rows = {row["name"]: row for row in json.loads(captured.out)}
    assert {n for n, r in rows.items() if r["status"] == "loaded"} == {"builtin", "lmdraft", "trees"}
    assert rows["hf"]["status"] == "skipped" and rows["hf"]["reason"] == "not in SPECFRAME_LOAD_PLUGINS"
    assert rows["lmdraft"]["distribution"] == "specframe-example-lmdraft"
    assert rows["lmdraft"]["components"] == ["drafter:lm_draft"]


def test_no_trace_without_the_switch(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SPECFRAME_TRACE_PLUGINS", raising=False)
    monkeypatch.setenv("SPECFRAME_LOAD_PLUGINS", "lmdraft")
    assert run_cli(["plugins", "--json"]) == 0
    assert "[specframe trace]" not in capsys.readouterr().err
