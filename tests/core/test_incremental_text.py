"""Incremental detokenisation and stop strings (:mod:`specframe.decode.text`) against the brute-force definition:
the text of the shortest token prefix that contains a stop string (the whole output when none does), cut where
the stop string starts, on SmolLM2's byte-level tokenizer, a SentencePiece-style tokenizer with byte fallback
(its decoder turns ``▁`` into spaces and strips the first one) and a word-level tokenizer whose decoder joins
tokens with spaces; the stream never shows what the final text drops; the work per token is bounded."""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specframe_hf.testing import tiny_tokenizer
from tokenizers import AddedToken, Tokenizer, decoders, models

from specframe.decode.text import MAX_PENDING, REPLACEMENT, IncrementalText

MODEL_DIR = Path(os.environ.get("SPECFRAME_CACHE", "~/.cache/specframe")).expanduser() / "smollm2-135m-instruct"
needs_smollm2 = pytest.mark.skipif(not (MODEL_DIR / "tokenizer.json").is_file(),
                                   reason=f"no converted SmolLM2 at {MODEL_DIR} (run `specframe setup-target`)")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------ tokenizers
#: SentencePiece-style pieces after ``<unk>`` and the 256 byte-fallback tokens ``<0x00>`` .. ``<0xFF>`` (ids 1-256).
PIECES = ["▁", "▁a", "▁hello", "a", "b", "lo", "中", "▁中", "▁the", ".", "▁▁", "ST", "OP"]


def sentencepiece_tokenizer() -> Tokenizer:
    """Llama-2's decoder on a small vocabulary: ``▁`` -> space, byte tokens fused into UTF-8 (U+FFFD per byte of
    an invalid group), the first space stripped; specials ``<s>``, ``</s>``."""
    vocab = {p: i for i, p in enumerate(["<unk>", *(f"<0x{b:02X}>" for b in range(256)), *PIECES])}
    tok = Tokenizer(models.BPE(vocab, [], unk_token="<unk>", byte_fallback=True))
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken("<s>", special=True), AddedToken("</s>", special=True)])
    return tok


SP = sentencepiece_tokenizer()
SP_SPECIALS = [SP.token_to_id("<s>"), SP.token_to_id("</s>")]
WORDS = tiny_tokenizer(["hello", "world", "STOP", "a", "b"])  # ids 0-5 specials (<pad> <s> </s> <unk> ...)


@functools.cache
def smollm2() -> Any:
    """SmolLM2's tokenizer, loaded on first use (collection works without the cache)."""
    from specframe_hf.loading import load_tokenizer

    return load_tokenizer(MODEL_DIR)


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def reference(tokenizer: Any, tokens: list[int], stops: Sequence[str]) -> tuple[list[int], str, bool]:
    """(kept tokens, text, stopped) by definition, decoding every prefix."""
    for n in range(1, len(tokens) + 1):
        text = decode(tokenizer, tokens[:n])
        hits = [text.find(s) for s in stops if s in text]
        if hits:
            return tokens[:n], text[:min(hits)], True
    return tokens, decode(tokenizer, tokens), False


def run(tokenizer: Any, tokens: list[int], stops: Sequence[str], rounds: list[int]
        ) -> tuple[list[int], str | None, bool, list[str]]:
    """Feed ``tokens`` in rounds of the given sizes as the decode loop does; return (kept tokens, final text,
    stopped, streamed pieces)."""
    pieces: list[str] = []
    text = IncrementalText(tokenizer, stops, pieces.append)
    kept: list[int] = []
    sizes = iter(rounds)
    while len(kept) < len(tokens):
        batch = tokens[len(kept):len(kept) + next(sizes, 1)]
        kept += batch
        removed = text.add(batch)
        if removed is not None:
            del kept[len(kept) - removed:]
            break
    final = text.finish()
    assert text.tokens == kept
    return kept, final, text.stopped, pieces


def check(tokenizer: Any, tokens: list[int], stops: list[str], rounds: list[int]) -> None:
    """Tokens, text and stop as defined; the stream (which only ever appends) adds up to the final text, so no
    piece of it was ever something the final text drops."""
    kept, final, stopped, pieces = run(tokenizer, tokens, stops, rounds)
    assert (kept, final, stopped) == reference(tokenizer, tokens, stops)
    assert "".join(pieces) == final


@st.composite
def stops_for(draw: st.DrawFn, text: str, *, allow_replacement: bool = True) -> list[str]:
    """0-3 stop strings: pieces of ``text`` (so they hit, often across rounds) or short strings of its letters."""
    letters = sorted(set(text) | {"S", "T", " "}) if allow_replacement else sorted(set(text.replace(
        REPLACEMENT, "")) | {"S", "T", " "})
    out = []
    for _ in range(draw(st.integers(0, 3))):
        if text and draw(st.booleans()):
            i = draw(st.integers(0, len(text) - 1))
            stop = text[i:i + draw(st.integers(1, 4))]
        else:
            stop = "".join(draw(st.lists(st.sampled_from(letters), min_size=1, max_size=3)))
        if allow_replacement or REPLACEMENT not in stop:
            out.append(stop)
    return out


