"""`ChunkedPrefill`: a joining row's prompt prefilled a chunk at a time, between the decode rounds of rows in flight.

A long prompt prefilled in one forward stalls every row in flight for that whole forward. As vLLM's and SGLang's
chunked prefill does, the decode loop instead admits such a prompt as a *joining* row: its KV blocks are reserved at
admission (:meth:`specframe_hf.slot_rows.SlotRows.begin_row`, the whole reservation as for any row), and each
:meth:`ChunkedPrefill.step` runs the next ``chunk`` prompt tokens through the lean forward — one step per decode
round, so the rows in flight advance every round while the prompt fills in. Only after the last chunk does the
row join the pool's rows (and the decoding batch, and its drafter begins on it).

Design: each chunk is its own forward, between rounds, rather than packed into the round's tree forward. The tree
forward's outputs are the rows' ``[B, N]`` logits and taps and its captured (bucketed) variant has fixed shapes;
packing a ragged prompt chunk into it would change both for one round in several. A separate forward keeps the
round untouched (its shapes, its one device-to-host read, its capture) and costs one extra pass over the weights
per round while a prompt joins — the same weight reads a one-shot prefill pays, spread over rounds.

A chunk of ``c`` tokens starting at prompt position ``s`` writes its keys and values at the row's logical slots
``[s, s + c)`` and attends over ``[0, s + c)``: every earlier slot, and causally within the chunk (the mask of
:func:`specframe_hf.paged_attention.tree_mask` with a lower-triangular relation); the first chunk is a plain causal
prompt, exactly the one-shot prefill's attention. Taps of every chunk are kept and concatenated, so the drafter gets
the whole prompt's ``[1, P, n_taps * H]``, as from a one-shot prefill.

Worked example (``chunk = 4``, a prompt of 10 tokens)::

    job = rows.begin_row(prompt [1, 10], capacity=40)  # 3 blocks of 16 reserved; not yet a row
    job.step()   # positions 0-3, causal                               -> None
    job.step()   # positions 4-7 over slots 0-7 (mask: 4 prefix + tril) -> None
    job.step()   # positions 8-9 over slots 0-9: the row joins, length 10 -> logits [1, 1, V], taps [1, 10, T*H]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from specframe.types import TargetOutput
from specframe_hf.paged_attention import RowRead, tree_mask

if TYPE_CHECKING:
    from specframe_hf.slot_rows import SlotRows


class ChunkedPrefill:
    """One joining row's prompt ``input_ids`` ``[1, P]`` over its reserved blocks ``table``; see the module
    docstring. Made by :meth:`specframe_hf.slot_rows.SlotRows.begin_row`."""

    def __init__(self, rows: SlotRows, input_ids: torch.Tensor, table: list[int], chunk: int) -> None:
        self.rows = rows
        self.ids = input_ids.to(rows.device).reshape(-1)  # [P]
        self.length = int(self.ids.shape[0])
        self.table = table
        self.chunk = chunk
        self.done = 0  # prompt tokens prefilled so far
        self.chunks = 0  # forwards run so far
        self._hidden: list[torch.Tensor] = []  # per chunk [c, n_taps * H]
        self._open = True

    @property
    def remaining(self) -> int:
        return self.length - self.done

    def step(self) -> TargetOutput | None:
        """Prefill the next chunk. Returns None while prompt tokens remain; after the last chunk the row is
        appended to the rows (committed length ``P``) and the prefill's output is returned: logits ``[1, 1, V]``
        float32 at the last prompt position, taps ``[1, P, n_taps * H]`` (None without taps). A chunk that raises
        releases the reservation."""
        if not self._open:
            raise RuntimeError("this chunked prefill has finished or was cancelled")
        rows, cache = self.rows, self.rows.cache
        start, count = self.done, min(self.chunk, self.length - self.done)
        width = start + count
        try:
            run = cache.run_of(self.table)
            # One host-to-device copy: the chunk's physical slots [c], and the row's slots [s + c] when scattered.
            host = cache.slots_of(self.table, start, count) + ([] if run is not None else
                                                                cache.slots_of(self.table, 0, width))
            slot_t = torch.tensor(host, dtype=torch.long, device=rows.device)
            mask = None if start == 0 or count == 1 else tree_mask(
                torch.ones(count, count, dtype=torch.bool, device=rows.device).tril_(), start, rows.decoder.groups,
                rows.runner.dtype)  # [G * c, s + c]: the prefix, then causal within the chunk
            read = RowRead(first=0, count=count, width=width, start=run,
                           index=None if run is not None else slot_t[count:], mask=mask, causal=start == 0)
            positions = torch.arange(start, width, device=rows.device)  # [c]
            last = torch.tensor([count - 1], device=rows.device)
            kv = [cache.layer(i) for i in range(cache.layers)]
            with torch.inference_mode():
                logits, hidden = rows.decoder.forward(self.ids[start:width], positions, kv, slot_t[:count], [read],
                                                      last, taps=rows.taps)
        except BaseException:
            self.cancel()
            raise
        self.done, self.chunks = width, self.chunks + 1
        if hidden is not None:
            self._hidden.append(hidden)
        if self.done < self.length:
            return None
        self._open = False
        rows.joined(self)
        cache.attach(self.table, self.length)
        taps = torch.cat(self._hidden)[None] if self._hidden else None  # [1, P, n_taps * H]
        return TargetOutput(logits=logits.view(1, 1, -1), hidden=taps)

    def cancel(self) -> None:
        """Give the reservation back (the request was refused, or the rows closed); idempotent."""
        if self._open:
            self._open = False
            self.rows.joined(self)
            self.rows.cache.release(self.table)
