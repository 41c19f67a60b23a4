"""Data-parallel training under ``torchrun``: each rank computes the loss of its slice of the global batch.

Every rank keeps the same batch generator, so all ranks draw the same global batch (``optim.batch_seqs``
sequences) and the same sampled candidate vocabulary, exactly as a single process would. Rank ``r`` of ``W``
then runs the model on sequences ``[r * S/W, (r + 1) * S/W)`` and divides its weighted loss sum by the *global*
weight sum times ``1/W``; ``DistributedDataParallel`` averages the gradients over the ranks, which makes the
averaged gradient the single-process gradient of the whole batch (up to floating-point summation order). Clipping,
the optimizer step and the learning-rate schedule then run identically on every rank, so the weights stay equal.

Only rank 0 writes (metrics, ``state.pt``, the published export; all atomically as before) and evaluates; every
rank reads ``state.pt`` on resume, so ``work_dir`` must be on a filesystem every node sees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from specframe.distributed import DistContext
from specframe.errors import ConfigError
from specframe_smollm2.training.dataset import Batch

if TYPE_CHECKING:  # only for the annotation: the trainer builds the objective
    from specframe_smollm2.training.objectives import Objective

LossFn = Callable[[Batch, torch.Generator], torch.Tensor]


def rank_rows(batch_seqs: int, dist: DistContext) -> slice | None:
    """This rank's sequences of a global batch (None: a single process takes them all)."""
    if not dist.distributed:
        return None
    if batch_seqs % dist.world_size:
        raise ConfigError(f"optim.batch_seqs = {batch_seqs} does not split evenly over {dist.world_size} ranks",
                          where="optim.batch_seqs",
                          hint=f"use a multiple of {dist.world_size} (the global batch is shared out by rank)")
    share = batch_seqs // dist.world_size
    return slice(dist.rank * share, (dist.rank + 1) * share)


class _RankLoss(nn.Module):
    """The loss of this rank's slice as a module forward, so DistributedDataParallel sees the backward."""

    def __init__(self, objective: Objective, rows: slice, world_size: int) -> None:
        super().__init__()
        self.objective = objective
        self.trainable = objective.trainable  # registers the trained parameters (and only them)
        self.rows = rows
        self.world_size = world_size

    def forward(self, batch: Batch, gen: torch.Generator) -> torch.Tensor:
        return self.objective.loss(batch, gen, rows=self.rows) * self.world_size


def loss_function(objective: Objective, batch_seqs: int, dist: DistContext) -> LossFn:
    """``objective.loss`` for one process; under torchrun the DDP-wrapped loss of this rank's slice.

    The value returned on every rank is this rank's share times ``W``; :meth:`DistContext.mean` of it is the
    global batch loss.
    """
    rows = rank_rows(batch_seqs, dist)
    if rows is None:
        return objective.loss
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(_RankLoss(objective, rows, dist.world_size), find_unused_parameters=True)
    return ddp
