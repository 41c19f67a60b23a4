"""What the ``path_selector`` and ``lattice_head`` recipe kinds train: a head over the frozen drafter's top-K.

Per anchor block (shift layout: slot ``j`` predicts ``x[a+1+j]``; its predecessor is ``x[a+j]``, the root for
slot 0), exactly what the served drafter proposes::

    z          = frozen backbone outputs                                   [N, bs, H]
    base       = log_softmax(z @ W[rows].T)  over the draft vocabulary rows (all of V, or head.draft_vocab)
    candidates = top-K of base per slot (ids, log-probs)                   [N, bs, K]

* ``path_selector`` (DFlash2; the public training code's objective): the K-way cross-entropy of
  ``S_j(x[a+j], ·) = base + <A[x[a+j]] ⊙ H z_j, B[·]>`` against the true token, predecessors teacher-forced. Where
  the true token is not among the K candidates it replaces the K-th (training only: serving scores the plain
  top-K); a true token outside the draft vocabulary is skipped. Plus the recipe's soft term (``loss.soft_weight``):
  the target's stored top-k probabilities restricted to the candidates. Slot ``j`` weighs ``exp(-j / gamma)``.
* ``lattice_head`` (LiLiCorr): the lattice factors from one head pass; along the true path (teacher-forced, and
  only while every true token so far is in the lattice: LiLiCorr's forced prefix) ``w_ce`` K-way CE +
  ``w_margin`` hinge (true candidate above the best other by ``margin``) + ``w_pen`` penalty
  ``E_head[relu(logp_target(true) - logp_target(c))]``. The target's log-probs come from its stored top-k; a
  candidate outside them gets the smallest stored one, a lower bound on its gap.

Both losses are divided by the (slot-weighted) count of valid labels of the whole batch, a constant of the
batch, so data-parallel shares add up (:mod:`~specframe_smollm2.training.data_parallel`).

Evaluation (held-out anchors): the teacher-forced argmax per slot over the candidates. Up to the first miss every
predecessor the head used is the true token, so the leading run of hits is the chain's accepted length exactly:
τ = 1 + the mean run. The base is the drafter's own argmax over the same vocabulary rows, on the same anchors.
Per-slot accuracies of the lattice head (and of the base beside it) count only slots whose true predecessor is a
lattice node (the head has no row for any other predecessor); τ counts every block.

Example: with K = 2 and slot 0's candidates ``[17, 4]`` (true token 4), the path selector's loss at slot 0 is
``-log softmax(S_0(root, [17, 4]))[1]``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from specframe_diffusion.checkpoint import DraftModelConfig
from specframe_diffusion.models.backbone import DFlashBackbone
from specframe_trees.heads import LatticeHead, LatticeHeadSizes, PathSelectorHead, PathSelectorSizes
from torch import nn

from specframe_smollm2.training.dataset import IGNORE, Batch
from specframe_smollm2.training.draft_train_model import anchor_block_features, context_rows
from specframe_smollm2.training.losses import leading_accept, slot_weights
from specframe_smollm2.training.objectives import EvalResult
from specframe_smollm2.training.recipe import Recipe


@dataclass
class Candidates:
    """One batch's blocks as the served drafter sees them (all without gradient)."""

    z: torch.Tensor  # [N, bs, H] backbone outputs per slot
    ids: torch.Tensor  # [N, bs, K] candidate token ids, best first
    logp: torch.Tensor  # [N, bs, K] their base log-probs
    labels: torch.Tensor  # [N, bs] true tokens or IGNORE
    label_logp: torch.Tensor  # [N, bs] base log-prob of the true token (-inf outside the vocabulary rows)
    prev: torch.Tensor  # [N, bs] each slot's predecessor on the true path (slot 0: the root)
    anchor_rows: torch.Tensor | None  # [N, H] projected context row before each block (target_row anchor)

    @property
    def hit(self) -> torch.Tensor:  # [N, bs, K] bool: the candidate is the true token
        return self.ids == self.labels[..., None]


