"""`BlockRows`: the block-diffusion drafter's state for the rows of a decode loop, every drafting row in ONE forward.

Per row: its draft KV cache (committed context only; one ragged `DraftKVCache` for all rows, see
``models/draft_cache.py``) and its pending taps (context positions the target committed that the cache does not
hold yet), kept as one padded tensor ``[B, P, n_taps*H]`` with a host count per row. One round::

    propose(rows R):  C = the most pending taps of R's rows; taps [R, C, n_taps*H], padding after each row's count
                      block [R, bs] = [root, MASK x (bs-1)] at positions start_r .. start_r + bs - 1
                      z = backbone(taps, embed(block), cache, rows=R, counts)   # ONE forward for the R rows
                      slots = z[:, 1:] (non-shift: output j predicts start+j)  or  z (shift: j predicts start+1+j)
                      candidates = top-K of the (draft-vocabulary) head's log-softmax   # ONE head call
                      R's pending taps are now in the cache
    commit(all rows): m_b = positions row b committed this round (its state's token count minus what it held)
                      pending_b += taps at accepted_nodes[b, :m_b]               # ONE gather for all rows

Rows that do not draft in a round cost nothing: their pending taps wait (and grow at commit) until they draft.
``start_r`` and the counts come from the rows' `DecodeState` token counts, so neither propose nor commit reads
the device. Worked example (non-shift, bs = 4): a prompt of 6 tokens, root r: the first round drafts the block
``[r, M, M, M]`` at positions 6..9 over the 6 pending prompt taps; outputs 1..3 give depths 1..3. If the verifier
accepts 2 drafts, the pending context is the taps of nodes ``[root, d1, d2]`` (positions 6..8), and the next root
sits at position 9.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from specframe.errors import GenerationError
from specframe.interfaces import DecodeState, DrafterRows
from specframe.tree import DraftTree
from specframe.types import DraftProposal, TargetOutput, VerifyResult
from specframe_diffusion.checkpoint.draft_config import DraftModelConfig
from specframe_diffusion.drafters.vocab_head import DraftVocabHead
from specframe_diffusion.models.backbone import DFlashBackbone


class BlockRows(DrafterRows):
    """See the module docstring. The components are the drafter's (shared, never modified)."""

    def __init__(self, backbone: DFlashBackbone, config: DraftModelConfig, embed_tokens: nn.Module,
                 head: DraftVocabHead, *, top_k: int, name: str) -> None:
        self.backbone = backbone
        self.config = config
        self.embed_tokens = embed_tokens
        self.head = head
        self.top_k = top_k
        self.name = name
        param = next(backbone.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.cache = backbone.new_cache(rows=0)
        self.pending: torch.Tensor | None = None  # [B, P, n_taps*H] taps not yet in the cache, padded
        self.counts: list[int] = []  # [B] valid pending taps per row

    @property
    def batch_size(self) -> int:
        return len(self.counts)

    @property
    def held(self) -> list[int]:
        """Context positions each row holds, cached or pending (= its state's ``cached_len`` before a round)."""
        return [n + c for n, c in zip(self.cache.lengths, self.counts, strict=True)]

    def taps_of(self, out: TargetOutput, what: str) -> torch.Tensor:  # [B, N, n_taps*H]
        """The target's taps in ``out``, checked against the drafter's tap layout."""
        hidden = out.hidden
        width = self.config.num_taps * self.config.hidden_size
        if hidden is None:
            raise GenerationError(
                f"drafter '{self.name}' needs the target's hidden states at {what}, but TargetOutput.hidden "
                "is None", hint=f"the target must tap layers {list(self.config.target_layer_ids)} "
                                "(ragged_batch(taps))")
        if hidden.dim() != 3 or hidden.shape[-1] != width:
            raise GenerationError(
                f"drafter '{self.name}' expects {self.config.num_taps} taps of width {self.config.hidden_size} "
                f"({width} features) at {what}, the target gave shape {tuple(hidden.shape)}",
                hint=f"the target must tap exactly layers {list(self.config.target_layer_ids)}")
        return hidden

    # ---------------------------------------------------------------------------------- rows in / out
    def add_row(self, state: DecodeState, prefill: TargetOutput) -> None:
        """Rows join last: ``state.tokens`` ``[R, T]`` (usually R = 1) with their prompt's taps ``[R, T - 1, ...]``
        as pending context."""
        taps = self.taps_of(prefill, "the prompt")  # [R, P, n_taps*H]
        rows, length = int(state.tokens.shape[0]), state.cached_len
        if taps.shape[0] != rows or taps.shape[1] != length:
            raise GenerationError(f"prefill gave taps for {taps.shape[0]} row(s) of {taps.shape[1]} positions but "
                                  f"{rows} row(s) of {length} prompt tokens are cached",
                                  hint="prefill must return taps for every prompt token")
        taps = taps.to(self.device, self.dtype)
        if self.pending is None or not self.counts:
            self.pending = taps
        else:
            held = self.pending[:, : max(self.counts)]
            width = max(held.shape[1], length)
            self.pending = torch.cat([_pad_positions(held, width), _pad_positions(taps, width)], dim=0)
        self.counts += [length] * rows
        self.cache.add_rows(rows)

    def keep_rows(self, rows: Sequence[int]) -> None:
        rows = list(rows)
        if rows == list(range(self.batch_size)):
            return
        self.cache.keep_rows(rows)
        self.counts = [self.counts[r] for r in rows]
        if not rows or self.pending is None:
            self.pending = None
        else:
            self.pending = self.pending.index_select(0, torch.tensor(rows, dtype=torch.long,
                                                                     device=self.pending.device))

    # ------------------------------------------------------------------------------------------ rounds
    @torch.no_grad()
    def propose(self, rows: Sequence[int], states: Sequence[DecodeState]) -> DraftProposal:
        rows, states = list(rows), list(states)
        self._check_rows(rows, states)
        held = self.held
        for r, state in zip(rows, states, strict=True):
            if held[r] != state.cached_len:
                raise GenerationError(
                    f"drafter '{self.name}' holds context up to position {held[r]} but the target has "
                    f"{state.cached_len} committed tokens", hint="call drafter.commit after every verification")
        cfg = self.config
        counts = [self.counts[r] for r in rows]
        context = max(counts)
        every = rows == list(range(self.batch_size))
        assert self.pending is not None
        taps = self.pending[:, :context]  # [B, C, n_taps*H]
        if not every:
            taps = taps.index_select(0, torch.tensor(rows, dtype=torch.long, device=taps.device))  # [R, C, ...]
        roots = states[0].root if len(states) == 1 else torch.cat([s.root for s in states])  # [R]
        embed_device = self.embed_tokens.weight.device
        block = torch.full((len(rows), cfg.block_size), cfg.mask_token_id, dtype=torch.long, device=embed_device)
        block[:, 0] = roots.to(embed_device)
        embeds = self.embed_tokens(block).to(self.device, self.dtype)  # [R, bs, H]
        z = self.backbone(taps, embeds, self.cache, rows=None if every else rows, counts=counts)  # [R, bs, H]
        for r in rows:
            self.counts[r] = 0
        features = z[:, 0 if cfg.shift_label else 1 :]  # [R, L, H]
        scores = self.head(features, self.top_k)  # [R, L, K] candidates, sorted descending
        return DraftProposal(root=roots, tokens=scores.tokens, logprobs=scores.logprobs, logits=scores.logits,
                             features=features)

    @torch.no_grad()
    def commit(self, states: Sequence[DecodeState], tree: DraftTree, result: VerifyResult,
               target_out: TargetOutput) -> None:
        taps = self.taps_of(target_out, "the verified tree nodes")  # [B, N, n_taps*H]
        states = list(states)
        nodes = result.accepted_nodes  # [B, D + 1] root first, -1 padded
        if len(states) != self.batch_size or taps.shape[0] != self.batch_size or nodes.shape[0] != self.batch_size:
            raise GenerationError(f"drafter '{self.name}' holds {self.batch_size} row(s) but the round committed "
                                  f"{len(states)} state(s), {nodes.shape[0]} verdict row(s) and {taps.shape[0]} "
                                  "tap row(s)", hint="commit every row of the round, in the rows' order")
        added = [s.cached_len - held for s, held in zip(states, self.held, strict=True)]  # [B] committed positions
        if any(a < 1 or a > nodes.shape[1] for a in added):
            raise GenerationError(
                f"drafter '{self.name}' holds context up to positions {self.held} but the target has "
                f"{[s.cached_len for s in states]} committed tokens, not 1..{nodes.shape[1]} more per row",
                hint="call drafter.commit once after every verification, with the states holding the round's tokens")
        most = max(added)
        index = nodes[:, :most].to(taps.device).clamp(min=0)  # [B, M]; -1 padding reads the root, never used
        new = taps.gather(1, index[:, :, None].expand(-1, -1, taps.shape[2])).to(self.device, self.dtype)  # [B, M, ...]
        if self.pending is None or max(self.counts) == 0:
            self.pending = new
        else:
            self.pending = _append_ragged(self.pending, self.counts, new, added)
        self.counts = [c + a for c, a in zip(self.counts, added, strict=True)]

    def _check_rows(self, rows: list[int], states: list[DecodeState]) -> None:
        if not rows or len(rows) != len(states) or len(set(rows)) != len(rows) \
                or any(r < 0 or r >= self.batch_size for r in rows):
            raise GenerationError(f"drafter '{self.name}' holds {self.batch_size} row(s) and was asked to propose "
                                  f"for rows {rows} with {len(states)} state(s)",
                                  hint="start every request with add_row (begin) before proposing for it")


def _pad_positions(taps: torch.Tensor, width: int) -> torch.Tensor:  # [B, width, F]
    extra = width - taps.shape[1]
    return taps if extra <= 0 else torch.cat([taps, taps.new_zeros(taps.shape[0], extra, taps.shape[2])], dim=1)


def _append_ragged(old: torch.Tensor, counts: list[int], new: torch.Tensor, added: list[int]) -> torch.Tensor:
    """Row ``b``: its ``counts[b]`` taps of ``old`` ``[B, P, F]``, then its ``added[b]`` taps of ``new``
    ``[B, M, F]``, padded to the longest row with finite taps (one gather for all rows)."""
    p = max(counts)
    both = torch.cat([old[:, :p], new], dim=1)  # [B, p + M, F]
    width = max(c + a for c, a in zip(counts, added, strict=True))
    count = torch.tensor(counts, dtype=torch.long, device=both.device)[:, None]  # [B, 1]
    t = torch.arange(width, device=both.device)[None, :]  # [1, W]
    source = torch.where(t < count, t, p + t - count).clamp(max=both.shape[1] - 1)  # [B, W]
    return both.gather(1, source[:, :, None].expand(-1, -1, both.shape[2]))
