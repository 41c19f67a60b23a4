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
DEPTH = 3
OUTPUT = [4, 5, 6, 7, 8, 9, 10, 11, 12, 2]


def draw(probs: list[float], n: int, seed: int) -> list[list[int]]:
    """``n`` continuations from the law ``probs`` over LAW's categories (+ other, written as [0, 0])."""
    p = torch.tensor(probs + [1 - sum(probs)], dtype=torch.float64)
    picks = torch.multinomial(p, n, replacement=True, generator=torch.Generator().manual_seed(seed))
    cats = LAW["categories"] + [[0, 0]]
    return [cats[i] for i in picks.tolist()]


def top(first: int, gap: float = 1.0) -> dict[str, list[Any]]:
    """One depth's candidates: ``first`` best, then two others, ``gap`` apart from it."""
    return {"ids": [first, 90, 91], "logprobs": [-0.1, -0.1 - gap, -3.0]}


def round_(start: int, accepted: int, gap: float = 1.0) -> dict[str, Any]:
    """A round whose drafts are the output's next tokens up to ``accepted``, then a wrong one (90 + ...)."""
    ids = [OUTPUT[start + d] if d < accepted and start + d < len(OUTPUT) else 80 + d for d in range(DEPTH)]
    return {"start": start, "accepted": accepted, "top": [top(t, gap) for t in ids]}


#: Rounds of OUTPUT: start 1 accepts 2 (commits 3), 4 accepts 0, 5 accepts 3, 9 accepts 0.
ROUNDS = [round_(1, 2), round_(4, 0), round_(5, 3), round_(9, 0)]


