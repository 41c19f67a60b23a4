"""The decode loop on an exact toy target: greedy equality with plain decoding, stopping rules, records."""

from __future__ import annotations

import types
from typing import Literal

import pytest

from specframe import ComponentConfig, ComponentSpec, PluginHost, hookimpl
from specframe.errors import GenerationError
from specframe.pipeline import Pipeline
from specframe.testing.toy import ToyDrafter, ToyTarget

from . import fake_components

BASE = {
    "sampling": {"temperature": 0.0},
    "budget": 4,
    "drafter": {"type": "toy", "depth": 4},
    "corrector": {"type": "marginal"},
    "tree_builder": {"type": "spine"},
    "pruner": {"type": "keep_all"},
    "verifier": {"type": "auto"},
}


class ToyConfig(ComponentConfig):
    type: Literal["toy"] = "toy"
    depth: int = 4


def make_host(target: ToyTarget, distance: float) -> PluginHost:
    mod = types.ModuleType("toy_plugin")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="toy", config=ToyConfig, summary="toy",
                            factory=lambda cfg, ctx: ToyDrafter(target, depth=cfg.depth, distance=distance))

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    host = PluginHost(autoload=False)
    host.register(fake_components, "fake")
    host.register(mod, "toy")
    return host


def plain_greedy(target: ToyTarget, prompt: list[int], n: int, eos: set[int] = frozenset()) -> list[int]:
    seq = list(prompt)
    out: list[int] = []
    while len(out) < n:
        tok = int(target.logits_after(seq).argmax())
        seq.append(tok)
        out.append(tok)
        if tok in eos:
            break
    return out


@pytest.mark.parametrize("distance", [0.0, 0.8, 5.0])
@pytest.mark.parametrize("n", [1, 2, 7, 30])
def test_greedy_output_equals_plain_decoding(distance: float, n: int) -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, distance))
    for prompt in ([1], [2, 5, 3], [6, 6, 0, 1]):
        result = pipe.generate(prompt, n)
        assert result.tokens == plain_greedy(target, prompt, n)
        assert len(result.tokens) == n and result.stop_reason == "length"
        assert sum(r.committed for r in result.rounds) == n - 1  # the prefill token is not a round's
        if distance == 0.0 and n > 5:
            assert result.tau > 2.0  # a drafter equal to the target is accepted at every depth


def test_eos_stops_and_is_kept() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    free = plain_greedy(target, [1], 40)
    eos = free[5]
    target.eos_token_ids = (eos,)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.0))
    result = pipe.generate([1], 40)
    assert result.tokens == plain_greedy(target, [1], 40, {eos}) and result.tokens[-1] == eos
    assert result.stop_reason == "eos"


def test_records_and_timing() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.5))
    result = pipe.generate([1, 2], 12)
    assert result.num_rounds == len(result.rounds) > 0
    assert all(set(r.stage_ns) == {"draft", "build", "prune", "target", "verify", "commit"} for r in result.rounds)
    assert all(0 <= r.accepted <= r.nodes <= 4 for r in result.rounds)
    assert result.tau == pytest.approx(sum(r.committed for r in result.rounds) / result.num_rounds)
    assert result.summary()["new_tokens"] == 12


def test_with_stage_reuses_target_and_swaps_one_stage() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.5))
    other = pipe.with_stage("pruner", {"type": "keep_all", "beta": -0.1})
    assert other.target is pipe.target and other.stages.verifier is pipe.stages.verifier
    assert other.stages.pruner is not pipe.stages.pruner
    # Stages may read the drafter's section (heads load from its checkpoint): a new drafter rebuilds them.
    shallow = pipe.with_stage("drafter", {"type": "toy", "depth": 1})
    assert shallow.target is pipe.target and shallow.stages.corrector is not pipe.stages.corrector
    assert shallow.generate([1], 10).tokens == other.generate([1], 10).tokens == pipe.generate([1], 10).tokens


@pytest.mark.parametrize("bad", [0, -3])
def test_bad_generation_arguments(bad: int) -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.5))
    with pytest.raises(GenerationError, match="max_new_tokens"):
        pipe.generate([1], bad)
    with pytest.raises(GenerationError, match="tokenizer"):
        pipe.generate("text needs a tokenizer", 3)
    target.max_length = 4
    with pytest.raises(GenerationError, match="context"):
        pipe.generate([1, 2, 3, 4], 3)