class CandidateObjective:
    """Frozen drafter + the trained head; the trainer's objective interface (see :class:`.objectives.Objective`).

    Args:
        recipe: the recipe (kind ``path_selector`` or ``lattice_head``).
        embed_weight: ``[V, H]`` the target's embedding = LM head (tied in SmolLM2), frozen.
        backbone: the frozen drafter.
        head: the trained module.
        rows: sorted token ids of the draft vocabulary (None: all of V).
    """

    def __init__(self, recipe: Recipe, embed_weight: torch.Tensor, backbone: DFlashBackbone, head: nn.Module,
                 rows: torch.Tensor | None) -> None:
        self.recipe = recipe
        self.kind = recipe.kind
        self.w = embed_weight  # [V, H]
        self.backbone = backbone.requires_grad_(False).eval()
        self.head = head
        self.tap_scale = torch.ones(backbone.config.num_taps * backbone.config.hidden_size)  # [n*H]
        self.block_size = backbone.config.block_size
        self.weights = slot_weights(self.block_size, recipe.loss.gamma)  # [bs]
        self.top_k = recipe.head.top_k
        self.rows = rows  # [V_draft] or None
        vocab = embed_weight.shape[0]
        self.row_of = torch.arange(vocab) if rows is None else torch.full((vocab,), -1, dtype=torch.long).scatter(
            0, rows, torch.arange(rows.numel()))  # [V] position among the rows, -1 outside

    @property
    def trainable(self) -> nn.Module:
        return self.head

    # ------------------------------------------------------------------------------------ candidates
    @torch.no_grad()
    def candidates(self, batch: Batch) -> Candidates:
        s, k, bs = batch.block_ids.shape
        z = anchor_block_features(self.backbone, self.w, self.tap_scale, batch.taps, batch.block_ids, batch.anchors)
        weight = self.w if self.rows is None else self.w[self.rows]  # [V', H]
        base = torch.log_softmax(z @ weight.T, dim=-1)  # [N, bs, V']
        logp, pos = torch.topk(base, min(self.top_k, base.shape[-1]), dim=-1)  # [N, bs, K], sorted
        ids = pos if self.rows is None else self.rows[pos]
        labels = batch.labels.view(s * k, bs)
        row = self.row_of[labels.clamp(min=0)]  # [N, bs]
        label_logp = base.gather(-1, row.clamp(min=0)[..., None])[..., 0]
        label_logp = label_logp.masked_fill((row < 0) | (labels == IGNORE), float("-inf"))
        anchor_rows = None
        if self.kind == "lattice_head" and self.recipe.head.lattice.anchor == "target_row":
            anchor_rows = context_rows(self.backbone, self.tap_scale, batch.taps, batch.anchors - 1).view(s * k, -1)
        return Candidates(z=z, ids=ids, logp=logp, labels=labels, label_logp=label_logp,
                          prev=batch.block_ids.view(s * k, bs), anchor_rows=anchor_rows)

    def _slice(self, batch: Batch, rows: slice | None) -> tuple[Batch, torch.Tensor]:
        """The rows' share of the batch and the whole batch's normaliser (slot-weighted count of valid labels)."""
        s, k, bs = batch.block_ids.shape
        labels = batch.labels.view(s * k, bs)
        valid = (labels != IGNORE) & (self.row_of[labels.clamp(min=0)] >= 0)
        total = (self.weights[None, :] * valid.float()).sum().clamp_min(1e-6)
        if rows is not None:
            batch = Batch(*(getattr(batch, f.name)[rows] for f in dataclasses.fields(batch)))
        return batch, total

    # ------------------------------------------------------------------------------------ objectives
    def loss(self, batch: Batch, gen: torch.Generator, rows: slice | None = None) -> torch.Tensor:
        batch, total = self._slice(batch, rows)
        c = self.candidates(batch)
        s, k, bs = batch.block_ids.shape
        soft_ids = batch.soft_ids.view(s * k, bs, -1)
        soft_logp = batch.soft_logp.view(s * k, bs, -1)
        if self.kind == "path_selector":
            per = self._selector_loss(c, soft_ids, soft_logp)
        else:
            per = self._lattice_loss(c, soft_ids, soft_logp)
        return (per * self.weights[None, :]).sum() / total

    def _selector_loss(self, c: Candidates, soft_ids: torch.Tensor, soft_logp: torch.Tensor) -> torch.Tensor:
        """Per slot ``[N, bs]``: hard (+ soft) K-way cross-entropy, the true token injected at rank K."""
        hit = c.hit
        found = hit.any(-1)
        usable = torch.isfinite(c.label_logp)  # a label inside the draft vocabulary
        ids, logp = c.ids.clone(), c.logp.clone()
        inject = usable & ~found
        ids[..., -1] = torch.where(inject, c.labels.clamp(min=0), ids[..., -1])
        logp[..., -1] = torch.where(inject, c.label_logp, logp[..., -1])
        target = torch.where(found, hit.long().argmax(-1), torch.full_like(c.labels, ids.shape[-1] - 1))
        context = self.head.context(c.prev, c.z)  # [N, bs, r]
        successors = self.head.successors(ids)  # [N, bs, K, r]
        scores = logp + torch.einsum("nbr,nbkr->nbk", context, successors)  # [N, bs, K]
        logq = torch.log_softmax(scores.float(), dim=-1)
        hard = -logq.gather(-1, target[..., None])[..., 0]
        per = self._with_soft(hard, logq, ids, soft_ids, soft_logp)
        return torch.where(usable, per, torch.zeros_like(per))

    def _with_soft(self, hard: torch.Tensor, logq: torch.Tensor, ids: torch.Tensor, soft_ids: torch.Tensor,
                   soft_logp: torch.Tensor) -> torch.Tensor:
        """``(1 - beta) hard + beta soft``, soft = CE against the target's top-k mass on the candidates."""
        beta = self.recipe.loss.soft_weight
        if beta == 0:
            return hard
        top = self.recipe.loss.soft_topk
        p_top = torch.softmax(soft_logp[..., :top], dim=-1)  # [N, bs, k]
        match = ids[..., :, None] == soft_ids[..., None, :top]  # [N, bs, K, k]
        mass = (match.float() * p_top[..., None, :]).sum(-1)  # [N, bs, K]
        norm = mass.sum(-1, keepdim=True)
        soft = -(mass / norm.clamp_min(1e-9) * logq).sum(-1)
        return torch.where(norm[..., 0] > 0, (1 - beta) * hard + beta * soft, hard)

    def _lattice_loss(self, c: Candidates, soft_ids: torch.Tensor, soft_logp: torch.Tensor) -> torch.Tensor:
        """Per slot ``[N, bs]``: LiLiCorr's three terms along the true path, zero outside the forced prefix."""
        cfg = self.recipe.head.lattice
        nodes = self._true_path_nodes(c)  # [N, bs, K]
        hit = c.hit
        gt = hit.long().argmax(-1)  # [N, bs]
        forced = (hit.any(-1) & (c.labels != IGNORE)).long().cumprod(-1).bool()  # [N, bs]
        logq = torch.log_softmax(nodes, dim=-1)
        per = cfg.w_ce * -logq.gather(-1, gt[..., None])[..., 0]
        if cfg.w_margin > 0 and nodes.shape[-1] > 1:
            z_gt = nodes.gather(-1, gt[..., None])[..., 0]
            runner_up = nodes.masked_fill(hit, float("-inf")).max(-1).values
            per = per + cfg.w_margin * torch.relu(cfg.margin - (z_gt - runner_up))
        if cfg.w_pen > 0:
            per = per + cfg.w_pen * (logq.exp() * _target_gap(c.ids, gt, soft_ids, soft_logp)).sum(-1)
        return torch.where(forced, per, torch.zeros_like(per))

    def _lattice_scores(self, c: Candidates):
        anchor = c.anchor_rows if c.anchor_rows is not None else F.embedding(c.prev[:, 0], self.w)  # [N, H]
        return self.head(F.embedding(c.ids, self.w), c.logp, c.z, anchor)

    def _true_path_nodes(self, c: Candidates) -> torch.Tensor:  # [N, bs, K]
        """Each slot's factor row when the path so far is the true one (slot 0: the start factors)."""
        scores = self._lattice_scores(c)
        gt = c.hit.long().argmax(-1)  # [N, bs] (0 where absent: those slots are outside the forced prefix)
        k = scores.start.shape[-1]
        rows = scores.pair.gather(2, gt[:, :-1, None, None].expand(-1, -1, 1, k))[:, :, 0]  # [N, bs-1, K]
        return torch.cat([scores.start[:, None], rows], dim=1)

    # ------------------------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, batches: list[Batch]) -> EvalResult:
        hits = torch.zeros(self.block_size)
        base_hits = torch.zeros(self.block_size)
        counts = torch.zeros(self.block_size)
        run = base_run = 0.0
        blocks = 0
        for batch in batches:
            c = self.candidates(batch)
            pred = self._predict(c)  # [N, bs]
            base_pred = c.ids[..., 0]
            valid = (c.labels != IGNORE) & self._scored(c)
            hits += ((pred == c.labels) & valid).sum(0).float()
            base_hits += ((base_pred == c.labels) & valid).sum(0).float()
            counts += valid.sum(0).float()
            run += float(leading_accept(pred, c.labels).sum())
            base_run += float(leading_accept(base_pred, c.labels).sum())
            blocks += c.labels.shape[0]
        n = counts.clamp_min(1)
        return EvalResult((hits / n).tolist(), 1 + run / blocks, (base_hits / n).tolist(), 1 + base_run / blocks)

    def _scored(self, c: Candidates) -> torch.Tensor:  # [N, bs] bool: slots counted in the per-slot accuracy
        if self.kind == "path_selector":
            return torch.ones_like(c.labels, dtype=torch.bool)
        return torch.cat([torch.ones_like(c.labels[:, :1], dtype=torch.bool), c.hit.any(-1)[:, :-1]], dim=1)

    def _predict(self, c: Candidates) -> torch.Tensor:  # [N, bs] the head's teacher-forced choice per slot
        if self.kind == "path_selector":
            context = self.head.context(c.prev, c.z)  # [N, bs, r]
            scores = c.logp + torch.einsum("nbr,nbkr->nbk", context, self.head.successors(c.ids))
            return c.ids.gather(-1, scores.argmax(-1, keepdim=True))[..., 0]
        nodes = self._true_path_nodes(c)
        pred = c.ids.gather(-1, nodes.argmax(-1, keepdim=True))[..., 0]
        return torch.where(self._scored(c), pred, torch.full_like(pred, -1))  # no true predecessor node: a miss


