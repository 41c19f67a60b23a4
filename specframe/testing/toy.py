"""Exact toy models for CPU tests: a table-driven target, a parallel drafter and a path-aware corrector.

All three are tiny (vocabulary of a handful of tokens), deterministic given their seed, and exact (float64),
so tests can compute the target's law in closed form and compare a pipeline's output with it.

* :class:`ToyTarget` is a second-order Markov language model: the next-token logits are
  ``table[prev2, prev1]``, a ``[V, V, V]`` table. Because the law depends on the last *two* tokens, a verifier
  that reads the logits of the wrong node (its parent, say) changes the output law and is caught by the
  distribution tests.
* :class:`ToyDrafter` imitates a parallel block drafter: one "forward pass" yields per-depth top-K candidates
  along the greedy rollout of its own table, which is the target's table plus ``distance`` times noise.
* :class:`ToyCorrector` rescores a depth's candidates with a bias that depends on the parent token, so the
  corrected law differs per frontier node (as a Markov head's would).

Example::

    target = ToyTarget.random(vocab_size=6, seed=0)
    target.prefill(torch.tensor([[1, 2]]))          # cache [1, 2]; logits after token 2 = table[1, 2]
    tree = DraftTree.from_lists([4, 0, 5], [-1, 0, 0])
    out = target.forward_tree(tree)                  # logits[0, 0] = table[2, 4], logits[0, 1] = table[4, 0]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specframe.interfaces import Corrector, DecodeState, Drafter, TargetModel
from specframe.tree import DraftTree
from specframe.types import DraftProposal, TargetOutput

__all__ = ["ToyCorrector", "ToyDrafter", "ToyTarget"]


def _random_table(vocab_size: int, seed: int, scale: float) -> torch.Tensor:  # [V, V, V] float64
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(vocab_size, vocab_size, vocab_size, generator=g, dtype=torch.float64)


class ToyTarget(TargetModel):
    """Second-order Markov target: next-token logits ``table[prev2, prev1]``.

    The committed sequence of each row lives in a padded ``[B, C]`` token cache with per-row lengths. For a
    sequence of length 1 the missing ``prev2`` is ``start_token``.

    Args:
        table: ``[V, V, V]`` logits, indexed ``[prev2, prev1, next]``.
        start_token: stands in for ``prev2`` when the context holds a single token.
        eos_token_ids: end-of-sequence tokens reported to the decode loop.
    """

    def __init__(self, table: torch.Tensor, *, start_token: int = 0, eos_token_ids: tuple[int, ...] = ()) -> None:
        v = table.shape[-1]
        if table.shape != (v, v, v):
            raise ValueError(f"table must be [V, V, V], got {tuple(table.shape)}")
        self.table = table  # [V, V, V]
        self.vocab_size = v
        self.start_token = start_token
        self.eos_token_ids = tuple(eos_token_ids)
        self._cache = torch.zeros(0, 0, dtype=torch.long)  # [B, C] committed tokens, padded with 0
        self._lengths = torch.zeros(0, dtype=torch.long)  # [B] committed length per row

    @classmethod
    def random(cls, vocab_size: int, *, seed: int = 0, scale: float = 1.5, start_token: int = 0,
               eos_token_ids: tuple[int, ...] = ()) -> ToyTarget:
        """A target with i.i.d. normal logits times ``scale`` (larger = more peaked conditionals)."""
        return cls(_random_table(vocab_size, seed, scale), start_token=start_token, eos_token_ids=eos_token_ids)

    # ------------------------------------------------------------------------------------ exact law
    def next_logits(self, prev2: torch.Tensor, prev1: torch.Tensor) -> torch.Tensor:  # [..., V]
        """Logits after the context ``(..., prev2, prev1)``; both arguments are ``[...]`` int64."""
        return self.table[prev2, prev1]

    def logits_after(self, context: list[int]) -> torch.Tensor:  # [V]
        """Logits after a context given as a Python list (at least one token)."""
        prev2 = context[-2] if len(context) >= 2 else self.start_token
        return self.table[prev2, context[-1]]

    # ------------------------------------------------------------------------------- TargetModel API
    def prefill(self, input_ids: torch.Tensor) -> TargetOutput:
        """Cache ``input_ids`` ``[B, P]`` (P >= 1); return logits ``[B, 1, V]`` after the last token."""
        if input_ids.dim() != 2 or input_ids.shape[1] < 1:
            raise ValueError(f"input_ids must be [B, P] with P >= 1, got {tuple(input_ids.shape)}")
        self._cache = input_ids.long().cpu().clone()
        self._lengths = torch.full((input_ids.shape[0],), input_ids.shape[1], dtype=torch.long)
        last = self._last_two(self._cache, self._lengths)
        return TargetOutput(logits=self.next_logits(*last)[:, None, :])

    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Logits ``[B, N, V]`` after each node's own path: ``table[token(parent), token(node)]``.

        The root's ``prev2`` is the last committed token; padding nodes get the root's logits.
        """
        b = tree.batch_size
        if self._lengths.shape[0] != b:
            raise ValueError(f"tree has {b} rows but the cache holds {self._lengths.shape[0]}; call prefill first")
        tokens = tree.tokens.cpu()
        parent = tree.parent.cpu()
        _, last_cached = self._last_two(self._cache, self._lengths)  # [B]
        parent_token = torch.gather(tokens, 1, parent.clamp(min=0))  # [B, N]
        is_root = parent < 0
        prev2 = torch.where(is_root, last_cached[:, None].expand_as(tokens), parent_token)
        prev1 = torch.where(tree.valid.cpu(), tokens, tokens[:, :1].expand_as(tokens))
        prev2 = torch.where(tree.valid.cpu(), prev2, last_cached[:, None].expand_as(tokens))
        return TargetOutput(logits=self.next_logits(prev2, prev1).to(tree.tokens.device))

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor,
               paths: Sequence[Sequence[int]] | None = None) -> None:
        """Append the tokens of ``accepted_nodes`` ``[B, D + 1]`` (root first, -1 padded) to each row's cache."""
        nodes = accepted_nodes.cpu()
        keep = nodes >= 0  # [B, D + 1]
        new_tokens = torch.gather(tree.tokens.cpu(), 1, nodes.clamp(min=0))  # [B, D + 1]
        counts = keep.sum(dim=1)  # [B]
        width = int((self._lengths + counts).max())
        cache = torch.zeros(self._cache.shape[0], max(width, self._cache.shape[1]), dtype=torch.long)
        cache[:, : self._cache.shape[1]] = self._cache
        rows = torch.arange(nodes.shape[0])[:, None].expand_as(nodes)
        cols = self._lengths[:, None] + torch.cumsum(keep.long(), dim=1) - 1
        cache[rows[keep], cols[keep]] = new_tokens[keep]
        self._cache, self._lengths = cache, self._lengths + counts

    @property
    def cache_len(self) -> int:
        """Committed length; all rows must agree (see :attr:`cache_lens` for ragged batches)."""
        if self._lengths.numel() == 0:
            return 0
        if bool((self._lengths != self._lengths[0]).any()):
            raise ValueError(f"rows hold different cache lengths {self._lengths.tolist()}; read cache_lens")
        return int(self._lengths[0])

    @property
    def cache_lens(self) -> torch.Tensor:  # [B] int64
        return self._lengths.clone()

    def cached_tokens(self, row: int = 0) -> list[int]:
        """The committed sequence of one row."""
        return self._cache[row, : int(self._lengths[row])].tolist()

    def reset(self) -> None:
        self._cache = torch.zeros(0, 0, dtype=torch.long)
        self._lengths = torch.zeros(0, dtype=torch.long)

    # ------------------------------------------------------------------------- ragged batch surface
    def ragged_batch(self, taps: Sequence[int] = ()) -> ToyTarget:
        """A fresh target on the same table; it is its own `TargetRows` (rows have own lengths)."""
        self.set_taps(tuple(taps))
        rows = ToyTarget(self.table, start_token=self.start_token, eos_token_ids=self.eos_token_ids)
        rows.max_length, rows.tokenizer, rows.device = self.max_length, self.tokenizer, self.device
        return rows

    def close(self) -> None:
        """Forget every row (the end of a decode loop)."""
        self.reset()

    @property
    def lengths(self) -> list[int]:
        return self._lengths.tolist()

    def add_row(self, input_ids: torch.Tensor, capacity: int | None = None) -> TargetOutput:
        """Append one request ``[1, P]`` as the last row; logits ``[1, 1, V]`` after its last token."""
        row = input_ids.long().cpu().view(1, -1)
        width = max(self._cache.shape[1], row.shape[1])
        cache = torch.zeros(self._cache.shape[0] + 1, width, dtype=torch.long)
        cache[:-1, : self._cache.shape[1]] = self._cache
        cache[-1, : row.shape[1]] = row[0]
        self._cache = cache
        self._lengths = torch.cat([self._lengths, torch.tensor([row.shape[1]])])
        last = self._last_two(row, torch.tensor([row.shape[1]]))
        return TargetOutput(logits=self.next_logits(*last)[:, None, :])

    def keep_rows(self, rows: list[int]) -> None:
        index = torch.tensor(list(rows), dtype=torch.long)
        self._cache, self._lengths = self._cache[index], self._lengths[index]

    def _last_two(self, cache: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(prev2, prev1)`` ``[B]`` of each row's committed sequence."""
        rows = torch.arange(cache.shape[0])
        prev1 = cache[rows, lengths - 1]
        prev2 = torch.where(lengths >= 2, cache[rows, (lengths - 2).clamp(min=0)],
                            torch.full_like(prev1, self.start_token))
        return prev2, prev1


class ToyDrafter(Drafter):
    """Parallel toy drafter: per-depth top-K candidates along the greedy rollout of a perturbed target table.

    Depth 1 uses the drafter's logits after ``(tokens[-2], root)``; depth ``d + 1`` uses the logits after
    ``(x_{d-1}, x_d)`` where ``x_d`` is the drafter's own argmax at depth ``d``. ``distance = 0`` makes depth 1
    equal to the target's conditional; larger values move the drafter away from the target.

    Args:
        target: the toy target whose table is perturbed.
        depth: number of depths ``L`` proposed per round.
        num_candidates: ``K`` candidates per depth (padded with ``-inf`` when ``K > V``).
        distance: scale of the standard-normal perturbation added to the target table.
        seed: seed of the perturbation.
    """

    supports_batch = True  # stateless: reads only the row's DecodeState

    def __init__(self, target: ToyTarget, *, depth: int = 3, num_candidates: int = 4, distance: float = 0.5,
                 seed: int = 1) -> None:
        self.vocab_size = target.vocab_size
        self.start_token = target.start_token
        noise = _random_table(target.vocab_size, seed, 1.0)
        self.table = target.table + distance * noise  # [V, V, V]
        self.depth = depth
        self.num_candidates = num_candidates

    def max_depth(self) -> int:
        return self.depth

    def propose(self, state: DecodeState) -> DraftProposal:
        tokens = state.tokens.cpu()
        b, t = tokens.shape
        prev1 = tokens[:, -1]
        prev2 = tokens[:, -2] if t >= 2 else torch.full_like(prev1, self.start_token)
        logits = []
        for _ in range(self.depth):
            step = self.table[prev2, prev1]  # [B, V]
            logits.append(step)
            prev2, prev1 = prev1, step.argmax(dim=-1)
        full = torch.stack(logits, dim=1).float()  # [B, L, V]
        logprobs = full.log_softmax(dim=-1)
        k = min(self.num_candidates, self.vocab_size)
        top = torch.topk(logprobs, k, dim=-1)
        cand_tokens, cand_logprobs = top.indices, top.values  # [B, L, k]
        if k < self.num_candidates:
            pad = self.num_candidates - k
            cand_tokens = torch.cat([cand_tokens, cand_tokens.new_zeros(b, self.depth, pad)], dim=-1)
            cand_logprobs = torch.cat([cand_logprobs, cand_logprobs.new_full((b, self.depth, pad), float("-inf"))],
                                      dim=-1)
        device = state.tokens.device
        return DraftProposal(root=state.root, tokens=cand_tokens.to(device), logprobs=cand_logprobs.to(device),
                             logits=full.to(device))


class ToyCorrector(Corrector):
    """Stateless path-aware corrector: ``log_softmax_K(base logprob + strength * bias[parent token, candidate])``.

    The result is renormalised over the depth's K candidates (``-inf`` candidates stay excluded). With
    ``strength = 0`` it is the base marginals renormalised over the candidates.
    """

    def __init__(self, vocab_size: int, *, strength: float = 1.0, seed: int = 2) -> None:
        g = torch.Generator().manual_seed(seed)
        self.bias = strength * torch.randn(vocab_size, vocab_size, generator=g)  # [V, V] float32

    def child_logprobs(self, proposal: DraftProposal, depth: int, tokens: torch.Tensor,
                       state: torch.Tensor) -> torch.Tensor:  # [B, M, K]
        base = proposal.logprobs[:, depth - 1]  # [B, K]
        cand = proposal.tokens[:, depth - 1]  # [B, K]
        bias = self.bias.to(base.device)[tokens[:, :, None], cand[:, None, :]]  # [B, M, K]
        scores = base[:, None, :] + bias
        return scores.log_softmax(dim=-1)
