"""The corrector ablation's table (``docs_claims.ablation_body``) for a file measured in parts: each kind measured on
its own machine carries its own status line, and a cell decoded by another budget's pipeline says so.

The reports are synthetic (``benchmarks/corrector_ablation.py``'s shape with made-up figures); no measured figure is
involved.
"""

from __future__ import annotations

from typing import Any

from specframe import docs_claims
from specframe.bench.published import status_line


def cell(method: str, shape: str, budget: int, tau: float, same_as: int | None = None) -> dict[str, Any]:
    out = {"method": method, "corrector": "none (DFlash)", "shape": shape, "budget": budget, "tau": tau,
           "draft_ms_per_round": 7.5, "drafter_ms_per_round": 5.0, "tokens_per_s": 10.0,
           "vs_plain_loop": {"value": 1.2, "low": 1.1, "high": 1.3, "n": 20}, "vs_generate": 1.3, "exact": True}
    return out if same_as is None else {**out, "same_as_budget": same_as}


def kind_result() -> dict[str, Any]:
    return {"plain_loop_tokens_per_s": 12.5, "generate_tokens_per_s": 11.0, "n": 20,
            "plain_loop_vs_generate": {"value": 1.14, "low": 1.1, "high": 1.2, "n": 20},
            "cells": [cell("DFlash chain", "chain", 8, 1.9), cell("DFlash chain", "chain", 16, 1.9, same_as=8),
                      cell("DFlash + DDTree heap", "tree", 8, 2.2), cell("DFlash + DDTree heap", "tree", 16, 2.4)]}


def protocol(start: float) -> dict[str, Any]:
    return {"split": "report", "prompts_per_set": 20, "smoke": False, "commit": "abc1234",
            "quiet": {"threads": 1, "start": start, "during_max": 1.1, "samples": 3}}


def report(parts: list[tuple[tuple[str, ...], str]]) -> dict[str, Any]:
    """A file whose ``parts`` (kinds, CPU) were measured by one run each."""
    runs = [{"kinds": list(kinds), "methods": ["DFlash + DDTree heap", "DFlash chain"], "machine": {"cpu": cpu},
             "protocol": protocol(0.1 + i / 10)} for i, (kinds, cpu) in enumerate(parts)]
    # the file's own machine and protocol: its weakest part's (every part here meets the protocol: the last)
    return {"smoke": False, "split": "report", "n": 20, "max_new_tokens": 64, "budgets": [8, 16], "threads": 1,
            "machine": {"cpu": parts[-1][1]}, "protocol": runs[-1]["protocol"], "runs": runs,
            "kinds": {kind: kind_result() for kinds, _ in parts for kind in kinds}}


def test_a_cell_of_another_budgets_pipeline_names_it_instead_of_repeating_its_figures() -> None:
    text = docs_claims.ablation_body(report([(("math",), "CPU A")]), "test")
    assert "| DFlash chain | 1.90 · 7.5 · 1.20× | as B = 8 |" in text
    assert "| DFlash + DDTree heap | 2.20 · 7.5 · 1.20× | 2.40 · 7.5 · 1.20× |" in text
    assert '"as B = 8": that budget\'s pipeline' in text


def test_kinds_measured_on_two_machines_each_carry_their_machine_and_status_line() -> None:
    data = report([(("math", "code"), "CPU A"), (("chat",), "CPU B")])
    text = docs_claims.ablation_body(data, "test")
    assert "each kind on the machine its status line names" in text
    math, chat = text.split("**chat**")
    assert "math: CPU A" in math and "code: CPU A" in math and "CPU B" not in math
    assert "chat: CPU B" in chat and "CPU A" not in chat
    assert "1-minute load 0.20 at the start" in chat and "1-minute load 0.10 at the start" in math
    assert text.endswith(f"The file as a whole, judged by its weakest part: {status_line(data)}")
    one_run = {**data, "runs": None}  # one run measured every kind: one status line, under the last table
    text = docs_claims.ablation_body(one_run, "test")
    assert text.endswith(status_line(one_run)) and text.count("CPU: ") == 1
