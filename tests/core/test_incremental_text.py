"""`IncrementalText`: equal to decoding the whole output, cut at the first stop string; streams only what stays;
work linear in the output.

Property tests feed random token sequences in random round sizes to the real SmolLM2 tokenizer (byte-level BPE:
multi-byte characters split over tokens, merged spaces, special tokens) and to a small byte-level BPE trained
here, and compare with ``tokenizer.decode(tokens, skip_special_tokens=True)``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specframe.decode.text import IncrementalText


def _smollm2() -> Any:
    from specframe_hf.loading import load_tokenizer
    from specframe_smollm2.cache import target_dir

    directory = target_dir()
    if not (directory / "manifest.json").is_file():
        pytest.skip("no converted SmolLM2 (run `specframe setup-target`)")
    return load_tokenizer(directory)


def _byte_bpe() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    corpus = ["The café serves crème brûlée — 😀 naïve façade.", "def f(x):\n    return x * 2\n",
              "日本語のテキスト"] * 20
    backend.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|end|>"],
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|end|>")


@pytest.fixture(scope="module", params=["smollm2", "byte_bpe"])
def tokenizer(request: pytest.FixtureRequest) -> Any:
    return _smollm2() if request.param == "smollm2" else _byte_bpe()


TEXTS = ["Hello, world! The café's crème brûlée costs 5€.\n\nNext paragraph: 😀👍🏽 done.",
         "def add(a, b):\n    return a + b\n\n\nprint(add(2, 3))  # 5",
         "日本語のテキストと English mixed — naïve façade…"]


def _stream_into(parts: list[str]) -> Any:
    return parts.append


def _check(tokenizer: Any, tokens: list[int], cuts: list[int], stops: tuple[str, ...]) -> None:
    parts: list[str] = []
    text = IncrementalText(tokenizer, stops, _stream_into(parts))
    fed: list[int] = []
    removed = None
    start = 0
    for cut in [*cuts, len(tokens)]:
        chunk = tokens[start:cut]
        start = max(start, cut)
        if not chunk:
            continue
        fed += chunk
        removed = text.add(chunk)
        if removed is not None:
            del fed[len(fed) - removed:]
            break
    final = text.finish()
    full = tokenizer.decode(fed, skip_special_tokens=True)
    if removed is None:
        assert final == full
        assert not any(s in final for s in stops)
    else:  # the shortest prefix whose text holds a stop string, cut before it
        hits = [full.find(s) for s in stops if s in full]
        assert hits and final == full[: min(hits)]
        shorter = tokenizer.decode(fed[:-1], skip_special_tokens=True)
        assert not any(s in shorter for s in stops)
    assert "".join(parts) == final  # streamed exactly the final text, in order


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_incremental_text_equals_the_full_decode(tokenizer: Any, data: st.DataObject) -> None:
    base = tokenizer.encode(data.draw(st.sampled_from(TEXTS)), add_special_tokens=False)
    noise = data.draw(st.lists(st.integers(0, min(len(tokenizer) - 1, 2000)), max_size=20))
    tokens = data.draw(st.permutations(base + noise)) if data.draw(st.booleans()) else base + noise
    cuts = sorted(data.draw(st.lists(st.integers(0, len(tokens)), max_size=12)))
    stops = tuple(data.draw(st.lists(st.sampled_from(["\n\n", "5", "😀", "return", "é", "zzz"]), max_size=2)))
    _check(tokenizer, list(tokens), cuts, stops)


@pytest.mark.parametrize("round_size", [1, 2, 3, 5])
def test_characters_split_over_tokens_survive_window_moves(tokenizer: Any, round_size: int) -> None:
    """Emoji and accented letters whose bytes span tokens, in every alignment with the rounds, then a stop."""
    tokens = tokenizer.encode("😀é👍🏽ü" * 30 + "日本 END after", add_special_tokens=False)
    cuts = list(range(round_size, len(tokens), round_size))
    _check(tokenizer, tokens, cuts, (" END",))
    _check(tokenizer, tokens, cuts, ())


def test_special_tokens_are_skipped(tokenizer: Any) -> None:
    eos = tokenizer.eos_token_id
    tokens = tokenizer.encode("Hi there", add_special_tokens=False) + [eos]
    _check(tokenizer, tokens, [1, 2], ())


def test_a_held_back_stop_prefix_is_streamed_when_the_request_ends(tokenizer: Any) -> None:
    parts: list[str] = []
    text = IncrementalText(tokenizer, ["\n\nEND"], parts.append)
    assert text.add(tokenizer.encode("ok\n\n", add_special_tokens=False)) is None
    assert "".join(parts) == "ok"  # "\n\n" may still become the stop string
    assert text.finish() == "ok\n\n" and "".join(parts) == "ok\n\n"


def test_without_a_tokenizer_it_does_nothing() -> None:
    text = IncrementalText(None, ["x"], None)
    assert text.add([1, 2, 3]) is None and text.finish() is None


class CountingTokenizer:
    """Wraps a tokenizer and counts the tokens it is asked to decode."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.decoded = 0

    def decode(self, tokens: list[int], **kwargs: Any) -> str:
        self.decoded += len(tokens)
        return self.inner.decode(tokens, **kwargs)


@pytest.mark.parametrize("length", [500, 2000])
def test_work_per_token_is_bounded(tokenizer: Any, length: int) -> None:
    counting = CountingTokenizer(tokenizer)
    tokens = (tokenizer.encode(" ".join(TEXTS), add_special_tokens=False) * 200)[:length]
    text = IncrementalText(counting, ["<never>"], None)
    for i in range(0, length, 3):  # rounds of 3 tokens
        assert text.add(tokens[i : i + 3]) is None
    text.finish()
    assert counting.decoded <= 40 * length  # windows of a few tokens per round, not the whole output
