"""``specframe bench``: pipelines (and sweeps) over benchmark datasets against the AR baseline, into
resumable Spec-Bench-compatible JSONL result files."""

from specframe.bench.methods import Method, build_baseline, build_methods
from specframe.bench.results import ResultsFileError, ResultStore, load_result_files, read_results
from specframe.bench.runner import BenchRunner, BenchSummary, run_info
from specframe.bench.sweep import SweepPoint, expand_sweep, parse_cli_sweep, parse_sweep

__all__ = [
    "BenchRunner",
    "BenchSummary",
    "Method",
    "ResultStore",
    "ResultsFileError",
    "SweepPoint",
    "build_baseline",
    "build_methods",
    "expand_sweep",
    "load_result_files",
    "parse_cli_sweep",
    "parse_sweep",
    "read_results",
    "run_info",
]
