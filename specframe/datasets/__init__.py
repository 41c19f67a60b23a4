"""Benchmark prompt sets as a registry: GSM8K, MATH-500, AIME25, HumanEval, MBPP, MT-Bench, Alpaca, Spec-Bench.

Each set loads from a local file (the published JSON / JSONL / JSONL.gz) or from an installed package that
ships it, applies the papers' prompt template and sample count, and never downloads anything. The loaders
live in the core (not a plugin) because they need only the standard library and numpy, and ``specframe
bench`` must work with the core alone; the prompt protocol is part of what a benchmark result means.
"""

from specframe.datasets.base import DatasetError, LoadedDataset, Sample, read_records, select_samples
from specframe.datasets.registry import DATASETS, DatasetSpec, get_spec, load_dataset, parse_dataset_arg
from specframe.datasets.sources import DATA_DIR_ENV, search_dirs

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DatasetError",
    "DatasetSpec",
    "LoadedDataset",
    "Sample",
    "get_spec",
    "load_dataset",
    "parse_dataset_arg",
    "read_records",
    "search_dirs",
    "select_samples",
]
