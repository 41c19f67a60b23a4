"""The accelerator check's captured verify step on the CPU: its code path runs on every change (the GPU runs it with
CUDA graphs when one is lent), with a tiny random model, so it needs no checkpoint."""

from __future__ import annotations

import importlib


def test_the_captured_verify_step_runs_on_cpu() -> None:
    check = importlib.import_module("accelerator_check")
    report = check.captured_verify("cpu", smoke=True)
    assert report["mode"] == "compile" and report["backend"] == "eager" and report["requests"] == 16
    assert report["exact"], report
    assert report["buckets"] and 1 <= report["graphs_compiled"] <= len(report["buckets"])
    assert report["at_most_once_per_bucket"]
    assert check.passed({"captured_verify": report}) and not check.passed({"captured_verify": {**report,
                                                                                               "exact": False}})
