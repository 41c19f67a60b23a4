"""`BlockRows`: the block-diffusion drafter's state for the rows of a decode loop, every drafting row in ONE forward.

A row's state is its draft KV cache of committed context (one ragged `DraftKVCache` for all rows, see
``models/draft_cache.py``). The context's keys and values depend on the target's taps alone, so they can enter
the cache any time after the taps are known (`DFlashBackbone.extend`), and a round drafts the block alone::

    add_row:          extend the new row's cache by its prompt's taps              # [1, P, n_taps*H]
    propose(rows R):  block [R, bs] = [root, MASK x (bs-1)] at positions start_r .. start_r + bs - 1
                      z = backbone(embed(block)) over each row's cache             # ONE forward for the R rows
                      slots = z[:, 1:] (non-shift: output j predicts start+j)  or  z (shift: j predicts start+1+j)
                      candidates = top-K of the (draft-vocabulary) head's log-softmax   # ONE head call
                      context_row = hidden_norm(fc(last committed tap))   # [R, H], proposal.extras
    commit(all rows): m_b = positions row b committed this round (its state's token count minus its context)
                      keep the taps at accepted_nodes[b, :m_b] pending                   # ONE gather
    flush:            extend every row's cache by everything pending                     # ONE pass

Rows that do not draft in a round are not in the forward (their context takes the round's root tap at commit).
``start_r`` and ``m_b`` come from the rows' `DecodeState` token counts, so neither propose nor commit reads the
device. Worked example (non-shift, bs = 4): a prompt of 6 tokens (cache: positions 0..5), root r: the block
``[r, M, M, M]`` at positions 6..9; outputs 1..3 give depths 1..3. If the verifier accepts 2 drafts, the taps of
nodes ``[root, d1, d2]`` (positions 6..8) extend the cache, and the next root sits at position 9.

Every proposal also carries, in ``extras["context_row"]`` ``[R, H]``, each row's *projected context row just before
the block*: ``hidden_norm(fc(tap))`` of its last committed position (position 5, then 8, in the example), the
vector the block's keys and values are built from. LiLiCorr's reranker anchors its start factors on it
(``lilicorr_anchor: target_row``, :mod:`specframe_trees.heads.lattice`). The raw tap of that position is kept per
row (updated at ``add_row`` and ``commit``), so the row costs one ``[n_taps*H] x [n_taps*H, H]`` product per round.

The extension is deferred: commit gathers the round's taps (one gather) and keeps them pending; the next
``propose`` (or a row joining or leaving, or :data:`MAX_PENDING` rounds) moves everything pending into the caches in
one pass. Rounds that no row drafts (``budget: auto`` decoding plainly at a batch size where drafting does not pay)
then cost the drafter nothing, and a run of them enters the cache in one batched pass, not one per round. A context
position's keys and values depend on its own tap and position only, so they are the same either way (up to the last
bits of the batched products, as for any batch shape).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from specframe.errors import GenerationError
from specframe.interfaces import DecodeState, DrafterRows
from specframe.tree import DraftTree
from specframe.types import DraftProposal, TargetOutput, VerifyResult
from specframe_diffusion.draft_config import DraftModelConfig
from specframe_diffusion.drafters.vocab_head import DraftVocabHead
from specframe_diffusion.models.backbone import DFlashBackbone

#: Rounds of committed taps kept pending at most before they enter the caches (bounds the memory a long run of
#: plain rounds holds: per row and round one position of ``n_taps * H`` features).
MAX_PENDING = 64


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
        # Committed context not yet in the cache, oldest first: per round, the taps ``[B, M, n_taps*H]`` (drafter
        # device and dtype) and how many of each row's M are valid (the positions that row committed).
        self._pending: list[tuple[torch.Tensor, list[int]]] = []
        self._pending_total: list[int] = []  # [B] positions pending per row (the counts above, summed)
        self._last_tap: torch.Tensor | None = None  # [B, n_taps*H] each row's last committed position's tap

    @property
    def batch_size(self) -> int:
        return self.cache.batch_size

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
    @torch.no_grad()
    def add_row(self, state: DecodeState, prefill: TargetOutput) -> None:
        """Rows join last: ``state.tokens`` ``[R, T]`` (usually R = 1); their prompt's taps ``[R, T - 1, ...]``
        fill their caches."""
        taps = self.taps_of(prefill, "the prompt")  # [R, P, n_taps*H]
        rows, length = int(state.tokens.shape[0]), state.cached_len
        if taps.shape[0] != rows or taps.shape[1] != length:
            raise GenerationError(f"prefill gave taps for {taps.shape[0]} row(s) of {taps.shape[1]} positions but "
                                  f"{rows} row(s) of {length} prompt tokens are cached",
                                  hint="prefill must return taps for every prompt token")
        self.flush()
        first = self.batch_size
        self.cache.add_rows(rows)
        last = taps[:, -1].to(self.device, self.dtype)  # [R, n_taps*H]
        self._last_tap = last if self._last_tap is None or first == 0 else torch.cat([self._last_tap, last])
        self.backbone.extend(taps.to(self.device, self.dtype), self.cache,
                             rows=None if first == 0 else range(first, first + rows))

    def keep_rows(self, rows: Sequence[int]) -> None:
        rows = list(rows)
        if not rows:
            self._pending = []
        elif self._pending:
            index = torch.tensor(rows, dtype=torch.long, device=self.device)
            self._pending = [(taps.index_select(0, index), [counts[r] for r in rows]) for taps, counts in self._pending]
        self._pending_total = [self._pending_total[r] for r in rows] if self._pending else []
        if self._last_tap is not None:
            self._last_tap = self._last_tap[rows] if rows else None
        self.cache.keep_rows(rows)

    def context_lengths(self) -> list[int]:
        """Per row, the committed context positions: in the cache plus pending."""
        if not self._pending:
            return list(self.cache.lengths)
        return [n + c for n, c in zip(self.cache.lengths, self._pending_total, strict=True)]

    @torch.no_grad()
    def flush(self) -> None:
        """Move every pending position into the rows' caches in ONE extend.

        Worked example: two pending rounds for rows (a, b), taps ``[2, 3, F]`` with counts ``[3, 1]`` then
        ``[2, 1, F]`` with counts ``[1, 1]``: joined along positions ``[2, 4, F]``, row a keeps entries 0, 1, 2, 3
        and row b entries 0, 3 (then padding), and the caches grow by 4 and 2.
        """
        if not self._pending:
            return
        if len(self._pending) == 1:
            taps, counts = self._pending[0]
        else:
            joined = torch.cat([t for t, _ in self._pending], dim=1)  # [B, sum M, F]
            counts = self._pending_total
            width = max(counts)
            index: list[list[int]] = []
            for b in range(joined.shape[0]):
                offset, valid = 0, []
                for part, part_counts in self._pending:
                    valid.extend(range(offset, offset + part_counts[b]))
                    offset += int(part.shape[1])
                index.append(valid + [0] * (width - len(valid)))  # padding reads entry 0, never kept
            gather = torch.tensor(index, dtype=torch.long, device=joined.device)  # [B, width]
            taps = joined.gather(1, gather[:, :, None].expand(-1, -1, joined.shape[2]))  # [B, width, F]
        self._pending, self._pending_total = [], []
        self.backbone.extend(taps, self.cache, counts=counts)

    # ------------------------------------------------------------------------------------------ rounds
    @torch.no_grad()
    def propose(self, rows: Sequence[int], states: Sequence[DecodeState]) -> DraftProposal:
        rows, states = list(rows), list(states)
        self._check_rows(rows, states)
        self.flush()
        lengths = self.cache.lengths
        for r, state in zip(rows, states, strict=True):
            if lengths[r] != state.cached_len:
                raise GenerationError(
                    f"drafter '{self.name}' holds context up to position {lengths[r]} but the target has "
                    f"{state.cached_len} committed tokens", hint="call drafter.commit after every verification")
        cfg = self.config
        roots = states[0].root if len(states) == 1 else torch.cat([s.root for s in states])  # [R]
        embed_device = self.embed_tokens.weight.device
        block = torch.full((len(rows), cfg.block_size), cfg.mask_token_id, dtype=torch.long, device=embed_device)
        block[:, 0] = roots.to(embed_device)
        embeds = self.embed_tokens(block).to(self.device, self.dtype)  # [R, bs, H]
        every = rows == list(range(self.batch_size))
        z = self.backbone.run_block(embeds, self.cache, rows=None if every else rows)  # [R, bs, H]
        features = z[:, 0 if cfg.shift_label else 1 :]  # [R, L, H]
        scores = self.head(features, self.top_k)  # [R, L, K] candidates, sorted descending
        # The head (the target's LM head) and the roots may sit on the target's device: the proposal lives on the
        # drafter's, where the corrector and the builder run (the loop moves the built tree to the target).
        dev = self.device
        assert self._last_tap is not None  # every row joined through add_row
        last = self._last_tap if every else self._last_tap[rows]  # [R, n_taps*H]
        context_row = self.backbone.hidden_norm(self.backbone.fc(last))  # [R, H]
        return DraftProposal(root=roots.to(dev), tokens=scores.tokens.to(dev), logprobs=scores.logprobs.to(dev),
                             logits=scores.logits.to(dev), features=features,
                             extras={"context_row": context_row.to(dev)})

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
        lengths = self.context_lengths()
        added = [s.cached_len - n for s, n in zip(states, lengths, strict=True)]  # [B] positions committed
        if any(a < 1 or a > nodes.shape[1] for a in added):
            raise GenerationError(
                f"drafter '{self.name}' holds context up to positions {lengths} but the target has "
                f"{[s.cached_len for s in states]} committed tokens, not 1..{nodes.shape[1]} more per row",
                hint="call drafter.commit once after every verification, with the states holding the round's tokens")
        most = max(added)
        index = nodes[:, :most].to(taps.device).clamp(min=0)  # [B, M]; -1 padding reads the root, never kept
        new = taps.gather(1, index[:, :, None].expand(-1, -1, taps.shape[2]))  # [B, M, n_taps*H]
        self._pending.append((new.to(self.device, self.dtype), added))
        last = torch.tensor([a - 1 for a in added], dtype=torch.long, device=new.device)  # [B]
        self._last_tap = self._pending[-1][0][torch.arange(len(added), device=new.device), last]  # [B, n_taps*H]
        self._pending_total = [t + a for t, a in zip(self._pending_total, added, strict=True)] \
            if self._pending_total else list(added)
        if len(self._pending) >= MAX_PENDING:
            self.flush()

    def _check_rows(self, rows: list[int], states: list[DecodeState]) -> None:
        if not rows or len(rows) != len(states) or len(set(rows)) != len(rows) \
                or any(r < 0 or r >= self.batch_size for r in rows):
            raise GenerationError(f"drafter '{self.name}' holds {self.batch_size} row(s) and was asked to propose "
                                  f"for rows {rows} with {len(states)} state(s)",
                                  hint="start every request with add_row (begin) before proposing for it")
