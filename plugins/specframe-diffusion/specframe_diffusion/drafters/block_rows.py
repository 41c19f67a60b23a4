"""`BlockRows`: the block-diffusion drafter's state for the rows of a decode loop, every drafting row in ONE forward.

A row's state is its draft KV cache of committed context (one ragged `DraftKVCache` for all rows, see
``models/draft_cache.py``). The context's keys and values depend on the target's taps alone, so they enter the
cache as soon as the taps are known (`DFlashBackbone.extend`), and a round drafts the block alone::

    add_row:          extend the new row's cache by its prompt's taps              # [1, P, n_taps*H]
    propose(rows R):  block [R, bs] = [root, MASK x (bs-1)] at positions start_r .. start_r + bs - 1
                      z = backbone(embed(block)) over each row's cache             # ONE forward for the R rows
                      slots = z[:, 1:] (non-shift: output j predicts start+j)  or  z (shift: j predicts start+1+j)
                      candidates = top-K of the (draft-vocabulary) head's log-softmax   # ONE head call
    commit(all rows): m_b = positions row b committed this round (its state's token count minus its cache's)
                      extend every row's cache by the taps at accepted_nodes[b, :m_b]   # ONE gather, ONE pass

Rows that do not draft in a round are not in the forward (their cache takes the round's root tap at commit).
``start_r`` and ``m_b`` come from the rows' `DecodeState` token counts, so neither propose nor commit reads the
device. Worked example (non-shift, bs = 4): a prompt of 6 tokens (cache: positions 0..5), root r: the block
``[r, M, M, M]`` at positions 6..9; outputs 1..3 give depths 1..3. If the verifier accepts 2 drafts, the taps of
nodes ``[root, d1, d2]`` (positions 6..8) extend the cache, and the next root sits at position 9.
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
        first = self.batch_size
        self.cache.add_rows(rows)
        self.backbone.extend(taps.to(self.device, self.dtype), self.cache,
                             rows=None if first == 0 else range(first, first + rows))

    def keep_rows(self, rows: Sequence[int]) -> None:
        self.cache.keep_rows(rows)

    # ------------------------------------------------------------------------------------------ rounds
    @torch.no_grad()
    def propose(self, rows: Sequence[int], states: Sequence[DecodeState]) -> DraftProposal:
        rows, states = list(rows), list(states)
        self._check_rows(rows, states)
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
        return DraftProposal(root=roots.to(dev), tokens=scores.tokens.to(dev), logprobs=scores.logprobs.to(dev),
                             logits=scores.logits.to(dev), features=features)

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
        lengths = self.cache.lengths
        added = [s.cached_len - n for s, n in zip(states, lengths, strict=True)]  # [B] positions committed
        if any(a < 1 or a > nodes.shape[1] for a in added):
            raise GenerationError(
                f"drafter '{self.name}' holds context up to positions {lengths} but the target has "
                f"{[s.cached_len for s in states]} committed tokens, not 1..{nodes.shape[1]} more per row",
                hint="call drafter.commit once after every verification, with the states holding the round's tokens")
        most = max(added)
        index = nodes[:, :most].to(taps.device).clamp(min=0)  # [B, M]; -1 padding reads the root, never kept
        new = taps.gather(1, index[:, :, None].expand(-1, -1, taps.shape[2]))  # [B, M, n_taps*H]
        self.backbone.extend(new.to(self.device, self.dtype), self.cache, counts=added)

    def _check_rows(self, rows: list[int], states: list[DecodeState]) -> None:
        if not rows or len(rows) != len(states) or len(set(rows)) != len(rows) \
                or any(r < 0 or r >= self.batch_size for r in rows):
            raise GenerationError(f"drafter '{self.name}' holds {self.batch_size} row(s) and was asked to propose "
                                  f"for rows {rows} with {len(states)} state(s)",
                                  hint="start every request with add_row (begin) before proposing for it")
