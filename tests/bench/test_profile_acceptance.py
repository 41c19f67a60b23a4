"""`specframe profile-acceptance` on the toy target: the profile it writes, the split it reads, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from specframe.bench.splits import REPORT, TUNE, select_split
from specframe.cli import run_cli
from specframe.datasets import load_dataset
from specframe.metrics.depth_rank import load_counts
from specframe.pipeline import Pipeline

from .toy_plugin import toy_host, write_pipeline

DATA = Path(__file__).parent / "data"  # GSM8K and MT-Bench samples inside the repository


def record(tmp_path: Path, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "profile.json"
    args = ["profile-acceptance", str(write_pipeline(tmp_path / "toy.yaml")), "-d", "gsm8k:2", "--data-dir", str(DATA),
            "--max-new-tokens", "12", "-o", str(out), *extra]
    return run_cli(args, host=toy_host()), out


@pytest.mark.parametrize("split", ["tune", "report"])
def test_the_profile_counts_the_rounds_of_the_splits_prompts(tmp_path: Path, split: str) -> None:
    status, out = record(tmp_path, "--split", split)
    assert status == 0
    counts = load_counts(out)
    # The same prompts decoded directly: depth d's trials and accepted children follow from the rounds.
    pool = load_dataset("gsm8k", None, data_dirs=[DATA]).samples
    samples = select_split(pool, TUNE if split == "tune" else REPORT, 2)
    assert counts.meta["split"] == split and counts.meta["datasets"] == {"gsm8k": len(samples)} and samples
    pipe = Pipeline.from_yaml(tmp_path / "toy.yaml", host=toy_host())
    rounds = [r for s in samples for r in pipe.generate(s.turns[0], 12).rounds if r.drafted]
    assert counts.trials[0] == len(rounds) == counts.meta["rounds"]
    for d in range(1, counts.depths + 1):
        assert sum(counts.accepted[d - 1]) == sum(len(r.path_ranks) >= d for r in rounds)
    assert any(sum(row) for row in counts.accepted)  # some drafts were accepted


def test_bad_arguments_are_one_screen_errors_and_write_nothing(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    status, out = record(tmp_path, "-d", "no_such_set:3")
    assert status == 2 and not out.exists()
    assert "no_such_set" in capsys.readouterr().err
    (tmp_path / "dir.json").mkdir()
    args = ["profile-acceptance", str(write_pipeline(tmp_path / "toy.yaml")), "-d", "gsm8k:1", "--data-dir",
            str(DATA), "-o", str(tmp_path / "dir.json")]
    assert run_cli(args, host=toy_host()) == 2
    err = capsys.readouterr().err
    assert "dir.json" in err and "Traceback" not in err
