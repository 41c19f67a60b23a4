"""Host work of the decode loop that must not grow with the tokens a request emits.

* A request without stop strings or a stream calls its tokenizer once, at the end (``decode`` of the new tokens);
  one with stop strings still finds a stop string that spans two rounds, and one that streams still streams the
  text that the result ends with.
* A request's rounds are kept as a few integers per round (`RoundLog`), read back as the same `RoundRecord`s
  every consumer reads (``result.rounds``, ``as_dict``'s ``rounds_detail``, τ), with the round's stage times.
* A round's emitted tokens reach every row's token history in one host-to-device copy, not one per row.
"""

from __future__ import annotations

import pickle
from collections import Counter
from dataclasses import asdict
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

from specframe.interfaces import DecodeState
from specframe.metrics.records import STAGES, GenerationResult, RoundLog, RoundRecord
from specframe.pipeline import Pipeline, Request
from specframe.testing.toy import ToyTarget
from specframe.types import SamplingParams

from .test_decode_loop import BASE, _CharTokenizer, _stop_case, make_host, plain_greedy


class _CountingTokenizer(_CharTokenizer):
    """The letter tokenizer, counting its ``decode`` calls."""

    def __init__(self) -> None:
        self.calls = 0

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        self.calls += 1
        return super().decode(ids, skip_special_tokens)


def _pipe(tokenizer: _CharTokenizer, distance: float = 0.0) -> tuple[Pipeline, ToyTarget]:
    target = ToyTarget.random(vocab_size=7, seed=3)
    target.tokenizer = tokenizer  # type: ignore[attr-defined]
    return Pipeline.from_dict(BASE, target=target, host=make_host(target, distance)), target


@pytest.mark.parametrize("new_tokens", [8, 64])
def test_a_request_without_stops_or_stream_decodes_its_text_once(new_tokens: int) -> None:
    tok = _CountingTokenizer()
    pipe, target = _pipe(tok, distance=0.8)  # some drafts rejected: rounds commit 1 to 5 tokens
    result = pipe.generate([1], new_tokens)
    assert result.text == _CharTokenizer().decode(plain_greedy(target, [1], new_tokens))
    assert result.num_rounds > 1 and tok.calls == 1  # not per token, not per round


def test_a_batch_without_stops_or_stream_decodes_each_text_once() -> None:
    tok = _CountingTokenizer()
    pipe, target = _pipe(tok, distance=0.8)
    prompts = [[1], [2, 3], [4, 5, 6]]
    results = pipe.generate_batch(prompts, 30, batch_size=2)  # the third joins when a row leaves
    for prompt, result in zip(prompts, results, strict=True):
        assert result.text == _CharTokenizer().decode(plain_greedy(target, prompt, 30))  # type: ignore[union-attr]
    assert tok.calls == len(prompts)


def test_stop_strings_are_still_found_across_rounds_and_streams_still_stream() -> None:
    tok = _CountingTokenizer()
    pipe, target = _pipe(tok)  # every draft accepted: rounds commit 5 tokens
    free = plain_greedy(target, [1], 40)
    text = _CharTokenizer().decode(free)
    stop, end = _stop_case(text, "across")  # the stop string's letters come from two rounds
    results = pipe.generate_batch([Request([1], stop=[stop]), Request([1])], 40)
    stopped, plain = results
    assert stopped.stop_reason == "stop_string" and stopped.text == text[:end - 1]  # type: ignore[union-attr]
    assert stopped.tokens == free[:end + 1]  # type: ignore[union-attr]
    assert plain.text == text  # type: ignore[union-attr]
    pieces: list[str] = []
    streamed = pipe.generate([1], 40, stream=pieces.append)
    assert streamed.text == text and "".join(pieces) == text and len(pieces) > 1  # text shown as it grew


class _FromHost(TorchFunctionMode):
    """Counts tensors made from Python data and ``.to`` moves (a host-to-device copy each on an accelerator)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        name = getattr(func, "__name__", str(func))
        if name in ("tensor", "as_tensor", "to"):
            self.calls[name] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("rows", [1, 8])
def test_a_rounds_tokens_reach_every_rows_history_in_one_copy(rows: int) -> None:
    states = [DecodeState(torch.tensor([[b, b + 1]]), 2, SamplingParams(temperature=0.0), capacity=4)
              for b in range(rows)]
    emitted = [[10 * b + i for i in range(b % 4 + 1)] for b in range(rows)]  # 1 to 4 tokens; some rows grow
    with _FromHost() as moves:
        DecodeState.append_rows(states, emitted)
    assert moves.calls["tensor"] + moves.calls["as_tensor"] == 1 and moves.calls["to"] <= 1, moves.calls
    for b, state in enumerate(states):
        assert state.tokens.tolist() == [[b, b + 1, *emitted[b]]]


RECORDS = [RoundRecord(nodes=4, depth=3, accepted=2, committed=3, stage_ns={"draft": 5, "target": 9},
                       path_ranks=[0, 1], end_has_children=True),
           RoundRecord(nodes=0, depth=0, accepted=0, committed=1, drafted=False, budget=0),
           RoundRecord(nodes=7, depth=2, accepted=1, committed=1, budget=7, path_ranks=[2])]


def test_a_round_log_reads_back_the_records_it_was_given() -> None:
    log = RoundLog(RECORDS)
    assert len(log) == 3 and list(log) == RECORDS and log == RECORDS and log[-1] == RECORDS[2]
    assert log[1:] == RECORDS[1:] and log[::-1] == RECORDS[::-1]
    assert log.column("committed") == [3, 1, 1] and log.column("budget") == [-1, 0, 7]
    assert [r.path_ranks for r in log] == [[0, 1], [], [2]] and log.column("end_has_children") == [1, 0, 0]
    assert pickle.loads(pickle.dumps(log)) == RECORDS
    with pytest.raises(IndexError):
        log[3]
    kwargs = {"tokens": [1, 2, 3, 4, 5, 6], "text": None, "prompt_len": 2, "prefill_ns": 1, "total_ns": 9,
              "stop_reason": "length"}
    ours, plain = GenerationResult(rounds=log, **kwargs), GenerationResult(rounds=RECORDS, **kwargs)
    assert ours.as_dict() == plain.as_dict() and ours.tau == plain.tau == 5 / 3
    assert ours.as_dict()["rounds_detail"] == [asdict(r) for r in RECORDS]


def test_the_loops_records_carry_every_field_and_the_rounds_stage_times() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict({**BASE, "metrics": {"stage_timing": True}}, target=target,
                              host=make_host(target, 0.8))
    results = pipe.generate_batch([[1], [2, 3]], 12, batch_size=2)
    for result in results:
        assert isinstance(result, GenerationResult) and result.num_rounds > 1
        assert sum(r.committed for r in result.rounds) == len(result.tokens) - 1
        assert all(set(r.stage_ns) == set(STAGES) and r.drafted and r.budget is None for r in result.rounds)
        assert all(0 <= r.accepted <= min(r.nodes, r.committed) and r.depth <= 4 for r in result.rounds)
    first, second = (r.rounds[0] for r in results)  # type: ignore[union-attr]
    assert first.stage_ns == second.stage_ns  # one round, one set of stage times
    first.stage_ns["draft"] = -1  # a record read back is the reader's own
    assert results[1].rounds[0].stage_ns["draft"] != -1  # type: ignore[union-attr]
