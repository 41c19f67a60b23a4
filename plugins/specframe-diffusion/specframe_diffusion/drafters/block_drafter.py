"""`BlockDiffusionDrafter`: one parallel block forward per round, conditioned on the target's hidden states.

Round structure (docs/concepts/block-drafters.md), per request::

    begin:    cache = context K/V of the prompt's taps         # [P, n_taps*H] -> positions [0, P)
    propose:  start = committed tokens (= position of the root / bonus) = the cache's length
              block = [root, MASK x (bs-1)] at positions start .. start+bs-1
              z = backbone block pass over the cache            # the cache is unchanged
              slots = z[1:] (non-shift: output j predicts start+j)  or  z (shift: output j predicts start+1+j)
              logits = lm_head(slots); candidates = top-K of log_softmax(logits) per slot
              (with a reduced draft vocabulary: over the subset's rows only, see ``vocab_head``)
    commit:   cache += context K/V of the target's taps at the accepted tree nodes (root first)

The state of the requests lives in a `BlockRows` (``block_rows.py``): the decode loop's :meth:`rows` drafts every
drafting row in one backbone forward and one head call, and the one-request methods (``begin`` / ``propose`` /
``commit``, each batch row of their `DecodeState` one request) run on a `BlockRows` of their own, so there is one
implementation of the drafter's rounds.
"""

from __future__ import annotations

from torch import nn

from specframe.draft_vocab import DraftVocab
from specframe.errors import GenerationError
from specframe.interfaces import DecodeState, Drafter
from specframe.tree import DraftTree
from specframe.types import DraftProposal, TargetOutput, VerifyResult
from specframe_diffusion.draft_config import DraftModelConfig
from specframe_diffusion.drafters.block_rows import BlockRows
from specframe_diffusion.drafters.vocab_head import DraftVocabHead
from specframe_diffusion.models.backbone import DFlashBackbone


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

    supports_batch = True  # per-request state lives in BlockRows (rows() or begin()), so forks are independent

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
        self._rows: BlockRows | None = None  # the one-request API's rows, made by begin()

    def max_depth(self) -> int:
        """One depth per draft slot of the block (``num_slots``: 8 for the shipped SmolLM2 drafters)."""
        return self.config.num_slots

    def state_bytes_per_token(self) -> int:
        """The draft cache's keys and values for one committed context position (every backbone layer)."""
        c = self.config
        return 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * self.dtype.itemsize

    def rows(self) -> BlockRows:
        """Native batched rows: one backbone forward and one head call for all drafting rows of a round."""
        return BlockRows(self.backbone, self.config, self.embed_tokens, self.head, top_k=self.top_k, name=self.name)

    # ------------------------------------------------------------------------------ one-request API
    def begin(self, state: DecodeState, prefill: TargetOutput) -> None:
        rows = self.rows()
        rows.add_row(state, prefill)
        self._rows = rows

    def propose(self, state: DecodeState) -> DraftProposal:
        rows = self._started(state)
        return rows.propose(range(rows.batch_size), _per_row(state))

    def commit(self, state: DecodeState, tree: DraftTree, result: VerifyResult, target_out: TargetOutput) -> None:
        self._started(state).commit(_per_row(state), tree, result, target_out)

    def _started(self, state: DecodeState) -> BlockRows:
        if self._rows is None or self._rows.batch_size != state.tokens.shape[0]:
            raise GenerationError(f"drafter '{self.name}' was not started for this request",
                                  hint="call begin(state, prefill) after the target's prefill")
        return self._rows


def _per_row(state: DecodeState) -> list[DecodeState]:
    """Each batch row of ``state`` as a request of its own (views of its tokens)."""
    if state.tokens.shape[0] == 1:
        return [state]
    return [DecodeState(tokens=state.tokens[b : b + 1], prompt_len=state.prompt_len, sampling=state.sampling,
                        seed=state.seed) for b in range(state.tokens.shape[0])]
