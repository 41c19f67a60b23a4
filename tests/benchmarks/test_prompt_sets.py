"""Where the benchmark scripts find their prompt sets, and what they say when one is absent (issue [1/5] item 0).

A user's clone has no ``../shared/data`` beside it: the scripts look in ``--data DIR``, then
``$SPECFRAME_DATA_DIR``, then the developers' shared folder only where it exists, then installed packages
(:func:`prompt_sets.data_dirs`, :func:`prompt_sets.where_found`); a set found nowhere stops a script before any
work with one screen that names the set, the places searched and how to give it (:func:`prompt_sets.require_sets`).
"""

from __future__ import annotations

import json
from pathlib import Path

import prompt_sets
import pytest

from specframe.datasets import DATA_DIR_ENV, DatasetError


def test_a_fresh_clone_looks_only_where_the_user_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the shared folder and without the variable, no directory is searched (packages only); ``--data``
    comes before the variable, which comes before the shared folder."""
    monkeypatch.setattr(prompt_sets, "SHARED_DATA", tmp_path / "no-shared-beside-this-clone")
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert prompt_sets.data_dirs(None) == []
    given, env, shared = (tmp_path / name for name in ("given", "env", "shared"))
    for folder in (given, env, shared):
        folder.mkdir()
    monkeypatch.setenv(DATA_DIR_ENV, str(env))
    monkeypatch.setattr(prompt_sets, "SHARED_DATA", shared)
    assert prompt_sets.data_dirs(given) == [given, env, shared]


def test_a_set_found_nowhere_is_named_with_where_it_was_looked_for_and_how_to_give_it(tmp_path: Path) -> None:
    """The refusal names every missing set, each directory searched and the two ways to give one; a set put under
    the directory is then found, and only the other stays missing."""
    if prompt_sets.where_found("gsm8k", []) or prompt_sets.where_found("humaneval", []):
        pytest.skip("an installed package ships GSM8K or HumanEval: nothing is missing here")
    with pytest.raises(DatasetError) as caught:
        prompt_sets.require_sets(["gsm8k", "humaneval"], [tmp_path])
    screen = caught.value.render()
    assert "prompt set(s) gsm8k, humaneval not found" in screen and str(tmp_path) in screen
    assert "gsm8k/test.jsonl" in screen and "humaneval/HumanEval.jsonl.gz" in screen
    assert "--data DIR" in screen and DATA_DIR_ENV in screen and "Traceback" not in screen
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text(json.dumps({"question": "1 + 1?", "answer": "#### 2"}) + "\n")
    assert prompt_sets.missing_sets(["gsm8k", "humaneval"], [tmp_path]) == ["humaneval"]
    with pytest.raises(DatasetError, match=r"prompt set\(s\) humaneval not found"):
        prompt_sets.require_sets(["gsm8k", "humaneval"], [tmp_path])
