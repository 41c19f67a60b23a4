"""What each recipe kind trains: the trainable module, the loss of a batch, and held-out per-slot acceptance.

* ``drafter``: the DFlash backbone (shift layout) on frozen target embedding / LM head (tied in SmolLM2);
* ``ar_head``: Domino's GRU head on a frozen drafter; teacher-forced GRU over the true continuation, slot 0 pure;
* ``markov_head``: DSpark's Markov head on a frozen drafter; bias from the previous token, every slot corrected.

Corrected logits (docs/concepts/correction-heads.md), slot ``i`` of a block whose true tokens are
``x_a, x_{a+1}, ...``::

    ar:      final_i = base_i + W2 · SiLU(W_z z_i + W_s s_i),  s_i = GRU(E[x_a], ..., E[x_{a+i}])   (i >= 1)
    markov:  final_i = base_i + W2 · W1[x_{a+i}]                                                    (i >= 0)
    gated:   final_i = base_i + W2 · (σ(W_g [z_i ; W1[x_{a+i}]]) ⊙ W1[x_{a+i}])                         (i >= 0)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from specframe_diffusion.models.backbone import DFlashBackbone
from torch import nn

from specframe_smollm2.training.dataset import IGNORE, Batch
from specframe_smollm2.training.draft_train_model import anchor_block_features
from specframe_smollm2.training.losses import candidate_set, leading_accept, sampled_loss, slot_weights
from specframe_smollm2.training.recipe import Recipe


@dataclass
class EvalResult:
    slot_acc: list[float]  # per-slot accuracy of the argmax vs the target's greedy token
    tau: float  # 1 + mean leading-accepted drafts (teacher-forced chain τ)
    base_slot_acc: list[float] | None = None  # heads: the frozen drafter alone
    base_tau: float | None = None


class Objective:
    """Holds the frozen parts (embedding, backbone) and the trainable module of one recipe kind."""

    def __init__(self, recipe: Recipe, embed_weight: torch.Tensor, backbone: DFlashBackbone,
                 tap_scale: torch.Tensor, head: nn.Module | None) -> None:
        self.recipe = recipe
        self.kind = recipe.kind
        self.w = embed_weight  # [V, H] frozen, shared embedding and LM head
        self.backbone = backbone
        self.tap_scale = tap_scale  # [n*H]
        self.head = head
        self.block_size = backbone.config.block_size
        self.mask_id = backbone.config.mask_token_id
        self.weights = slot_weights(self.block_size, recipe.loss.gamma)
        if self.kind != "drafter":
            backbone.requires_grad_(False).eval()

    @property
    def trainable(self) -> nn.Module:
        return self.backbone if self.kind == "drafter" else self.head

    def features(self, batch: Batch) -> torch.Tensor:  # [N, bs, H]
        return anchor_block_features(self.backbone, self.w, self.tap_scale, batch.taps, batch.block_ids,
                                     batch.anchors)

    def _gru_states(self, block_ids: torch.Tensor) -> torch.Tensor:  # [N, bs] -> [N, bs, G]
        states, _ = self.head.prefix_gru(nn.functional.embedding(block_ids, self.w))
        return states

    def corrections(self, z: torch.Tensor, block_ids: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        """Per-slot corrections ``[N, bs, C]`` of the candidate rows ``rows`` (None: the full vocabulary)."""
        head = self.head
        if self.kind == "ar_head":
            g = self._gru_states(block_ids)  # [N, bs, G]
            act = nn.functional.silu(head.embed_proj[0](torch.cat([z, g], dim=-1)))
            w2 = head.embed_proj[2].weight  # [V, E]
            corr = act @ (w2 if rows is None else w2[rows]).T
            corr = torch.cat([torch.zeros_like(corr[:, :1]), corr[:, 1:]], dim=1)  # slot 0 is pure
            return corr
        # u_k = W1[x_{k-1}] (vanilla) or gate(h_k, W1[x_{k-1}]) * W1[x_{k-1}] (gated): the inference head's own rule
        u = head.bias_vector(head.embed(block_ids), z, None)  # [N, bs, r]
        w2 = head.markov_w2.weight  # [V, r]
        return u @ (w2 if rows is None else w2[rows]).T

    def loss(self, batch: Batch, gen: torch.Generator, rows: slice | None = None) -> torch.Tensor:
        """The batch's weighted loss; with ``rows``, the share of those sequences in the whole batch's loss.

        The candidate vocabulary is drawn from the whole batch either way (the same draws as one process), and the
        share is normalised by the whole batch's weight, so the shares of a partition of the rows sum to the loss
        (:mod:`specframe_smollm2.training.data_parallel`).
        """
        s, k, bs = batch.block_ids.shape
        labels = batch.labels.view(s * k, bs)
        top = self.recipe.loss.soft_topk
        soft_ids = batch.soft_ids.view(s * k, bs, -1)[..., :top]
        cand = candidate_set(labels, soft_ids, self.w.shape[0], self.recipe.loss.sampled_vocab, gen)
        total_weight = None
        if rows is not None:
            total_weight = (self.weights[None, :] * (labels != IGNORE).float()).sum()
            batch = Batch(*(getattr(batch, f.name)[rows] for f in dataclasses.fields(batch)))
            s = batch.block_ids.shape[0]
            labels = batch.labels.view(s * k, bs)
            soft_ids = batch.soft_ids.view(s * k, bs, -1)[..., :top]
        soft_logp = batch.soft_logp.view(s * k, bs, -1)[..., :top]
        if self.kind == "drafter":
            z = self.features(batch)
        else:
            with torch.no_grad():
                z = self.features(batch)
        logits = z @ self.w[cand].T  # [N, bs, C]
        if self.kind != "drafter":
            logits = logits + self.corrections(z, batch.block_ids.view(s * k, bs), cand)
        return sampled_loss(logits, cand, labels, soft_ids, soft_logp, self.weights, self.recipe.loss.soft_weight,
                            total_weight=total_weight, soft=self.recipe.loss.soft)

    @torch.no_grad()
    def evaluate(self, batches: list[Batch]) -> EvalResult:
        """Full-vocabulary argmax per slot on fixed held-out anchor batches."""
        hits = torch.zeros(self.block_size)
        counts = torch.zeros(self.block_size)
        base_hits = torch.zeros(self.block_size)
        acc_sum = base_sum = 0.0
        blocks = 0
        for batch in batches:
            s, k, bs = batch.block_ids.shape
            labels = batch.labels.view(s * k, bs)
            z = self.features(batch)
            base = z @ self.w.T  # [N, bs, V]
            base_pred = base.argmax(-1)
            if self.kind == "drafter":
                pred = base_pred
            else:
                pred = (base + self.corrections(z, batch.block_ids.view(s * k, bs), None)).argmax(-1)
            valid = labels != IGNORE
            hits += ((pred == labels) & valid).sum(0).float()
            base_hits += ((base_pred == labels) & valid).sum(0).float()
            counts += valid.sum(0).float()
            acc_sum += float(leading_accept(pred, labels).sum())
            base_sum += float(leading_accept(base_pred, labels).sum())
            blocks += s * k
        slot = (hits / counts.clamp_min(1)).tolist()
        if self.kind == "drafter":
            return EvalResult(slot, 1 + acc_sum / blocks)
        return EvalResult(slot, 1 + acc_sum / blocks, (base_hits / counts.clamp_min(1)).tolist(),
                          1 + base_sum / blocks)
