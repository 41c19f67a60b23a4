"""transformers' ``generate()`` as the ``hf_generate`` reference in ``bench`` records, ``report`` tables and
``run --compare-ar``, on a tiny random Hugging Face target (greedy fp32, so every output must be identical)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from specframe_hf.testing import tiny_causal_lm, tiny_tokenizer

from specframe.bench.results import read_results
from specframe.cli import run_cli

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-hf")
    words = "how many what is the a of and to in more than".split() + [f"w{i}" for i in range(40)]
    tiny_causal_lm("llama", seed=3, vocab_size=64).save_pretrained(folder / "model")
    tiny_tokenizer(words).save_pretrained(folder / "model")
    path = folder / "tiny.yaml"
    path.write_text(f"""name: tiny-ngram
target: {{type: hf, model: "{folder / 'model'}", dtype: float32, device: cpu, attn: sdpa}}
sampling: {{temperature: 0.0}}
budget: 4
drafter: {{type: ngram, num_speculative_tokens: 4}}
tree_builder: {{type: chain}}
pruner: {{type: none}}
verifier: {{type: auto}}
generation: {{max_new_tokens: 10}}
""")
    return path


@pytest.fixture(scope="module")
def results(pipeline: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "res.jsonl"
    args = ["bench", str(pipeline), "-d", "gsm8k:3", "-d", "mt_bench:1", "--data-dir", str(DATA), "-o", str(out),
            "--no-progress", "--warmup", "0"]
    assert run_cli(args) == 0
    return out


def test_bench_records_generate_for_the_baselines_token_counts(results: Path) -> None:
    records = read_results(results)
    methods = ["autoregressive", "hf_generate", "tiny-ngram"]
    assert [r["method"] for r in records if r["dataset"] == "gsm8k"] == [  # the reference follows its partner
        *methods, "tiny-ngram", "autoregressive", "hf_generate", *methods]
    by_key = {(r["method"], r["dataset"], str(r["question_id"]), r["turn"]): r for r in records}
    references = [r for r in records if r["method"] == "hf_generate"]
    assert len(references) == 3 + 2  # every GSM8K question, both MT-Bench turns
    for ref in references:
        assert ref["reference"] is True and ref["baseline"] is False and ref["base_method"] == "hf_generate"
        assert "transformers generate(), default nn.Linear kernels" in ref["reference_kernels"]
        plain = by_key[("autoregressive", ref["dataset"], str(ref["question_id"]), ref["turn"])]
        assert ref["choices"][0]["new_tokens"] == plain["choices"][0]["new_tokens"]
        assert ref["tokens"] == plain["tokens"]  # greedy fp32: generate() emits the plain loop's tokens
        assert ref["prompt_tokens"] == plain["prompt_tokens"] and 0 < ref["prefill_ns"] <= ref["total_ns"]
        assert ref["tree_nodes"] == [0] * (len(ref["tokens"]) - 1) and ref["stage_ns"] == {}
    assert all(r["reference"] is False for r in records if r["method"] != "hf_generate")


def test_report_gives_speedups_against_generate_beside_the_plain_loop(results: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["report", str(results), "--out-dir", str(tmp_path), "--bootstrap", "200", "--no-plots"]) == 0
    markdown = capsys.readouterr().out
    assert "## Speedup against transformers' generate() (hf_generate)" in markdown
    section = markdown.split("## Speedup against transformers' generate()")[1].split("##")[0]
    assert "| method | gsm8k | mt_bench | average |" in section and "| autoregressive |" in section
    assert "| hf_generate |" not in section and "default nn.Linear kernels" in section
    assert "| vs generate() [CI] | = generate() |" in markdown and "| tiny-ngram | gsm8k | 3 |" in markdown
    assert "| 3/3 | " in markdown and "| 3/3 |\n" in markdown  # identical to the plain loop and to generate()
    rows = {(r["method"], r["dataset"]): r for r in csv.DictReader((tmp_path / "summary.csv").open())}
    spec = rows[("tiny-ngram", "all")]
    assert float(spec["speedup_vs_generate"]) > 0 and spec["identical_generate"] == "5" and spec["pairs_vs_generate"]
    assert float(rows[("hf_generate", "all")]["speedup_vs_generate"]) == 1.0


def test_no_reference_leaves_generate_out(pipeline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "res.jsonl"
    args = ["bench", str(pipeline), "-d", "gsm8k:1", "--data-dir", str(DATA), "-o", str(out), "--no-progress",
            "--warmup", "0"]
    assert run_cli([*args, "--no-reference"]) == 0
    assert {r["method"] for r in read_results(out)} == {"autoregressive", "tiny-ngram"}
    assert run_cli([*args, "-o", str(tmp_path / "batched.jsonl"), "--batch-size", "2"]) == 0
    assert "no generate() reference (hf_generate): it is measured one request at a time" in capsys.readouterr().err
    assert run_cli(["report", str(out)]) == 0
    assert "generate()" not in capsys.readouterr().out


def test_compare_ar_reports_generate_in_its_json(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", str(pipeline), "--prompt", "how many is a and the", "--prompt", "what is more", "--compare-ar",
            "--json"]
    assert run_cli(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert [g["new_tokens"] for g in report["generate"]] == [r["new_tokens"] for r in report["results"]]
    assert report["identical_to_generate"] == [True, True] and report["identical_to_ar"] == [True, True]
    assert report["speedup_vs_generate"] > 0 and report["plain_vs_generate"] > 0
    assert report["generate_kernels"].startswith("transformers generate(), default nn.Linear kernels")
    assert run_cli(args[:-1]) == 0
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "plain decoding against transformers' generate():" in err and "outputs identical to generate()" in err
    assert "speedup over transformers' generate()" not in err  # the two gains are quoted apart, never multiplied


def test_compare_ar_says_what_equal_outputs_mean_in_bf16(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", str(pipeline), "--prompt", "how many is a", "--compare-ar", "--no-stream"]
    assert run_cli([*args, "--set", "target.dtype=bfloat16", "--set", "target.logits_dtype=float32"]) == 0
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "in bfloat16: likely, not guaranteed" in err and "plain decoding against transformers'" in err
    assert run_cli(args) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "(expected: this verifier emits plain decoding's tokens for the seed)" in err
