"""Training prompts: reproducible, varied, and sharing no long n-gram with the evaluation sets."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from specframe_smollm2.training.prompt_files import file_prompts, word_ngrams, words
from specframe_smollm2.training.prompts import section_prompt_kinds, section_prompts, training_prompts
from specframe_smollm2.training.recipe import load_recipe

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
RECIPES = Path(__file__).resolve().parents[3] / "recipes" / "smollm2"
NGRAM = 10


def _benchmark_prompts() -> list[str]:
    out: list[str] = []
    out += [json.loads(line)["question"] for line in (DATA / "gsm8k/test.jsonl").read_text().splitlines() if line]
    with gzip.open(DATA / "humaneval/HumanEval.jsonl.gz", "rt") as f:
        out += [json.loads(line)["prompt"] for line in f if line.strip()]
    for name in ("mt_bench/question.jsonl", "spec_bench/question.jsonl"):
        out += [t for line in (DATA / name).read_text().splitlines() if line for t in json.loads(line)["turns"]]
    mbpp = [json.loads(line) for line in (DATA / "mbpp/mbpp.jsonl").read_text().splitlines() if line]
    out += [r["text"] for r in mbpp if 11 <= r["task_id"] <= 510]  # MBPP's test split
    return out


def test_reproducible_and_distinct() -> None:
    mix = {"math": 0.4, "code": 0.35, "chat": 0.25}
    a = training_prompts(300, seed=3, mix=mix)
    assert a == training_prompts(300, seed=3, mix=mix)
    assert a != training_prompts(300, seed=4, mix=mix)
    assert len(set(a)) == 300


def test_mix_controls_kinds() -> None:
    math_only = training_prompts(50, seed=0, mix={"math": 1.0})
    assert all("?" in p for p in math_only)
    code_only = training_prompts(50, seed=0, mix={"code": 1.0})
    assert all(any(k in p for k in ("function", "code", "tests", "```")) for p in code_only)
    stubs = training_prompts(50, seed=0, mix={"stub": 1.0})
    assert all("def " in p and '"""' in p and "->" in p for p in stubs)


@pytest.mark.skipif(not (DATA / "gsm8k/test.jsonl").is_file(), reason="benchmark copies not present")
def test_no_overlap_with_benchmark_prompts() -> None:
    bench = set()
    texts = _benchmark_prompts()
    assert len(texts) > 1500
    for t in texts:
        bench |= word_ngrams(t, NGRAM)
    prompts = training_prompts(3000, seed=0, mix={"math": 0.4, "code": 0.35, "chat": 0.25})
    prompts += training_prompts(1500, seed=1, mix={"math": 0.45, "stub": 0.4, "chat": 0.15})
    for recipe in (load_recipe(RECIPES / n) for n in ("drafter.yaml", "drafter-stage2.yaml", "drafter-stage3.yaml")):
        for d in (recipe.data, *recipe.data.include):
            prompts += section_prompts(d)
    turns = [t for p in prompts for t in ((p,) if isinstance(p, str) else p)]  # a conversation's every turn
    shared = [(t, g) for t in turns for g in word_ngrams(t, NGRAM) if g in bench]
    assert not shared, f"training prompts share {NGRAM}-grams with benchmark prompts: {shared[:3]}"
    normalized = {" ".join(words(t)) for t in texts}
    assert not any(" ".join(words(t)) in normalized for t in turns)


def test_stage3_kinds_are_varied_and_conversations_have_two_turns() -> None:
    problems = training_prompts(200, seed=0, mix={"word_problem": 1.0})
    assert len(set(problems)) == 200 and all(isinstance(p, str) and "?" in p for p in problems)
    assert len({p.split()[0] for p in problems}) > 10  # many shapes, not one template with new numbers
    instructions = training_prompts(200, seed=0, mix={"instruct": 1.0})
    assert len({" ".join(p.split()[:2]) for p in instructions}) > 20
    conversations = training_prompts(100, seed=0, mix={"multi": 1.0})
    assert all(isinstance(c, tuple) and len(c) == 2 and all(c) for c in conversations)
    assert len({c[1] for c in conversations}) > 5  # the follow-ups vary too


@pytest.mark.skipif(not (DATA / "mbpp/mbpp.jsonl").is_file(), reason="benchmark copies not present")
def test_section_prompt_kinds_name_the_source_of_every_prompt() -> None:
    recipe = load_recipe(RECIPES / "drafter-stage3.yaml")
    for d in (recipe.data, *recipe.data.include):
        prompts, kinds = section_prompts(d), section_prompt_kinds(d)
        assert len(prompts) == len(kinds)
        files = {f"file:{Path(f.path).stem}": set(file_prompts(f)) for f in d.prompt_files}
        for prompt, kind in zip(prompts, kinds, strict=True):
            if kind.startswith("file:"):
                assert prompt in files[kind]
            else:
                assert kind in d.mix and isinstance(prompt, tuple) == (kind == "multi")
        assert set(kinds) >= {k for k, w in d.mix.items() if w >= 0.05}
