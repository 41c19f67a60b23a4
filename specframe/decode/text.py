"""A request's text: `IncrementalText` (decoded as tokens arrive, stop strings found, text streamed) or
`FinalText` (decoded once at the end), chosen by :func:`request_text`.

Only a request with stop strings or a stream needs its text while it decodes. Every other request keeps its
tokens and decodes them once when it ends (:class:`FinalText`): no tokenizer call per round, and the same text
``IncrementalText`` ends with (its final text is the kept tokens decoded once in full, see below).

`IncrementalText`:

The work per added token is bounded (linear in the output, not quadratic): only a short window of recent tokens
is decoded, the technique of vLLM's and text-generation-inference's incremental detokenizers. The window is a
*context* (the tokens whose text was settled last; decoding them again gives the tokenizer the left context
it needs, e.g. the space a SentencePiece decoder strips from the first token) followed by the *pending*
tokens. After each token::

    text    = decode(window)                                # skip_special_tokens=True
    pending = text[len(decode(context)):]                   # the new tokens' text, in context
    pending not empty and not ending in U+FFFD  ->  settle it: the pending tokens become the context

A text ending in U+FFFD may be an unfinished multi-byte character whose other bytes are still to come, so it
is not settled yet. Example (byte-level tokens): "é" is the bytes C3 A9; after C3 the window's text ends in
U+FFFD and stays pending; after A9 it reads "é" and is settled.

The text so far is ``settled + pending``: ``tokenizer.decode(tokens, skip_special_tokens=True)`` for every decoder
whose output for a token depends only on the tokens near it (byte-level BPE, SentencePiece, word-level). Stop
strings are searched only where the text changed, plus the ``max stop length - 1`` characters before, so a stop
string spanning two rounds is found. A hit keeps the shortest token prefix whose text contains a stop string and
cuts the text where that stop string starts. The stream is given the text as it grows, holding back an unfinished
character and any tail that may still become a stop string, so it never shows what the final text drops;
``finish`` flushes what was held back. The final text (at ``finish`` or a stop string) is the kept tokens
decoded once in full: once per request, so still linear, and the same text unless the decoder is not local.

Safeguards for unusual token runs:

* more than :data:`MAX_PENDING` pending tokens (a long run of bytes that form no character, or of skipped special
  tokens) settle their older part once decoding it alone and with the rest agree (:meth:`_settle_older`), so
  the window stays short;
* a decoder that rewrites text before the window (a byte-fallback decoder writes U+FFFD for every byte of a group
  of byte tokens that is not valid UTF-8 as a whole, so one more byte can turn an "é" already shown into two
  U+FFFD) makes the object decode all its tokens once and go on from there (:meth:`_resync`); what was already
  streamed cannot be taken back, so streaming stops if the stream is no longer a prefix of the text;
* without a tokenizer every call is a no-op and the text is None.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

#: What a decoder writes for bytes that are not (yet) a whole UTF-8 character.
REPLACEMENT = "\ufffd"
#: Pending tokens beyond which the window's older part is settled when it can be (see `_settle_older`).
MAX_PENDING = 16
#: Newest tokens `_settle_older` leaves pending (an unfinished character's missing bytes are usually among them;
#: the split is checked, not assumed).
SETTLE_LAG = 8


class RequestText(Protocol):
    """What the decode loop asks of a request's text (see the module docstring)."""

    @property
    def text(self) -> str | None: ...

    @property
    def stopped(self) -> bool: ...

    def add(self, tokens: Sequence[int]) -> int | None: ...

    def finish(self) -> str | None: ...


def request_text(tokenizer: Any, stops: Iterable[str] = (), stream: Callable[[str], None] | None = None
                 ) -> RequestText:
    """The text of one request: decoded as it grows only when it has stop strings or a stream."""
    stops = tuple(stops)
    if stops or stream is not None:
        return IncrementalText(tokenizer, stops, stream)
    return FinalText(tokenizer)


