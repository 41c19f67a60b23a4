"""Training data that does not hold what the recipe declares (issue 39, silent wrong results): data generated
with the target's top-4 log-probabilities was reused by a recipe declaring `topk: 32` and a forward-KL over the
top 32; complete data is not regenerated, so the run trained on 28 padded labels per position without a word.
`specframe train` now refuses before any work, naming both numbers and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specframe.cli import run_cli
from specframe.plugins import PluginHost

from .probe import Outcome, assert_clean

RECIPE = ("kind: drafter\nname: t\noutput: '{out}'\nwork_dir: '{work}'\ntarget: '{target}'\n"
          "data: {{dir: '{data}', topk: {topk}}}\nloss: {{soft_topk: {soft}, soft: forward_kl}}\n")


def train(capsys: pytest.CaptureFixture[str], tmp_path: Path, *, topk: int, soft: int) -> Outcome:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(out=tmp_path / "out", work=tmp_path / "work", target=tmp_path / "no-target",
                                    data=tmp_path / "data", topk=topk, soft=soft))
    try:
        code, escaped = run_cli(["train", str(recipe)], host=PluginHost()), None
    except BaseException as exc:  # the probe reports a traceback
        code, escaped = None, exc
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err, escaped)


def test_data_with_fewer_log_probs_than_the_recipe_declares_is_refused(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.json").write_text(json.dumps({"topk": 4, "num_prompts": 8}))
    (data / "shard-00000.pt").write_bytes(b"complete data: never regenerated")
    assert_clean(train(capsys, tmp_path, topk=32, soft=32), code=2,
                 says=("data.topk", "top-4 log-probabilities", "declares data.topk 32"))


def test_a_soft_label_count_beyond_the_data_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_clean(train(capsys, tmp_path, topk=8, soft=32), code=2,
                 says=("loss.soft_topk", "32 is more than the 8"))
