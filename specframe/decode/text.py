"""`IncrementalText`: a request's text, built as its tokens arrive, with stop strings and streaming; linear work.

Decoding the whole output again every round costs O(n²) over a request. Instead each :meth:`IncrementalText.add`
decodes only a short window (the technique of vLLM's and text-generation-inference's incremental detokenizers):

* the window ``tokens[prefix:]`` starts at a token boundary that is also a character boundary, a round or so
  back; its decode, minus the characters of it already in the text, is the new text (decoding from a few
  tokens back keeps the tokenizer's spacing and merges right), and the window moves on whenever the text ends on
  a whole character;
* trailing U+FFFD is an incomplete multi-byte character: it is held back until the bytes that complete it arrive
  (or the request ends, when it renders as the full decode renders it);
* stop strings are searched only in the new text plus the ``longest stop - 1`` characters before it; on a hit the
  tokens are cut to the shortest prefix whose text contains the stop string, and the text ends before it;
* the stream receives text only once it can no longer change: a tail that may still grow into a stop string is
  held back until it cannot (or until the request ends).

The final text equals ``tokenizer.decode(tokens, skip_special_tokens=True)`` (cut at the first stop string), and
everything streamed is a prefix of it (`tests/core/test_incremental_text.py` checks both on random token
sequences, and that the decoded windows stay bounded as the output grows).

Example: stops ``["\\n\\n"]``; tokens of ``"Hi"``, ``"!\\n"``, ``"\\nBye"`` arrive one at a time: after the second
the stream holds back the ``"\\n"`` (it may start the stop string); the third completes ``"\\n\\n"``, so ``add``
returns 1 (its token is removed) and the text is ``"Hi!"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

REPLACEMENT = "\ufffd"


class IncrementalText:
    """One request's text; see the module docstring. Without a tokenizer every method is a no-op (text None)."""

    def __init__(self, tokenizer: Any, stops: Sequence[str], stream: Callable[[str], None] | None) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.stream = stream
        self.tokens: list[int] = []
        self.text: str | None = None if tokenizer is None else ""
        self.stopped = False
        self._prefix = 0  # the window: tokens[prefix:]; text before it is the text of tokens[:prefix]
        self._window = 0  # characters of the window's text already in `text`
        self._clean = 0  # a token boundary that is also a character boundary (where the window may start)
        self._streamed = 0  # characters of `text` already streamed
        self._longest_stop = max((len(s) for s in self.stops), default=0)

    def _decode(self, tokens: Sequence[int]) -> str:
        return self.tokenizer.decode(list(tokens), skip_special_tokens=True)

    def add(self, tokens: Sequence[int]) -> int | None:
        """Append ``tokens``; the number of tokens to remove when a stop string was completed, else None."""
        if self.text is None or self.stopped or not tokens:
            return None
        read = len(self.tokens)
        self.tokens += tokens
        window = self._decode(self.tokens[self._prefix :])
        stable = window.rstrip(REPLACEMENT)  # an incomplete character at the end may still change
        before = len(self.text)
        self.text += stable[self._window :]
        self._window = max(self._window, len(stable))
        since = max(0, before - (self._longest_stop - 1))
        if self._find_stop(self.text, since) is not None:
            return self._cut_at_stop(read, since)
        if stable == window:  # the text ends on a whole character: this token boundary is a character boundary
            if self._clean > self._prefix:  # start the window at the previous one (a few tokens of context)
                self._prefix = self._clean
                self._window = len(self._decode(self.tokens[self._prefix :]))
            self._clean = len(self.tokens)
        self._emit(len(self.text) - self._held_back())
        return None

    def _find_stop(self, text: str, since: int) -> int | None:
        """Where the earliest stop string starts in ``text`` at or after character ``since``."""
        hits = [at for at in (text.find(s, since) for s in self.stops) if at >= 0]
        return min(hits) if hits else None

    def _cut_at_stop(self, read: int, since: int) -> int:
        """Keep the shortest prefix of the tokens whose text holds a stop string; return how many were removed.

        The text up to the window is fixed and held no stop string before this call, so only prefixes ending
        after ``read`` (this call's tokens) are tried, each decoded from the window's start.
        """
        assert self.text is not None
        head = self.text[: len(self.text) - self._window]  # the text of tokens[:prefix]
        for n in range(read + 1, len(self.tokens) + 1):
            candidate = head + self._decode(self.tokens[self._prefix : n]).rstrip(REPLACEMENT)
            at = self._find_stop(candidate, since)
            if at is not None:
                removed = len(self.tokens) - n
                del self.tokens[n:]
                self.text = candidate[:at]
                self.stopped = True
                self._emit(len(self.text))
                return removed
        raise AssertionError("a stop string was found in the text but in no prefix of the tokens")

    def _held_back(self) -> int:
        """Characters at the end of ``text`` that may still grow into a stop string."""
        assert self.text is not None
        tail = self.text[-(self._longest_stop - 1):] if self._longest_stop > 1 else ""
        hold = 0
        for stop in self.stops:
            for k in range(min(len(stop) - 1, len(tail)), hold, -1):
                if tail.endswith(stop[:k]):
                    hold = k
                    break
        return hold

    def _emit(self, upto: int) -> None:
        """Stream ``text[:upto]`` past what was already streamed."""
        if self.stream is not None and self.text is not None and upto > self._streamed:
            self.stream(self.text[self._streamed : upto])
            self._streamed = upto

    def finish(self) -> str | None:
        """The request ended: add what an incomplete last character renders as, stream the rest, return the text."""
        if self.text is None:
            return None
        if not self.stopped:
            window = self._decode(self.tokens[self._prefix :])
            self.text += window[self._window :]
            self._window = len(window)
            self._emit(len(self.text))
        return self.text
