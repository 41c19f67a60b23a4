"""`make test` runs mypy over specframe/, plugins/ and benchmarks/ (pyproject.toml's [tool.mypy]); this holds that
the configuration catches the bug that made it necessary: a benchmark importing a name that a refactor removed
(`RngStreams`, which the position-keyed noise replaced) and calling a constructor with a field it no longer has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def mypy(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           *map(str, files)], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_a_stale_import_and_a_removed_keyword_fail_the_check(tmp_path: Path) -> None:
    stale = tmp_path / "stale_benchmark.py"
    stale.write_text("from specframe.interfaces import RoundContext\n"
                     "from specframe.sampling.noise import RngStreams\n\n"
                     "ctx = RoundContext(budget=4, rng=RngStreams(0))\n")
    out = mypy(stale)
    assert out.returncode == 1, out.stdout + out.stderr
    assert 'Module "specframe.sampling.noise" has no attribute "RngStreams"' in out.stdout
    assert 'Unexpected keyword argument "rng" for "RoundContext"' in out.stdout


def test_the_same_file_without_the_bugs_passes(tmp_path: Path) -> None:
    fixed = tmp_path / "fixed_benchmark.py"
    fixed.write_text("from specframe.interfaces import RoundContext\n"
                     "from specframe.sampling.noise import RoundNoise\n"
                     "from specframe.types import SamplingParams\n\n"
                     "ctx = RoundContext(budget=4, sampling=SamplingParams(), noise=RoundNoise.from_seed(0))\n")
    out = mypy(fixed)
    assert out.returncode == 0, out.stdout + out.stderr