class FinalText:
    """The text of a request without stop strings or a stream: its tokens, decoded once by :meth:`finish`.

    ``add`` only keeps the tokens (no tokenizer call), so a request's tokenizer work is one ``decode`` call
    whatever its length; the text is ``tokenizer.decode(tokens, skip_special_tokens=True)``, what
    `IncrementalText` ends with for the same tokens.
    """

    stopped = False  # no stop strings: nothing ends the text early

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        #: The tokens added so far.
        self.tokens: list[int] = []
        self._final: str | None = None

    @property
    def text(self) -> str | None:
        """The final text once :meth:`finish` ran (decoding the tokens so far before that); None without a
        tokenizer."""
        if self.tokenizer is None:
            return None
        return self._final if self._final is not None else self._decode()

    def add(self, tokens: Sequence[int]) -> None:
        """Keep ``tokens`` (in order); there is no stop string, so nothing is ever cut (always None)."""
        if self._final is not None:
            raise RuntimeError("the text is final (finish() ran); add no more tokens")
        if self.tokenizer is not None:
            self.tokens.extend(tokens)

    def finish(self) -> str | None:
        """The final text: every token decoded once."""
        if self.tokenizer is None:
            return None
        if self._final is None:
            self._final = self._decode()
        return self._final

    def _decode(self) -> str:
        return str(self.tokenizer.decode(self.tokens, skip_special_tokens=True))


