"""Two threads on one pipeline (a web handler, a notebook with a background job): calls on one target run one
after the other (the target's lock, `specframe.decode.exclusive`), and each returns what it returns alone.

Without the lock, two DARTree calls mixed the layer taps the drafter reads from the shared model ("Sizes of
tensors must match", "decoder layer(s) ... did not run"), and two first calls of a `budget: auto` pipeline without
a cached profile measured the same target at once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusion_testkit import TARGET_LAYERS, write_published_checkpoint
from specframe_hf.testing import two_way_lm as make_two_way

from specframe.errors import GenerationError
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost

PROMPTS = [torch.tensor([[5, 6, 7, 8, 9, 10]]), torch.tensor([[4, 4, 9, 2, 8, 1, 7, 3, 12]])]
NEW_TOKENS = 12
#: Seconds a thread may take; far more than these tiny decodes need (a hang fails instead of blocking the suite).
DEADLINE_S = 120


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[PluginHost, Any, Path]:
    from specframe_hf.testing import tiny_causal_lm

    model = make_two_way(tiny_causal_lm("qwen3", seed=7, num_layers=TARGET_LAYERS))
    checkpoint = tmp_path_factory.mktemp("domino")
    write_published_checkpoint(checkpoint, "domino", seed=21, target=model, block_size=6)
    return PluginHost(allowlist=["diffusion", "hf", "trees", "verifiers"]), model, checkpoint


def dartree(setup: tuple[PluginHost, Any, Path], budget: int | str) -> Pipeline:
    from specframe_hf import HFTarget

    host, model, checkpoint = setup
    config = {"budget": budget, "drafter": {"type": "domino", "checkpoint": str(checkpoint), "top_k": 4},
              "corrector": {"type": "ar"}, "tree_builder": {"type": "dartree", "mode": "pruned", "width": 3},
              "pruner": {"type": "deferred_topb"}, "verifier": {"type": "auto"},
              "generation": {"stop_at_eos": False}, "auto_budget": {"max_budget": 10}}
    return Pipeline.from_dict(config, target=HFTarget.from_model(model), host=host)


def in_threads(calls: list[Any]) -> list[Any]:
    """Run each call in its own thread, started together; their results (or the exceptions they raised)."""
    out: list[Any] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def work(i: int) -> None:
        start.wait()
        try:
            out[i] = calls[i]()
        except Exception as exc:  # reported by the test, not swallowed
            out[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S)
        assert not t.is_alive(), "a thread did not finish: concurrent calls deadlocked"
    return out


def test_two_threads_on_one_dartree_pipeline_and_its_ablation_get_their_own_outputs(setup) -> None:
    pipe = dartree(setup, 10)
    ablation = pipe.with_stage("tree_builder", {"type": "chain"}, pruner={"type": "none"})  # shares the target
    alone = [pipe.generate(p, NEW_TOKENS).tokens for p in PROMPTS]
    alone_chain = ablation.generate(PROMPTS[0], NEW_TOKENS).tokens
    for _ in range(2):
        got = in_threads([lambda: pipe.generate(PROMPTS[0], NEW_TOKENS), lambda: pipe.generate(PROMPTS[1], NEW_TOKENS),
                          lambda: ablation.generate(PROMPTS[0], NEW_TOKENS),
                          lambda: pipe.generate_batch(PROMPTS, NEW_TOKENS, batch_size=2)])
        errors = [g for g in got if isinstance(g, BaseException)]
        assert not errors, errors
        assert [got[0].tokens, got[1].tokens, got[2].tokens] == [*alone, alone_chain]
        assert [r.tokens for r in got[3]] == alone


def test_two_first_calls_of_a_budget_auto_pipeline_without_a_profile_measure_once(
        setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))  # no cached profile: the first call measures
    pipe = dartree(setup, "auto")
    got = in_threads([lambda: pipe.generate(PROMPTS[0], NEW_TOKENS), lambda: pipe.generate(PROMPTS[1], NEW_TOKENS)])
    errors = [g for g in got if isinstance(g, BaseException)]
    assert not errors, errors
    reference = dartree(setup, 10)
    assert [g.tokens for g in got] == [reference.generate(p, NEW_TOKENS).tokens for p in PROMPTS]  # greedy-exact


def test_a_callback_that_decodes_on_the_same_target_is_refused_not_deadlocked(setup) -> None:
    pipe = dartree(setup, 10)
    finished: list[int] = []

    def on_finish(index: int, outcome: Any) -> None:
        finished.append(index)
        pipe.generate(PROMPTS[1], 2)  # would wait for the call that runs this callback

    got = in_threads([lambda: pipe.generate_batch(PROMPTS, NEW_TOKENS, on_finish=on_finish)])
    assert isinstance(got[0], GenerationError) and "would wait for itself" in got[0].message, got
    assert finished and pipe.generate(PROMPTS[0], 2).tokens  # the lock was released