def new_candidate_head(recipe: Recipe, base: DraftModelConfig, gen: torch.Generator,
                       draft_ids: torch.Tensor | None = None) -> nn.Module:
    """A freshly initialised path selector or lattice head for the ``base`` drafter (std 0.02, the public init);
    the path selector's codebooks cover ``draft_ids`` (the draft vocabulary) plus one row, or the whole vocabulary."""
    h = recipe.head
    if recipe.kind == "path_selector":
        rows = None if draft_ids is None else draft_ids.numel() + 1
        sizes = PathSelectorSizes(vocab_size=base.vocab_size, rank=h.selector_rank, hidden_size=base.hidden_size,
                                  top_k=h.top_k, codebook_rows=rows)
        return PathSelectorHead(sizes, generator=gen, draft_ids=draft_ids)
    lat = h.lattice
    sizes = LatticeHeadSizes(model_hidden_size=base.hidden_size, hidden_size=lat.hidden_size,
                             num_layers=lat.num_layers, num_heads=lat.num_heads, mlp_ratio=lat.mlp_ratio,
                             num_slots=base.num_slots, block_size=base.block_size, candidate_topk=h.top_k,
                             factor_dim=lat.factor_dim, rms_norm_eps=base.rms_norm_eps, vector_eps=lat.vector_eps,
                             logit_scale=lat.logit_scale, unary=lat.unary)
    return LatticeHead(sizes, generator=gen)


def _target_gap(ids: torch.Tensor, gt: torch.Tensor, soft_ids: torch.Tensor,
                soft_logp: torch.Tensor) -> torch.Tensor:  # [N, bs, K]
    """``relu(logp_target(true) - logp_target(candidate))`` from the target's stored top-k (see the module doc)."""
    stored = soft_logp.float()  # [N, bs, k] (-1e4 where the slot is ignored)
    floor = stored.min(-1, keepdim=True).values  # [N, bs, 1]
    match = ids[..., :, None] == soft_ids[..., None, :]  # [N, bs, K, k]
    cand = torch.where(match.any(-1), (match.float() * stored[..., None, :]).sum(-1), floor)  # [N, bs, K]
    true = cand.gather(-1, gt[..., None])  # [N, bs, 1]
    return torch.relu(true - cand)