@pytest.mark.parametrize("max_new, stop, message", [
    (10**12, None, "max_new_tokens must be an integer from 1 to"),
    (3, [""], "stop strings must be non-empty"),
    (3, ["x", ""], "stop strings must be non-empty"),
])
def test_generate_refuses_sizes_and_stops_that_cannot_work(max_new: int, stop: list[str] | None,
                                                           message: str) -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.5))
    with pytest.raises(GenerationError, match=message):
        pipe.generate([1], max_new, stop=stop)


def test_context_window_limits_tree_depth() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    target.max_length = 12
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.0))
    result = pipe.generate([1, 2], 50)
    assert result.stop_reason == "context" and len(result.tokens) == 10
    assert result.tokens == plain_greedy(target, [1, 2], 10)


def test_with_stage_replaces_whole_sections_and_top_level_fields() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict({**BASE, "tree_builder": {"type": "spine", "width": 2}}, target=target,
                              host=make_host(target, 0.5))
    swapped = pipe.with_stage("tree_builder", {"type": "spine"}, budget=2, corrector={"type": "identity"})
    assert swapped.config.tree_builder.width == 1  # the old section's width is not merged in
    assert swapped.config.budget == 2 and swapped.config.corrector.type == "identity"
    assert swapped.config.drafter == pipe.config.drafter and swapped.stages.drafter is pipe.stages.drafter
    assert swapped.target is pipe.target


def test_a_decode_makes_no_plugin_hook_calls() -> None:
    """Pluggy is used while pipelines are built, never in the decode loop."""
    target = ToyTarget.random(vocab_size=7, seed=3)
    host = make_host(target, 0.5)
    pipe = Pipeline.from_dict(BASE, target=target, host=host)
    calls: list[str] = []
    undo = host.pm.add_hookcall_monitoring(lambda name, impls, kwargs: calls.append(name), lambda *args: None)
    try:
        result = pipe.generate([1, 2], 12)
    finally:
        undo()
    assert result.num_rounds > 0 and calls == []


class _CharTokenizer:
    """Token ``i`` decodes to the letter ``'a' + i`` (so text positions are token positions)."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(ord("a") + i) for i in ids)


def _stop_case(text: str, where: str) -> tuple[str, int]:
    """A 2-letter stop string whose first occurrence ends at a token inside a round (``mid``) or starts on the
    last token of one round and ends on the first of the next (``across``); rounds commit 5 tokens."""
    for p in range(1, len(text) - 1):
        stop, end = text[p:p + 2], p + 1  # end: index of the stop's last token
        if text.find(stop) != p:
            continue
        slot = (end - 1) % 5  # position of the last token inside its round's 5 committed tokens
        if (where == "mid" and slot in (1, 2)) or (where == "across" and slot == 0):
            return stop, end
    raise AssertionError("no suitable stop string in the free text")


@pytest.mark.parametrize("where", ["mid", "across"])
def test_stop_string_trims_tokens_counts_and_stream(where: str) -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    target.tokenizer = _CharTokenizer()  # type: ignore[attr-defined]
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.0))  # every draft is accepted
    free = plain_greedy(target, [1], 40)
    text = _CharTokenizer().decode(free)
    stop, end = _stop_case(text, where)
    pieces: list[str] = []
    result = pipe.generate([1], 40, stop=[stop], stream=pieces.append)
    assert result.stop_reason == "stop_string"
    assert result.tokens == free[:end + 1]  # nothing accepted past the stop string is reported
    assert result.text == text[:end - 1]
    assert sum(r.committed for r in result.rounds) == len(result.tokens) - 1
    assert all(r.accepted <= r.committed for r in result.rounds)
    assert result.rounds[-1].committed == (end - 1) % 5 + 1
    assert result.tau == pytest.approx((len(result.tokens) - 1) / result.num_rounds)
    assert result.summary()["new_tokens"] == end + 1
    assert "".join(pieces) == result.text  # the stream never showed a letter of the stop string


def test_stream_flushes_a_held_back_tail_at_the_end() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    target.tokenizer = _CharTokenizer()  # type: ignore[attr-defined]
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.0))
    text = _CharTokenizer().decode(plain_greedy(target, [1], 12))
    pieces: list[str] = []
    result = pipe.generate([1], 12, stop=[text[-1] + "zz"], stream=pieces.append)  # a prefix of it ends the text
    assert result.stop_reason == "length" and result.text == text and "".join(pieces) == text


def test_empty_stop_string_is_refused() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.0))
    with pytest.raises(GenerationError, match="non-empty"):
        pipe.generate([1], 4, stop=[""])