def counters(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return {"num_drafts": len(rounds), "num_draft_tokens": DEPTH * len(rounds),
            "num_accepted_tokens": sum(r["accepted"] for r in rounds),
            "accepted_per_pos": [sum(1 for r in rounds if r["accepted"] > d) for d in range(DEPTH)]}


def reports(samples: list[list[int]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    prompt = {"set": "gsm8k", "question_id": 1, "prompt_ids": [1, 2, 3], "output_ids": OUTPUT,
              "plain_ids": list(OUTPUT), "rounds": copy.deepcopy(ROUNDS)}
    sf = {"num_speculative_tokens": DEPTH, "prompts": [prompt], "acceptance": counters(ROUNDS), "law": LAW}
    vl = {"num_speculative_tokens": DEPTH, "acceptance": counters(ROUNDS),
          "prompts": [{"output_ids": list(OUTPUT), "rounds": copy.deepcopy(ROUNDS), "acceptance": counters(ROUNDS)}],
          "samples": draw(LAW["probs"], 600, seed=1) if samples is None else samples}
    return sf, vl


def set_vllm_rounds(vl: dict[str, Any], rounds: list[dict[str, Any]]) -> None:
    """vLLM's rounds and its (consistent) counters."""
    vl["prompts"][0]["rounds"] = rounds
    vl["prompts"][0]["acceptance"] = counters(rounds)
    vl["acceptance"] = counters(rounds)


def failures(sf: dict[str, Any], vl: dict[str, Any], *, law: bool = True) -> list[str]:
    verdicts = compare(sf, vl, logprob_tol=1e-3, alpha=1e-3, law=law)
    return [name for name, ok, _ in verdicts.rows if not ok]


def test_agreement_passes_and_the_negative_control_rejects() -> None:
    sf, vl = reports()
    assert failures(sf, vl) == []


def test_a_different_token_fails_target_numerics() -> None:
    sf, vl = reports()
    vl["prompts"][0]["output_ids"] = [4, 5, 9, 2]
    assert failures(sf, vl, law=False) == ["target numerics gsm8k#1"]


def test_specframe_must_be_lossless() -> None:
    sf, vl = reports()
    sf["prompts"][0]["plain_ids"] = [4, 5]
    assert failures(sf, vl) == ["specframe lossless gsm8k#1"]


def test_one_round_accepting_less_fails_where_the_totals_would_pass() -> None:
    """vLLM's round at 5 accepts 2 instead of 3 with a clear best candidate (gap 1.0): one count of depth 3 moves,
    which the former aggregate test (rates within 0.05 over many rounds) would let through."""
    sf, vl = reports()
    rounds = copy.deepcopy(ROUNDS)
    rounds[2] = round_(5, 2)
    rounds.insert(3, round_(8, 0))
    rounds[4] = round_(9, 0)
    set_vllm_rounds(vl, rounds)
    assert failures(sf, vl, law=False) == ["drafter rounds gsm8k#1", "drafter log-probabilities"]


def test_a_divergence_at_a_near_tie_is_explained() -> None:
    """The same change at a near tie (gap 1e-4 in both engines at the deciding depth) passes, and the rounds after
    it that start elsewhere are left unaligned."""
    sf, vl = reports()
    sf["prompts"][0]["rounds"][2]["top"][2] = top(OUTPUT[7], gap=1e-4)
    rounds = copy.deepcopy(ROUNDS)
    rounds[2] = round_(5, 2)
    rounds[2]["top"][2] = {"ids": [90, OUTPUT[7], 91], "logprobs": [-0.1, -0.1 - 1e-4, -3.0]}
    rounds[3:] = [round_(8, 0), round_(10, 0)]
    set_vllm_rounds(vl, rounds)
    verdicts = compare(sf, vl, logprob_tol=1e-3, law=False)
    assert [name for name, ok, _ in verdicts.rows if not ok] == []
    detail = dict((name, d) for name, _, d in verdicts.rows)["drafter rounds gsm8k#1"]
    assert "near ties: round at 5" in detail and "unaligned rounds: specframe 1, vLLM 2" in detail


def test_drafts_past_the_end_of_the_output_are_not_compared() -> None:
    """The last round starts 1 token before the end: specframe counts the one draft that made it into the output,
    vLLM also the two it verified past the token limit; within the output both accepted 1. One draft short fails."""
    sf, vl = reports()
    sf["prompts"][0]["rounds"][3] = round_(9, 1)
    rounds = copy.deepcopy(ROUNDS)
    rounds[3] = round_(9, 3)
    set_vllm_rounds(vl, rounds)
    assert failures(sf, vl, law=False) == []
    rounds[3] = round_(9, 0)
    set_vllm_rounds(vl, rounds)
    assert failures(sf, vl, law=False) == ["drafter rounds gsm8k#1", "drafter log-probabilities"]


def test_rounds_that_never_align_fail() -> None:
    """vLLM's rounds start where none of specframe's does (2, 3, 6, 7 against 1, 4, 5, 9): nothing is compared,
    nothing diverged, and the prompt fails."""
    sf, vl = reports()
    set_vllm_rounds(vl, [dict(r, start=s) for r, s in zip(ROUNDS, (2, 3, 6, 7), strict=True)])
    assert failures(sf, vl, law=False) == ["drafter rounds gsm8k#1"]


def test_log_probabilities_beyond_the_bound_fail() -> None:
    sf, vl = reports()
    vl["prompts"][0]["rounds"][1]["top"][1]["logprobs"][1] -= 2e-3  # counts unchanged
    assert failures(sf, vl, law=False) == ["drafter log-probabilities"]


def test_vllm_counters_must_match_its_rounds() -> None:
    sf, vl = reports()
    vl["prompts"][0]["acceptance"]["accepted_per_pos"][0] += 1
    assert failures(sf, vl, law=False) == ["vLLM counters gsm8k#1"]


def test_samples_from_the_wrong_law_fail() -> None:
    sf, vl = reports(draw(LAW["wrong_probs"], 600, seed=2))
    assert failures(sf, vl) == ["output law at T=1.0", "negative control: law at T=0.8"]


def write(tmp_path: Path, sf: dict[str, Any], vl: dict[str, Any]) -> list[str]:
    (tmp_path / "sf.json").write_text(json.dumps(sf))
    (tmp_path / "vl.json").write_text(json.dumps(vl))
    return [str(tmp_path / "sf.json"), str(tmp_path / "vl.json")]


def test_main_prints_the_count_and_exits_nonzero_on_failure(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    sf, vl = reports()
    assert main(write(tmp_path, sf, vl)) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "vllm-check: 7 passed, 0 failed"
    vl["prompts"][0]["output_ids"] = [4]
    assert main(write(tmp_path, sf, vl)) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == "vllm-check: 6 passed, 1 failed"


def test_a_control_passes_only_when_a_drafter_check_fails(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``--control``: a wrong export must be caught by a drafter check; the same reports as the real export (every
    drafter check passing) make the control itself fail; no samples are needed."""
    sf, vl = reports(samples=[])
    assert main([*write(tmp_path, sf, vl), "--control", "noise"]) == 1
    assert "NOT detected" in capsys.readouterr().out
    vl["prompts"][0]["rounds"][0]["top"][0]["logprobs"][0] += 0.05
    assert main([*write(tmp_path, sf, vl), "--control", "noise"]) == 0
    assert "detected (1 drafter checks failed)" in capsys.readouterr().out