ROUNDS = st.lists(st.integers(1, 6), max_size=40)

# ---------------------------------------------------------------------------------------- SmolLM2 (byte-level)
SMOLLM2_SPECIAL = list(range(17))
#: Byte tokens of GPT-2's byte-to-unicode alphabet: "Ã" (0xC3), "©" (0xA9), "ä" (0xE4), "¸" (0xB8), "Ń" (0xAD),
#: "ð" (0xF0), "Ł" (0x9F) ... looked up by their characters.
SMOLLM2_BYTE_CHARS = ["Ã", "©", "ä", "¸", "Ń", "ð", "Ł", "ĺ", "Ģ", "A", "Ġ"]


@needs_smollm2
@SETTINGS
@given(data=st.data())
def test_smollm2_any_token_sequence(data: st.DataObject) -> None:
    tok = smollm2()
    byte_ids = tok.convert_tokens_to_ids(SMOLLM2_BYTE_CHARS)
    token = st.one_of(st.integers(0, 49151), st.sampled_from(byte_ids), st.sampled_from(SMOLLM2_SPECIAL))
    tokens = data.draw(st.lists(token, max_size=40))
    stops = data.draw(stops_for(decode(tok, tokens)))
    check(tok, tokens, stops, data.draw(ROUNDS))


@needs_smollm2
@SETTINGS
@given(data=st.data())
def test_smollm2_encoded_text(data: st.DataObject) -> None:
    tok = smollm2()
    text = data.draw(st.text(st.characters(codec="utf-8"), max_size=60))
    tokens = tok.encode(text)
    stops = data.draw(stops_for(decode(tok, tokens)))
    check(tok, tokens, stops, data.draw(ROUNDS))


@needs_smollm2
@pytest.mark.parametrize("gaps", [(0, 20), (5, 14), (9, 9), (20, 0), (30, 30)])
def test_a_character_split_by_special_tokens_is_not_settled_early(gaps: tuple[int, int]) -> None:
    """The bytes of "中" (E4 B8 AD) with runs of skipped special tokens between them: more than MAX_PENDING
    pending ids, yet no part of the character may be settled (or streamed) as U+FFFD."""
    tok = smollm2()
    lead, middle, last = tok.convert_tokens_to_ids(["ä", "¸", "Ń"])
    specials = [0, 1, 2] * 20
    tokens = [*tok.encode("a"), lead, *specials[:gaps[0]], middle, *specials[:gaps[1]], last, *tok.encode(" b")]
    check(tok, tokens, [], [1] * len(tokens))
    check(tok, tokens, ["中 b"], [3] * len(tokens))


# ------------------------------------------------------------------------ SentencePiece style with byte fallback
SP_BYTES = st.integers(0, 255).map(lambda b: b + 1)  # <0xXX> ids
SP_PIECES = st.sampled_from([SP.token_to_id(p) for p in PIECES])


def _char_bytes(char: str) -> list[int]:
    return [b + 1 for b in char.encode("utf-8")]


#: Whole units: a piece, a special token, or every byte token of one character.
SP_UNITS = st.one_of(SP_PIECES.map(lambda t: [t]), st.sampled_from(SP_SPECIALS).map(lambda t: [t]),
                     st.characters(codec="utf-8").map(_char_bytes))


@SETTINGS
@given(data=st.data())
def test_sentencepiece_whole_characters(data: st.DataObject) -> None:
    tokens = [t for unit in data.draw(st.lists(SP_UNITS, max_size=25)) for t in unit]
    stops = data.draw(stops_for(decode(SP, tokens), allow_replacement=False))
    check(SP, tokens, stops, data.draw(ROUNDS))


@SETTINGS
@given(tokens=st.lists(st.one_of(SP_BYTES, SP_PIECES, st.sampled_from(SP_SPECIALS)), max_size=50), rounds=ROUNDS)
def test_sentencepiece_any_bytes_final_text_is_exact(tokens: list[int], rounds: list[int]) -> None:
    """Invalid byte groups make this decoder rewrite earlier text (a group is U+FFFD per byte unless it is all
    valid), which no stream can take back; the final text is still the tokenizer's."""
    kept, final, stopped, _ = run(SP, tokens, [], rounds)
    assert (kept, final, stopped) == (tokens, decode(SP, tokens), False)


