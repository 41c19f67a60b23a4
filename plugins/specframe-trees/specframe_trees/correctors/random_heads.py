"""The `random_gru` and `random_markov` correctors: randomly initialised heads of a chosen size.

They exercise the learned-corrector code paths without a checkpoint (tests, benchmarks, ablations of
construction cost). Weights come from ``torch.Generator().manual_seed(seed)``; the same config gives the
same corrector. The GRU corrector also draws a random ``[vocab_size, hidden_size]`` standard-normal
embedding table standing in for the target's.

Example (pipeline YAML)::

    corrector:
      type: random_gru
      hidden_size: 2560     # Qwen3-4B backbone
      gru_hidden: 1024
      emb_dim: 256
      vocab_size: 151936
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_CANDIDATES, MAX_DRAFT_DEPTH
from specframe.interfaces import BuildContext
from specframe.placement import resolve_dtype
from specframe_trees.correctors.gru import GRUCorrector
from specframe_trees.correctors.markov import MarkovCorrector
from specframe_trees.correctors.residual import Normalize
from specframe_trees.heads.gru import DominoGRUHead, GRUHeadSizes
from specframe_trees.heads.markov import MarkovHead, MarkovHeadSizes, MarkovVariant

#: Largest width of a random head (these heads exist for tests and ablations; real heads load checkpoints).
MAX_DIM = 8192
DTypeName = Literal["float32", "float64", "bfloat16"]


class RandomGRUConfig(ComponentConfig):
    """A Domino-style GRU correction head with random weights."""

    type: Literal["random_gru"] = "random_gru"
    seed: int = Field(0, ge=-(2**63), lt=2**64, description="seed of the weights and of the stand-in embedding table")
    hidden_size: int = Field(64, ge=1, le=MAX_DIM, description="H: backbone hidden size = embedding width")
    gru_hidden: int = Field(32, ge=1, le=MAX_DIM, description="G: GRU hidden size (Domino: 1024)")
    emb_dim: int = Field(16, ge=1, le=MAX_DIM, description="E: width of embed_proj's bottleneck (Domino: 256)")
    vocab_size: int = Field(512, ge=1, le=MAX_CANDIDATES, description="V: vocabulary size; token ids must be below it")
    pure_prefix_len: int = Field(1, ge=0, le=MAX_DRAFT_DEPTH, description="leading slots left uncorrected (Domino: 1)")
    normalize: Normalize = Field("candidates", description="log-softmax over the K candidates or the full vocabulary")
    low_rank: bool = Field(True, description="use the low-rank fast form (same results as the direct form)")
    dtype: DTypeName = Field("float32", description="parameter dtype")


class RandomMarkovConfig(ComponentConfig):
    """A DSpark-style Markov correction head with random weights."""

    type: Literal["random_markov"] = "random_markov"
    seed: int = Field(0, ge=-(2**63), lt=2**64, description="seed of the weights")
    vocab_size: int = Field(512, ge=1, le=MAX_CANDIDATES, description="V: vocabulary size; token ids must be below it")
    rank: int = Field(16, ge=1, le=MAX_DIM, description="r: rank of the bias (DSpark: 256)")
    hidden_size: int = Field(64, ge=1, le=MAX_DIM, description="H: backbone hidden size (gated and rnn variants)")
    variant: MarkovVariant = Field("vanilla", description="vanilla, gated or rnn (DSpark default: vanilla)")
    pure_prefix_len: int = Field(0, ge=0, le=MAX_DRAFT_DEPTH, description="leading slots left uncorrected (DSpark: 0)")
    normalize: Normalize = Field("candidates", description="log-softmax over the K candidates or the full vocabulary")
    dtype: DTypeName = Field("float32", description="parameter dtype")


def build_random_gru(config: RandomGRUConfig, ctx: BuildContext | None = None) -> GRUCorrector:
    """A `GRUCorrector` over a random head and a random standard-normal embedding table."""
    generator = torch.Generator().manual_seed(config.seed)
    dtype = resolve_dtype(config.dtype, field="corrector.dtype")
    sizes = GRUHeadSizes(hidden_size=config.hidden_size, gru_hidden=config.gru_hidden,
                         emb_dim=config.emb_dim, vocab_size=config.vocab_size)
    head = DominoGRUHead(sizes, generator=generator, dtype=dtype)
    head.requires_grad_(False)
    embed = torch.empty(config.vocab_size, config.hidden_size).normal_(generator=generator).to(dtype)
    return GRUCorrector(head, embed, pure_prefix_len=config.pure_prefix_len, normalize=config.normalize,
                        low_rank=config.low_rank, name=config.type)


def build_random_markov(config: RandomMarkovConfig, ctx: BuildContext | None = None) -> MarkovCorrector:
    """A `MarkovCorrector` over a random head."""
    generator = torch.Generator().manual_seed(config.seed)
    sizes = MarkovHeadSizes(vocab_size=config.vocab_size, rank=config.rank, hidden_size=config.hidden_size,
                            variant=config.variant)
    head = MarkovHead(sizes, generator=generator, dtype=resolve_dtype(config.dtype, field="corrector.dtype"))
    head.requires_grad_(False)
    return MarkovCorrector(head, pure_prefix_len=config.pure_prefix_len, normalize=config.normalize,
                           name=config.type)
