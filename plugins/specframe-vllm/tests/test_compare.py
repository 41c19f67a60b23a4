"""The cross-check's comparer on hand-made reports: it passes what agrees and fails each kind of disagreement."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from specframe_vllm.crosscheck.compare import compare, main

LAW = {"prompt_ids": [1, 2], "length": 2, "min_prob": 0.05, "categories": [[5, 6], [5, 7], [8, 9]],
       "temperature": 1.0, "probs": [0.4, 0.3, 0.2], "wrong_temperature": 0.8, "wrong_probs": [0.6, 0.2, 0.1]}


def draw(probs: list[float], n: int, seed: int) -> list[list[int]]:
    """``n`` continuations from the law ``probs`` over LAW's categories (+ other, written as [0, 0])."""
    p = torch.tensor(probs + [1 - sum(probs)], dtype=torch.float64)
    picks = torch.multinomial(p, n, replacement=True, generator=torch.Generator().manual_seed(seed))
    cats = LAW["categories"] + [[0, 0]]
    return [cats[i] for i in picks.tolist()]


def reports(samples: list[list[int]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    acc = {"num_drafts": 100, "num_draft_tokens": 700, "num_accepted_tokens": 90,
           "accepted_per_pos": [50, 20, 10, 5, 3, 1, 1]}
    prompt = {"set": "gsm8k", "question_id": 1, "prompt_ids": [1, 2, 3], "output_ids": [4, 5, 6, 2],
              "plain_ids": [4, 5, 6, 2]}
    sf = {"num_speculative_tokens": 7, "prompts": [prompt], "acceptance": acc, "law": LAW}
    vl = {"num_speculative_tokens": 7, "prompts": [{"output_ids": [4, 5, 6, 2]}], "acceptance": copy.deepcopy(acc),
          "samples": draw(LAW["probs"], 600, seed=1) if samples is None else samples}
    return sf, vl


def failures(sf: dict[str, Any], vl: dict[str, Any]) -> list[str]:
    verdicts = compare(sf, vl, rate_tol=0.05, tau_tol=0.05, alpha=1e-3)
    return [name for name, ok, _ in verdicts.rows if not ok]


def test_agreement_passes_and_the_negative_control_rejects() -> None:
    sf, vl = reports()
    assert failures(sf, vl) == []


def test_a_different_token_fails() -> None:
    sf, vl = reports()
    vl["prompts"][0]["output_ids"] = [4, 5, 9, 2]
    assert failures(sf, vl) == ["vLLM == specframe gsm8k#1"]


def test_specframe_must_be_lossless() -> None:
    sf, vl = reports()
    sf["prompts"][0]["plain_ids"] = [4, 5]
    assert failures(sf, vl) == ["specframe lossless gsm8k#1"]


def test_acceptance_beyond_tolerance_fails() -> None:
    sf, vl = reports()
    vl["acceptance"]["accepted_per_pos"][0] = 40  # rate 0.40 against 0.50
    vl["acceptance"]["num_accepted_tokens"] = 80
    assert failures(sf, vl) == ["acceptance per position", "acceptance length"]


def test_samples_from_the_wrong_law_fail() -> None:
    sf, vl = reports(draw(LAW["wrong_probs"], 600, seed=2))
    assert failures(sf, vl) == ["output law at T=1.0", "negative control: law at T=0.8"]


def test_main_prints_the_count_and_exits_nonzero_on_failure(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    sf, vl = reports()
    (tmp_path / "sf.json").write_text(json.dumps(sf))
    (tmp_path / "vl.json").write_text(json.dumps(vl))
    assert main([str(tmp_path / "sf.json"), str(tmp_path / "vl.json")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "vllm-check: 6 passed, 0 failed"
    vl["prompts"][0]["output_ids"] = [4]
    (tmp_path / "vl.json").write_text(json.dumps(vl))
    assert main([str(tmp_path / "sf.json"), str(tmp_path / "vl.json")]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == "vllm-check: 5 passed, 1 failed"
