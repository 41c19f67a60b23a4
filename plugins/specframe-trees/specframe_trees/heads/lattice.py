"""LiLiCorr's candidate-lattice reranker (NVIDIA, arXiv 2608.20530) with the public module's parameter names.

A block drafter proposes its top-``k`` candidates for each of ``S`` slots: an ``S x k`` lattice. One pass of a
small transformer over the whole lattice gives every candidate a vector; two factor heads turn them into
transition scores between candidates of adjacent slots, and a start score for slot 0::

    x[s, j]    = token_proj(E[cand]) + pass_hidden_proj(h_s) + feature_mlp(f[s, j]) + slot_emb[s] + rank_emb[j]
    x          = 2 layers of bidirectional attention over all S*k candidates (relative-slot + same-slot biases)
    a          = anchor_norm(context_proj(anchor))
    y[s, j]    = SiLU(factor_input_proj([x ; a ; x ⊙ a]))          (x after output_norm)
    start[j]   = scale * cos(anchor_out_head(a), in_head(y[0, j]))
    pair[s, i, j] = scale * cos(out_head(y[s, i]), in_head(y[s + 1, j]))

``f`` holds five features of the drafter's own law: the candidate's log-prob, its probability, its gap to the
slot's best log-prob, its rank as a fraction and a top-1 flag. Every factor is a cosine times the fixed
``logit_scale``, so scores are bounded. A path is walked left to right: slot 0 from ``start``, slot ``s + 1`` from
``pair[s, i, :]`` of the candidate ``i`` chosen at slot ``s`` (LiLiCorr's greedy walk; a softmax over a row is the
law a sampler draws from).

Choices made where the sources leave the serving setting open (documented so a checkpoint says which it is):

* **anchor**: the head takes any ``[B, D]`` anchor. LiLiCorr's is the target's projected hidden row just before the
  block (``lilicorr_anchor: target_row``, the value when a checkpoint names none): the block drafter's
  ``hidden_norm(fc(taps))`` of the last committed position, handed over in ``proposal.extras["context_row"]``.
  specframe's SmolLM2 head uses the target embedding of the root (the verified token before slot 0) instead
  (``root_embedding``, which its export writes); :class:`~specframe_trees.correctors.lattice.LatticeCorrector`
  serves both.
* **dead candidates** (``-inf`` base log-probs: a vocabulary smaller than k, padded rows) enter the features with
  log-prob ``LOGPROB_FLOOR``, are masked as attention keys and get no score; the public head never sees them.
* the attention's ``in_proj_weight`` starts normal(0.02) like every Linear (PyTorch's default is Xavier).
* **unary** (``lilicorr_unary``, default off = LiLiCorr): add the drafter's own log-prob of the later candidate to
  every factor, ``start[j] + logp[0, j]`` and ``pair[s, i, j] + logp[s + 1, j]``, so the head learns a residual
  correction of the drafter's law (DFlash2's form) instead of the whole law from the features. For a head trained
  on a frozen drafter in few steps this starts at the drafter's own chain (the SmolLM2 recipe measures both).

Parameter names (prefix ``lilicorr.`` in checkpoints), ``D`` the drafter width, ``h`` the head width, ``f`` the
factor width, ``n`` heads::

    token_proj.{weight [h, D], bias}  (absent when h == D)   pass_hidden_proj.{weight [h, D], bias}
    feature_mlp.0.{weight, bias} [5] (LayerNorm)   feature_mlp.1.{weight [h, 5], bias}
    feature_mlp.3.{weight [h, h], bias}
    slot_embedding [1, 1, S, 1, h]   rank_embedding [1, 1, 1, k, h]   relative_slot_bias [n, 2*block_size - 1]
    same_slot_bias [n]   context_proj.{weight [h, D], bias}
    layers.{i}.attn_norm.weight   layers.{i}.attn.{in_proj_weight [3h, h], in_proj_bias, out_proj.weight, out_proj.bias}
    layers.{i}.mlp_norm.weight    layers.{i}.mlp.0.{weight, bias}   layers.{i}.mlp.2.{weight, bias}
    output_norm.weight   anchor_norm.weight   factor_input_proj.{weight [h, 3h], bias}
    out_head / in_head / anchor_out_head.{weight [f, h], bias}

Example (S = 2 slots, k = 2): ``start = [1.2, -0.4]`` picks candidate 0 of slot 0; ``pair[0, 0] = [-2.0, 3.1]``
then picks candidate 1 of slot 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from specframe_trees.heads.init import materialize

#: Features per candidate: log-prob, probability, gap to the slot's best, rank fraction, top-1 flag.
NUM_CANDIDATE_FEATURES = 5
#: Log-prob given to a dead (-inf) candidate in the features.
LOGPROB_FLOOR = -30.0
#: Additive attention bias that hides a dead candidate as a key (finite, so an all-dead lattice stays NaN-free).
DEAD_KEY_BIAS = -1.0e4
INIT_STD = 0.02


@dataclass(frozen=True)
class LatticeHeadSizes:
    """Shapes and constants of a LiLiCorr head (the checkpoint's ``lilicorr_*`` fields)."""

    model_hidden_size: int  # D: the drafter's (= target's) hidden size
    hidden_size: int  # h: the lattice transformer's width
    num_layers: int
    num_heads: int
    mlp_ratio: float
    num_slots: int  # S: draft slots per block
    block_size: int  # the relative-slot bias covers distances -(block_size-1) .. block_size-1
    candidate_topk: int  # k: candidates per slot the head was trained on (serves any k' <= k)
    factor_dim: int  # f
    rms_norm_eps: float = 1e-6
    vector_eps: float = 1e-6
    logit_scale: float = 10.0
    unary: bool = False  # add the drafter's log-prob of the later candidate to every factor


@dataclass
class LatticeScores:
    """One lattice's factors (log-potentials): ``start [B, k]`` and ``pair [B, S - 1, k, k]``."""

    start: torch.Tensor  # [B, k]
    pair: torch.Tensor  # [B, S - 1, k, k], pair[b, s, i, j]: candidate i of slot s -> candidate j of slot s + 1


class LatticeLayer(nn.Module):
    """Pre-norm bidirectional attention with an additive bias, then a SiLU MLP (LiLiCorr's lattice layer)."""

    def __init__(self, hidden_size: int, num_heads: int, mlp_ratio: float, eps: float) -> None:
        super().__init__()
        inner = int(hidden_size * mlp_ratio)
        self.attn_norm = nn.RMSNorm(hidden_size, eps=eps, device="meta")
        self.attn = nn.MultiheadAttention(hidden_size, num_heads, batch_first=True, device="meta")
        self.mlp_norm = nn.RMSNorm(hidden_size, eps=eps, device="meta")
        self.mlp = nn.Sequential(nn.Linear(hidden_size, inner, device="meta"), nn.SiLU(),
                                 nn.Linear(inner, hidden_size, device="meta"))

    def forward(
        self,
        x: torch.Tensor,  # [B, N, h]
        bias: torch.Tensor,  # [B * n, N, N] additive attention bias
    ) -> torch.Tensor:  # [B, N, h]
        y = self.attn_norm(x)
        attended, _ = self.attn(y, y, y, attn_mask=bias, need_weights=False)
        x = x + attended
        return x + self.mlp(self.mlp_norm(x))


class LatticeHead(nn.Module):
    """The LiLiCorr reranker; see the module docstring.

    Args:
        sizes: shapes and constants.
        generator: initialises the weights (default: seed 0); the global RNG is never used.
        device: where to allocate; ``"meta"`` allocates nothing (load with ``assign=True``).
        dtype: parameter dtype (default float32).
    """

    def __init__(self, sizes: LatticeHeadSizes, *, generator: torch.Generator | None = None,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        d, h, f = sizes.model_hidden_size, sizes.hidden_size, sizes.factor_dim
        if h % sizes.num_heads:
            raise ValueError(f"LiLiCorr hidden_size {h} must be divisible by num_heads {sizes.num_heads}")
        self.sizes = sizes
        self.token_proj: nn.Module = nn.Identity() if d == h else nn.Linear(d, h, device="meta")
        self.pass_hidden_proj = nn.Linear(d, h, device="meta")
        self.feature_mlp = nn.Sequential(nn.LayerNorm(NUM_CANDIDATE_FEATURES, device="meta"),
                                         nn.Linear(NUM_CANDIDATE_FEATURES, h, device="meta"), nn.SiLU(),
                                         nn.Linear(h, h, device="meta"))
        self.slot_embedding = nn.Parameter(torch.empty(1, 1, sizes.num_slots, 1, h, device="meta"))
        self.rank_embedding = nn.Parameter(torch.empty(1, 1, 1, sizes.candidate_topk, h, device="meta"))
        self.relative_slot_bias = nn.Parameter(torch.empty(sizes.num_heads, 2 * sizes.block_size - 1, device="meta"))
        self.same_slot_bias = nn.Parameter(torch.empty(sizes.num_heads, device="meta"))
        self.context_proj = nn.Linear(d, h, device="meta")
        self.layers = nn.ModuleList([LatticeLayer(h, sizes.num_heads, sizes.mlp_ratio, sizes.rms_norm_eps)
                                     for _ in range(sizes.num_layers)])
        self.output_norm = nn.RMSNorm(h, eps=sizes.rms_norm_eps, device="meta")
        self.anchor_norm = nn.RMSNorm(h, eps=sizes.rms_norm_eps, device="meta")
        self.factor_input_proj = nn.Linear(3 * h, h, device="meta")
        self.out_head = nn.Linear(h, f, device="meta")
        self.in_head = nn.Linear(h, f, device="meta")
        self.anchor_out_head = nn.Linear(h, f, device="meta")
        materialize(self, generator=None, device=device, dtype=dtype)
        if device is None or torch.device(device).type != "meta":
            self._init_weights(generator if generator is not None else torch.Generator().manual_seed(0))

    @torch.no_grad()
    def _init_weights(self, generator: torch.Generator) -> None:
        """Linear weights (and the attention's in-projection) normal(0.02), biases and embeddings zero, norms one."""
        for name, param in self.named_parameters():
            if name.endswith("weight") and param.dim() == 2:
                param.copy_(torch.empty(param.shape).normal_(0.0, INIT_STD, generator=generator))
            elif ("norm" in name or name.startswith("feature_mlp.0.")) and name.endswith("weight"):
                param.fill_(1.0)
            else:
                param.zero_()

    # ------------------------------------------------------------------------------------ forward
    def candidate_features(
        self,
        logprobs: torch.Tensor,  # [B, S, k] the drafter's log-probs of the candidates (-inf: dead)
    ) -> torch.Tensor:  # [B, S, k, 5]
        """log-prob, probability, gap to the slot's best, rank fraction, top-1 flag (dead: log-prob floor)."""
        lp = logprobs.float().clamp(min=LOGPROB_FLOOR)
        k = lp.shape[-1]
        gap = lp - lp.max(dim=-1, keepdim=True).values
        rank = torch.arange(k, device=lp.device, dtype=lp.dtype) / float(max(k - 1, 1))
        top1 = torch.zeros(k, device=lp.device, dtype=lp.dtype)
        top1[0] = 1.0
        return torch.stack([lp, lp.exp(), gap, rank.expand_as(lp), top1.expand_as(lp)], dim=-1)

    def attention_bias(
        self,
        slots: int,
        k: int,
        dead: torch.Tensor,  # [B, S, k] bool
    ) -> torch.Tensor:  # [B * n, S*k, S*k]
        """Relative-slot bias + same-slot bias per head, dead candidates hidden as keys."""
        dev = self.relative_slot_bias.device
        slot_ids = torch.arange(slots, device=dev).repeat_interleave(k)  # [N]
        rel = slot_ids[:, None] - slot_ids[None, :]  # [N, N] in -(S-1) .. S-1
        bias = self.relative_slot_bias[:, rel + self.sizes.block_size - 1]  # [n, N, N]
        same = (rel == 0).to(bias.dtype)
        bias = bias + same[None] * self.same_slot_bias[:, None, None]
        keys = dead.reshape(dead.shape[0], 1, 1, slots * k).to(bias.dtype) * DEAD_KEY_BIAS  # [B, 1, 1, N]
        full = bias[None] + keys  # [B, n, N, N]
        return full.reshape(-1, slots * k, slots * k)

    def forward(
        self,
        candidate_embeds: torch.Tensor,  # [B, S, k, D] token embeddings of the candidates
        candidate_logprobs: torch.Tensor,  # [B, S, k] the drafter's log-probs (-inf: dead)
        pass_hidden: torch.Tensor,  # [B, S, D] the drafter's hidden state per slot
        anchor: torch.Tensor,  # [B, D] the anchor vector
    ) -> LatticeScores:
        """The lattice's start and pair factors (log-potentials = logit_scale x cosine)."""
        b, s, k, _ = candidate_embeds.shape
        sz = self.sizes
        if s > sz.num_slots or k > sz.candidate_topk:
            raise ValueError(f"a lattice of {s} slots x {k} candidates does not fit the head's {sz.num_slots} x "
                             f"{sz.candidate_topk}")
        dtype = self.pass_hidden_proj.weight.dtype
        dead = ~torch.isfinite(candidate_logprobs)  # [B, S, k]
        x = self.token_proj(candidate_embeds.to(dtype)) + self.pass_hidden_proj(pass_hidden.to(dtype))[:, :, None]
        x = x + self.feature_mlp(self.candidate_features(candidate_logprobs).to(dtype))
        x = x + self.slot_embedding[0, :, :s] + self.rank_embedding[0, :, :, :k]  # [B, S, k, h]
        x = x.reshape(b, s * k, -1)
        bias = self.attention_bias(s, k, dead).to(dtype)
        for layer in self.layers:
            x = layer(x, bias)
        x = self.output_norm(x).reshape(b, s, k, -1)  # [B, S, k, h]
        a = self.anchor_norm(self.context_proj(anchor.to(dtype)))  # [B, h]
        a_cand = a[:, None, None, :].expand_as(x)
        y = F.silu(self.factor_input_proj(torch.cat([x, a_cand, x * a_cand], dim=-1)))  # [B, S, k, h]
        eps = sz.vector_eps
        out_vec = F.normalize(self.out_head(y), dim=-1, eps=eps)  # [B, S, k, f]
        in_vec = F.normalize(self.in_head(y), dim=-1, eps=eps)
        anchor_out = F.normalize(self.anchor_out_head(a), dim=-1, eps=eps)  # [B, f]
        start = torch.matmul(in_vec[:, 0], anchor_out[:, :, None])[..., 0]  # [B, k]
        pair = torch.matmul(out_vec[:, :-1], in_vec[:, 1:].transpose(-1, -2))  # [B, S-1, k, k]
        start, pair = sz.logit_scale * start.float(), sz.logit_scale * pair.float()
        if sz.unary:
            lp = candidate_logprobs.float().clamp(min=LOGPROB_FLOOR)  # [B, S, k]
            start = start + lp[:, 0]
            pair = pair + lp[:, 1:, None, :]
        return LatticeScores(start=start, pair=pair)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
