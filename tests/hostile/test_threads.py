"""Threads on one pipeline (issue 28, class 3), on the toy target: calls that share a target are serialised by its
lock (`specframe.decode.exclusive`) and each returns what it returns alone. The same on a DARTree pipeline whose
drafter taps the shared model's layers: ``plugins/specframe-diffusion/tests/test_diffusion_threads.py``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from specframe.decode.exclusive import exclusive, target_lock
from specframe.errors import GenerationError
from specframe.testing.load_window import fix_machine_load

from .probe import toy_pipe

PROMPTS = ["what is two and two", "hi", "name three colours of the rainbow please", "ho"]
DEADLINE_S = 60


def in_threads(calls: list[Any]) -> list[Any]:
    out: list[Any] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def work(i: int) -> None:
        start.wait()
        try:
            out[i] = calls[i]()
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S)
        assert not t.is_alive(), "a thread did not finish: concurrent calls deadlocked"
    return out


@pytest.mark.parametrize("budget", ["8", "auto"])
def test_four_threads_on_one_pipeline_and_its_ablation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       budget: str) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))  # `auto`: no profile yet, the first call measures
    fix_machine_load(monkeypatch)
    pipe = toy_pipe(tmp_path, budget=budget)
    ablation = pipe.with_stage("drafter", {"type": "toy", "depth": 2})
    (tmp_path / "ref").mkdir()
    reference = toy_pipe(tmp_path / "ref", budget="8")  # another target object: its own lock
    alone = [reference.generate(p, 10).tokens for p in PROMPTS]
    for _ in range(3):
        got = in_threads([lambda p=p: pipe.generate(p, 10) for p in PROMPTS[:2]]
                         + [lambda: ablation.generate(PROMPTS[2], 10),
                            lambda: pipe.generate_batch(PROMPTS, 10, batch_size=2)])
        assert not [g for g in got if isinstance(g, BaseException)], got
        assert [g.tokens for g in got[:3]] == alone[:3]  # greedy: each call's output is its output alone
        assert [r.tokens for r in got[3]] == alone


def test_the_lock_belongs_to_the_target_and_refuses_a_call_from_its_own_holder(tmp_path: Path) -> None:
    pipe = toy_pipe(tmp_path)
    assert target_lock(pipe.target) is target_lock(pipe.with_stage("drafter", {"type": "toy", "depth": 2}).target)
    with exclusive(pipe.target, "a test"), pytest.raises(GenerationError, match="would wait for itself"):
        pipe.generate("hi", 4)
    assert pipe.generate("hi", 4).tokens  # released


def test_a_call_waits_for_the_running_one(tmp_path: Path) -> None:
    pipe = toy_pipe(tmp_path)
    order: list[str] = []
    holding = threading.Event()

    def hold() -> None:
        with exclusive(pipe.target, "a test"):
            holding.set()
            threading.Event().wait(0.3)
            order.append("first ends")

    def decode() -> None:
        holding.wait(DEADLINE_S)
        pipe.generate("hi", 4)
        order.append("second ends")

    in_threads([hold, decode])
    assert order == ["first ends", "second ends"]


def test_a_callback_that_joins_a_nested_call_on_another_thread_ends_with_a_message(tmp_path: Path) -> None:
    """A ``stream`` callback that hands ``generate`` on the same pipeline to another thread and joins it waited
    forever (the other thread waits for the lock the callback's caller holds). The nested call now gives up with
    a GenerationError once the holder has stayed in that one callback for the lock's patience; both end."""
    pipe = toy_pipe(tmp_path)
    nested: list[Any] = []

    def nested_call() -> None:
        try:
            nested.append(pipe.generate("ho", 4))
        except GenerationError as exc:
            nested.append(exc)

    def stream(_text: str) -> None:
        if not nested:
            worker = threading.Thread(target=nested_call, daemon=True)
            worker.start()
            worker.join(DEADLINE_S)  # bounded, so a regression fails the test instead of hanging it
            assert not worker.is_alive(), "the nested call is still waiting"

    outer = in_threads([lambda: pipe.generate("hi", 6, stream=stream)])[0]
    assert not isinstance(outer, BaseException), outer
    assert len(nested) == 1 and isinstance(nested[0], GenerationError), nested
    assert "callback has not returned" in nested[0].message and nested[0].hint


def test_a_call_waits_behind_quick_callbacks(tmp_path: Path) -> None:
    """Waiting behind a decode whose stream callback returns promptly is an ordinary wait, never refused."""
    pipe = toy_pipe(tmp_path)
    started = threading.Event()

    def slow_stream(_text: str) -> None:
        started.set()
        threading.Event().wait(0.05)

    got = in_threads([lambda: pipe.generate("what is two and two", 40, stream=slow_stream),
                      lambda: (started.wait(DEADLINE_S), pipe.generate("hi", 4))[1]])
    assert not [g for g in got if isinstance(g, BaseException)], got
