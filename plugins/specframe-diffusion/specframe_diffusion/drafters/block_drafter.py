"""`BlockDiffusionDrafter`: one parallel block forward per round, conditioned on the target's hidden states.

Round structure (docs/concepts/block-drafters.md), per batch row::

    begin:    pending = prefill taps of the prompt             # [P, n_taps*H], not yet in the draft cache
    propose:  start = committed tokens (= position of the root / bonus)
              block = [root, MASK x (bs-1)] at positions start .. start+bs-1
              z = backbone(pending, embed(block), cache)        # cache now covers [0, start); pending = []
              slots = z[1:] (non-shift: output j predicts start+j)  or  z (shift: output j predicts start+1+j)
              logits = lm_head(slots); candidates = top-K of log_softmax(logits) per slot
              (with a reduced draft vocabulary: over the subset's rows only, see ``vocab_head``)
    commit:   pending = target taps at the accepted tree nodes (root first)

Worked example (non-shift, bs = 4): prompt of 6 tokens, root r. Block ``[r, M, M, M]`` at positions 6..9;
outputs 1..3 give depths 1..3 (positions 7..9). If the verifier accepts 2 drafts, the next round's pending
context is the taps of nodes ``[root, d1, d2]`` (positions 6..8) and the next root sits at position 9.

Rows are drafted one at a time with their own cache, so rows may commit different numbers of tokens.
"""

from __future__ import annotations

import torch
from torch import nn

from specframe.draft_vocab import DraftVocab
from specframe.errors import GenerationError
from specframe.interfaces import DecodeState, Drafter
from specframe.tree import DraftTree
from specframe.types import DraftProposal, TargetOutput, VerifyResult
from specframe_diffusion.draft_config import DraftModelConfig
from specframe_diffusion.drafters.vocab_head import DraftVocabHead
from specframe_diffusion.models.backbone import DFlashBackbone
from specframe_diffusion.models.draft_cache import DraftKVCache


class BlockDiffusionDrafter(Drafter):
    """Drafts every depth of a block in one backbone pass; see the module docstring.

    Args:
        backbone: the loaded draft backbone (in its compute dtype and device).
        config: the checkpoint's config (block size, mask token, taps, shift layout).
        embed_tokens: token ids -> embeddings (the target's, or the DeepSeek checkpoint's copy).
        lm_head: hidden -> vocabulary logits (the target's, or the DeepSeek checkpoint's copy).
        top_k: candidates per depth (capped by the (draft) vocabulary size).
        draft_vocab: a reduced draft vocabulary (candidates only from it), or None for the full one.
        name: the registered name, for error messages.
    """

    supports_batch = True  # per-request caches and pending taps are made by begin(), so forks are independent

    def __init__(self, backbone: DFlashBackbone, config: DraftModelConfig, embed_tokens: nn.Module,
                 lm_head: nn.Module, *, top_k: int, name: str = "dflash",
                 draft_vocab: DraftVocab | None = None) -> None:
        self.backbone = backbone
        self.config = config
        self.embed_tokens = embed_tokens
        self.lm_head = lm_head
        self.head = DraftVocabHead(lm_head, draft_vocab)
        self.top_k = top_k
        self.name = name
        self.target_layers = tuple(config.target_layer_ids)
        param = next(backbone.parameters())
        self.device, self.dtype = param.device, param.dtype
        self._caches: list[DraftKVCache] = []
        self._pending: list[torch.Tensor] = []  # per row [C, n_taps*H] taps not yet in the cache

    @property
    def num_slots(self) -> int:
        return self.config.num_slots

    # ------------------------------------------------------------------------------------------ taps
    def _taps_of(self, out: TargetOutput, what: str) -> torch.Tensor:  # [B, N, n_taps*H]
        hidden = out.hidden
        width = self.config.num_taps * self.config.hidden_size
        if hidden is None:
            raise GenerationError(
                f"drafter '{self.name}' needs the target's hidden states at {what}, but TargetOutput.hidden "
                "is None", hint=f"the target must tap layers {list(self.target_layers)} (ragged_batch(taps))")
        if hidden.shape[-1] != width:
            raise GenerationError(
                f"drafter '{self.name}' expects {self.config.num_taps} taps of width {self.config.hidden_size} "
                f"({width} features) at {what}, the target gave {hidden.shape[-1]}",
                hint=f"the target must tap exactly layers {list(self.target_layers)}")
        return hidden

    # ------------------------------------------------------------------------------------- lifecycle
    def begin(self, state: DecodeState, prefill: TargetOutput) -> None:
        taps = self._taps_of(prefill, "the prompt")  # [B, P, n_taps*H]
        if taps.shape[1] != state.cached_len:
            raise GenerationError(f"prefill gave taps for {taps.shape[1]} positions but {state.cached_len} "
                                  "prompt tokens are cached", hint="prefill must return taps for every prompt token")
        self._caches = [self.backbone.new_cache() for _ in range(taps.shape[0])]
        self._pending = [row.to(self.device, self.dtype) for row in taps]

    @torch.no_grad()
    def propose(self, state: DecodeState) -> DraftProposal:
        if len(self._caches) != state.tokens.shape[0]:
            raise GenerationError(f"drafter '{self.name}' was not started for this request",
                                  hint="call begin(state, prefill) after the target's prefill")
        cfg = self.config
        mask = torch.full((cfg.block_size,), cfg.mask_token_id, dtype=torch.long, device=self.device)
        slot_outputs = []
        for row, (cache, pending) in enumerate(zip(self._caches, self._pending, strict=True)):
            start = cache.length + pending.shape[0]
            if start != state.cached_len:
                raise GenerationError(
                    f"drafter '{self.name}' holds context up to position {start} but the target has "
                    f"{state.cached_len} committed tokens", hint="call drafter.commit after every verification")
            block = mask.clone()
            block[0] = state.tokens[row, -1]
            embed_device = self.embed_tokens.weight.device
            embeds = self.embed_tokens(block[None].to(embed_device)).to(self.device, self.dtype)  # [1, bs, H]
            z = self.backbone(pending[None], embeds, cache)  # [1, bs, H]
            self._pending[row] = pending[:0]
            slot_outputs.append(z[:, 0 if cfg.shift_label else 1 :])
        features = torch.cat(slot_outputs, dim=0)  # [B, L, H]
        scores = self.head(features, self.top_k)  # [B, L, K] candidates, sorted descending
        return DraftProposal(
            root=state.root,
            tokens=scores.tokens,
            logprobs=scores.logprobs,
            logits=scores.logits,
            features=features,
        )

    def commit(self, state: DecodeState, tree: DraftTree, result: VerifyResult, target_out: TargetOutput) -> None:
        taps = self._taps_of(target_out, "the verified tree nodes")  # [B, N, n_taps*H]
        for row in range(taps.shape[0]):
            n = int(result.num_accepted[row])
            nodes = result.accepted_nodes[row, : n + 1].to(taps.device)  # root first
            accepted = taps[row].index_select(0, nodes).to(self.device, self.dtype)  # [n + 1, n_taps*H]
            self._pending[row] = torch.cat([self._pending[row], accepted], dim=0)