# -------------------------------------------------------------------------------- word level, spaces between
@SETTINGS
@given(data=st.data())
def test_word_level_tokens_joined_by_spaces(data: st.DataObject) -> None:
    tokens = data.draw(st.lists(st.integers(0, 10), max_size=30))
    stops = data.draw(stops_for(decode(WORDS, tokens)))
    check(WORDS, tokens, stops, data.draw(ROUNDS))


# ------------------------------------------------------------------------------------------- behaviour
class _Letters:
    """Token ``i`` decodes to the letter ``'a' + i``."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(ord("a") + i) for i in ids)


def test_a_stop_string_across_rounds_cuts_tokens_text_and_stream() -> None:
    pieces: list[str] = []
    text = IncrementalText(_Letters(), ["cde"], pieces.append)
    assert text.add([0, 1, 2]) is None and pieces == ["ab"]  # "c" may begin the stop string: held back
    assert text.add([3, 4, 5, 6]) == 2  # "e" (the third token) completes it: "f", "g" are not kept
    assert text.tokens == [0, 1, 2, 3, 4] and text.stopped
    assert text.finish() == "ab" and text.text == "ab" and pieces == ["ab"]
    with pytest.raises(RuntimeError, match="final"):
        text.add([0])


def test_held_back_tail_is_flushed_at_the_end() -> None:
    pieces: list[str] = []
    text = IncrementalText(_Letters(), ["dzz"], pieces.append)
    text.add([0, 1, 2, 3])
    assert "".join(pieces) == "abc"
    assert text.finish() == "abcd" and "".join(pieces) == "abcd" and not text.stopped


def test_an_unfinished_character_is_held_back_until_its_bytes_arrive() -> None:
    pieces: list[str] = []
    text = IncrementalText(SP, [], pieces.append)
    text.add([SP.token_to_id("▁a"), 0xE4 + 1, 0xB8 + 1])  # "a" + the first two bytes of "中"
    assert pieces == ["a"]
    text.add([0xAD + 1])
    assert pieces == ["a", "中"] and text.finish() == "a中"


def test_no_tokenizer_no_text() -> None:
    text = IncrementalText(None, ["x"], lambda piece: pytest.fail("nothing to stream"))
    assert text.add([1, 2, 3]) is None and text.text is None and text.finish() is None


def test_empty_stop_strings_are_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        IncrementalText(_Letters(), ["a", ""])


# ------------------------------------------------------------------------------------------ bounded work
class _Counting:
    """Records the length of every window decoded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.windows: list[int] = []

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        self.windows.append(len(ids))
        return self.inner.decode(ids, skip_special_tokens=skip_special_tokens)


WINDOW_BOUND = 2 * MAX_PENDING + 2  # context + pending ids, whatever the output


def _work(tokenizer: Any, tokens: list[int]) -> tuple[list[int], str | None]:
    counting = _Counting(tokenizer)
    pieces: list[str] = []
    text = IncrementalText(counting, ["<|im_end|> never", "STOP!"], pieces.append)
    sizes = random.Random(0)
    i = 0
    while i < len(tokens):
        step = sizes.randint(1, 6)
        assert text.add(tokens[i:i + step]) is None
        i += step
    final = text.finish()
    assert final == decode(tokenizer, tokens) and "".join(pieces) == final
    return counting.windows, final


@needs_smollm2
@pytest.mark.parametrize("kind", ["prose", "unfinished bytes", "special tokens", "random ids"])
def test_work_per_token_is_bounded(kind: str) -> None:
    """2,000 tokens: each round decodes a few short windows and the end decodes the output once, so the ids
    decoded grow linearly (re-decoding the whole output every round, as before, is about n^2 / 2 / 3.5 = 570,000
    ids at 3.5 tokens a round)."""
    tok = smollm2()
    n = 2000
    prose = "Speculative decoding drafts tokens; naïve café, 中文字符, emoji 🙂🚀, code: def f(x): return x**2\n"
    tokens = {
        "prose": tok.encode(prose * 80)[:n],
        "unfinished bytes": tok.convert_tokens_to_ids(["ä"]) * n,  # a lone lead byte, again and again
        "special tokens": SMOLLM2_SPECIAL * (n // len(SMOLLM2_SPECIAL)) + SMOLLM2_SPECIAL[:n % len(SMOLLM2_SPECIAL)],
        "random ids": random.Random(1).choices(range(49152), k=n),
    }[kind]
    windows, _ = _work(tok, tokens)
    *rounds, last = windows
    assert last == n  # the one full decode, at the end
    assert max(rounds) <= WINDOW_BOUND
    per_token = {"prose": 4, "random ids": 4}.get(kind, 30)  # normal text: 2 decodes of ~2 ids per token
    assert len(rounds) <= 3 * n and sum(rounds) <= per_token * n
