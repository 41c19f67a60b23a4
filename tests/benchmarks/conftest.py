"""The benchmark scripts as importable modules, and what their smoke runs share.

The scripts import their siblings as top-level modules (``from _frame import ...``), as they do when run as
``python benchmarks/x.py``; so ``benchmarks/`` goes on ``sys.path`` here and each test calls a script's
``main(argv)`` in this process (importing torch and transformers once, not once per script).

``needs_sets(*names)`` skips a test, with the reason the scripts give, when a prompt set it runs on is found
nowhere (a user's fresh clone has no ``../shared/data`` beside it; :func:`prompt_sets.data_dirs`).

``smoke_env`` (module scope) is where the real-model smoke runs happen: a private ``$SPECFRAME_CACHE`` with the
converted SmolLM2 linked in (what the runs learn never reaches the user's cache), the repository's checkpoints,
and the ``cpu_linear: auto`` choice frozen to the default kernels (its measurement is tested in
``tests/cost/test_kernel_choice.py``; a smoke run only needs a target).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))


def needs_sets(*names: str) -> None:
    """Skip the calling test unless every prompt set of ``names`` is found (the scripts' own lookup)."""
    from prompt_sets import data_dirs, require_sets

    from specframe.datasets import DatasetError

    try:
        require_sets(names, data_dirs(None))
    except DatasetError as exc:
        pytest.skip(exc.render().splitlines()[0])


def have_target() -> bool:
    from specframe_smollm2.cache import target_dir

    return (target_dir() / "manifest.json").is_file()


@pytest.fixture(scope="module")
def smoke_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if not have_target():
        pytest.skip("no converted SmolLM2 (run `specframe setup-target`)")
    import specframe_hf.kernel_probe as kernel_probe
    from specframe_smollm2.testing import private_cache

    from specframe.cost.kernel_choice import KernelChoice, KernelTimings, decide

    def frozen(key, measure, notify, *, path=None):  # type: ignore[no-untyped-def]
        timings = KernelTimings(default_ms={1: 1.0, 4: 1.0, 17: 1.0}, onednn_ms={1: 2.0, 4: 2.0, 17: 2.0})
        return KernelChoice(decide(timings), timings, measured=False, path=Path("/nonexistent"))

    root = tmp_path_factory.mktemp("bench-smoke")
    with pytest.MonkeyPatch.context() as mp:
        private_cache(root / "cache", mp)
        mp.setenv("SPECFRAME_CHECKPOINTS", str(ROOT / "checkpoints" / "smollm2-135m"))
        mp.setattr(kernel_probe, "choose_linear_kernels", frozen)
        yield root