class IncrementalText:
    """The text of one request's new tokens (see the module docstring).

    The object keeps its own copy of the tokens it was given (:attr:`tokens`), cut at a stop string; the caller
    keeps its token list and removes the count :meth:`add` returns.
    """

    def __init__(self, tokenizer: Any, stops: Iterable[str] = (), stream: Callable[[str], None] | None = None
                 ) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        if any(not s for s in self.stops):
            raise ValueError("stop strings must be non-empty")
        self.stream = stream
        #: The tokens added so far (after a stop string: up to the token that completed it).
        self.tokens: list[int] = []
        #: Characters before a change that a stop string may reach back over.
        self._reach = max((len(s) for s in self.stops), default=1) - 1
        self._window: list[int] = []  # context ids, then pending ids
        self._context = 0  # how many of _window are context
        self._context_text = ""  # decode(_window[:_context])
        self._pending = ""  # the pending ids' text (may end in an unfinished character)
        self._unsettled = False  # the window's text rewrote the context: nothing new is known yet
        self._chunks: list[str] = []  # the settled text, in pieces
        self._settled = 0  # its length
        self._streamed = 0  # characters of the text given to ``stream``
        self._stream_ok = True  # False once the tokenizer changed text already streamed
        self._final: str | None = None  # the text once a stop string hit or finish() ran
        self._stop_hit = False

    # ------------------------------------------------------------------------------------------ public
    @property
    def text(self) -> str | None:
        """The text so far (the final text after a stop string or :meth:`finish`); None without a tokenizer.

        It joins the whole text: read it at the end, not every round."""
        if self.tokenizer is None:
            return None
        return self._final if self._final is not None else self._text_from(0)

    @property
    def stopped(self) -> bool:
        """Whether a stop string ended the text."""
        return self._stop_hit

    def add(self, tokens: Sequence[int]) -> int | None:
        """Append ``tokens`` (in order); return None, or on a stop string how many of them come after the token
        that completed it (they are not kept, and the text is final). Streams the text that became safe."""
        if self.tokenizer is None:
            return None
        if self._final is not None:
            raise RuntimeError("the text is final (a stop string ended it, or finish() ran); add no more tokens")
        for i, token in enumerate(tokens):
            self.tokens.append(int(token))
            changed = self._step(int(token))
            if self.stops:
                at = self._first_stop(self._text_from(max(0, changed - self._reach)))
                if at is not None:
                    at += max(0, changed - self._reach)
                    self._end(self._text_from(0)[:at], stop=True)
                    return len(tokens) - i - 1
        if not self._unsettled:
            self._show(self._settled + len(self._pending) - self._held_back())
        return None

    def finish(self) -> str | None:
        """The final text, streaming what was held back (nothing held back can become a stop string now)."""
        if self.tokenizer is None:
            return None
        if self._final is None:
            self._end(self._text_from(0), stop=False)
        return self._final

    # ----------------------------------------------------------------------------------------- window
    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _step(self, token: int) -> int:
        """Decode the window with ``token`` added; return the index from which the text may have changed."""
        changed = self._settled
        self._window.append(token)
        text = self._decode(self._window)
        if text.startswith(self._context_text):
            self._unsettled = False
            self._pending = text[len(self._context_text):]
            if self._pending and not self._pending.endswith(REPLACEMENT):
                self._settle(len(self._window), self._pending)
            elif len(self._window) - self._context > MAX_PENDING:
                self._settle_older(text)
        elif text.endswith(REPLACEMENT) and len(self._window) - self._context <= MAX_PENDING:
            # An unfinished character made the decoder rewrite the context (a byte-fallback group that is
            # invalid until its last byte comes): wait for the character; the text so far stays as it was.
            self._unsettled = True
        else:
            self._resync()
            changed = 0
        return changed

    def _settle(self, end: int, piece: str) -> None:
        """Settle ``piece``, the text of ``_window[_context:end]``; those ids become the context."""
        if piece:
            self._chunks.append(piece)
            self._settled += len(piece)
        ids = self._window[self._context:end]
        self._window = ids + self._window[end:]
        self._context = len(ids)
        self._context_text = self._decode(ids)
        self._pending = self._pending[len(piece):]

    def _settle_older(self, text: str) -> None:
        """Too many pending ids: settle those before the newest :data:`SETTLE_LAG` when that is safe.

        Ids with no text at all (skipped special tokens) leave the window. Otherwise the older ids' text is
        settled when decoding them and the newest ids apart gives exactly the window's text: no character
        spans the split, so no later id can change the older text. When neither holds the window keeps growing
        (exactness first)."""
        split = len(self._window) - SETTLE_LAG
        head = self._decode(self._window[:split])
        if head == self._context_text:
            del self._window[self._context:split]
            return
        tail = self._decode(self._window[split:])
        if tail and text == head + tail and head.startswith(self._context_text):
            self._settle(split, head[len(self._context_text):])

    def _resync(self) -> None:
        """The tokenizer rewrote settled text: decode every token once and start again from there."""
        shown = self._text_from(0)[:self._streamed]
        text = self._decode(self.tokens)
        self._chunks, self._settled = [], 0
        self._window, self._context, self._context_text = list(self.tokens), 0, ""
        self._pending, self._unsettled = text, False
        if not text.startswith(shown):
            self._stream_ok = False  # it showed text the tokenizer has since changed: it cannot be taken back
        if text and not text.endswith(REPLACEMENT):
            self._settle(len(self._window), text)

    # ----------------------------------------------------------------------------------- text, stream
    def _text_from(self, start: int) -> str:
        """The text from character ``start`` on (cheap when ``start`` is near the end)."""
        if start >= self._settled:
            return self._pending[start - self._settled:]
        parts, need, i = [self._pending], self._settled - start, len(self._chunks)
        while need > 0:
            i -= 1
            chunk = self._chunks[i]
            parts.append(chunk[max(0, len(chunk) - need):])
            need -= len(chunk)
        return "".join(reversed(parts))

    def _first_stop(self, text: str) -> int | None:
        """Where the earliest stop string starts in ``text``, or None."""
        hits = [at for at in (text.find(s) for s in self.stops) if at >= 0]
        return min(hits) if hits else None

    def _held_back(self) -> int:
        """Characters at the end not safe to stream: an unfinished character (a U+FFFD run ending the pending
        text, which may still become any text) and, before it, the longest tail that begins a stop string."""
        unfinished = len(self._pending) - len(self._pending.rstrip(REPLACEMENT))
        if not self.stops:
            return unfinished
        length = self._settled + len(self._pending)
        tail = self._text_from(max(0, length - unfinished - self._reach))
        tail = tail[:len(tail) - unfinished]
        hold = 0
        for stop in self.stops:
            for k in range(min(len(stop) - 1, len(tail)), hold, -1):
                if tail.endswith(stop[:k]):
                    hold = k
                    break
        return unfinished + hold

    def _show(self, upto: int) -> None:
        """Stream the text up to character ``upto`` past what was already streamed."""
        if self.stream is not None and self._stream_ok and upto > self._streamed:
            self.stream(self._text_from(self._streamed)[:upto - self._streamed])
            self._streamed = upto

    def _end(self, incremental: str, *, stop: bool) -> None:
        """Make the text final: the kept tokens decoded once in full (once per request, so still linear), which
        is the incremental text itself unless a decoder rewrote text outside the window; cut at the earliest
        stop string on a stop. Stream the rest, if the stream is still a prefix of the text."""
        text = self._decode(self.tokens)
        if stop:
            at = self._first_stop(text)
            text = text if at is None else text[:at]
        if text != incremental and not text.startswith(incremental[:self._streamed]):
            self._stream_ok = False
        self._chunks, self._settled, self._pending = [text], len(text), ""
        self._show(len(text))
        self._final, self._stop_hit = text, stop
