"""The `random_gru`, `random_markov`, `random_path_selector` and `random_lilicorr` correctors: randomly initialised
heads of a chosen size.

They exercise the learned-corrector code paths without a checkpoint (tests, benchmarks, ablations of
construction cost). Weights come from ``torch.Generator().manual_seed(seed)``; the same config gives the
same corrector. The GRU and LiLiCorr correctors also draw a random ``[vocab_size, hidden_size]`` standard-normal
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
from pydantic import Field, model_validator

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_CANDIDATES, MAX_DRAFT_DEPTH
from specframe.interfaces import BuildContext
from specframe.placement import resolve_dtype
from specframe_trees.correctors.gru import GRUCorrector
from specframe_trees.correctors.lattice import LatticeCorrector
from specframe_trees.correctors.markov import MarkovCorrector
from specframe_trees.correctors.path_selector import PathSelectorCorrector
from specframe_trees.correctors.residual import Normalize
from specframe_trees.heads.gru import DominoGRUHead, GRUHeadSizes
from specframe_trees.heads.lattice import LatticeHead, LatticeHeadSizes
from specframe_trees.heads.markov import MarkovHead, MarkovHeadSizes, MarkovVariant
from specframe_trees.heads.path_selector import PathSelectorHead, PathSelectorSizes

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


class RandomPathSelectorConfig(ComponentConfig):
    """A DFlash2-style path selector with random weights."""

    type: Literal["random_path_selector"] = "random_path_selector"
    seed: int = Field(0, ge=-(2**63), lt=2**64, description="seed of the weights")
    vocab_size: int = Field(512, ge=1, le=MAX_CANDIDATES, description="V: vocabulary size; token ids must be below it")
    rank: int = Field(16, ge=1, le=MAX_DIM, description="r: rank of the bilinear term (DFlash2: 256)")
    hidden_size: int = Field(64, ge=1, le=MAX_DIM, description="D: the drafter's hidden size")
    top_k: int | None = Field(16, ge=1, le=MAX_CANDIDATES,
                              description="candidates scored per slot (DFlash2: 16); null = every candidate")
    init_std: float = Field(0.3, gt=0, le=10, description="std of the random weights (training starts at 0.02, "
                                                          "where the bilinear term is near zero)")
    normalize: Normalize = Field("candidates", description="log-softmax over the K candidates or the full vocabulary")
    dtype: DTypeName = Field("float32", description="parameter dtype")


class RandomLiLiCorrConfig(ComponentConfig):
    """A LiLiCorr-style lattice reranker with random weights."""

    type: Literal["random_lilicorr"] = "random_lilicorr"
    seed: int = Field(0, ge=-(2**63), lt=2**64, description="seed of the weights and of the stand-in embedding table")
    vocab_size: int = Field(512, ge=1, le=MAX_CANDIDATES, description="V: vocabulary size; token ids must be below it")
    model_hidden_size: int = Field(64, ge=1, le=MAX_DIM, description="D: the drafter's hidden size")
    hidden_size: int = Field(32, ge=1, le=MAX_DIM, description="h: width of the lattice transformer")
    num_layers: int = Field(2, ge=1, le=16, description="lattice transformer layers (LiLiCorr: 2)")
    num_heads: int = Field(4, ge=1, le=256, description="attention heads (divides hidden_size)")
    mlp_ratio: float = Field(2.0, gt=0, le=16, description="MLP width / hidden_size")
    num_slots: int = Field(16, ge=1, le=MAX_DRAFT_DEPTH, description="S: most draft slots per lattice")
    candidate_topk: int = Field(8, ge=1, le=4096, description="k: candidates per slot in the lattice")
    factor_dim: int = Field(16, ge=1, le=MAX_DIM, description="f: width of the out/in factor vectors")
    logit_scale: float = Field(10.0, gt=0, le=1000, description="factors are logit_scale x cosine")
    unary: bool = Field(False, description="add the drafter's log-prob of the later candidate to every factor")
    dtype: DTypeName = Field("float32", description="parameter dtype")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> RandomLiLiCorrConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}; "
                             "pick a hidden_size divisible by num_heads")
        return self


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


def build_random_path_selector(config: RandomPathSelectorConfig,
                               ctx: BuildContext | None = None) -> PathSelectorCorrector:
    """A `PathSelectorCorrector` over a random head."""
    generator = torch.Generator().manual_seed(config.seed)
    sizes = PathSelectorSizes(vocab_size=config.vocab_size, rank=config.rank, hidden_size=config.hidden_size,
                              top_k=config.top_k or 16)
    head = PathSelectorHead(sizes, generator=generator, dtype=resolve_dtype(config.dtype, field="corrector.dtype"),
                            init_std=config.init_std)
    head.requires_grad_(False)
    return PathSelectorCorrector(head, top_k=config.top_k, normalize=config.normalize, name=config.type)


def build_random_lilicorr(config: RandomLiLiCorrConfig, ctx: BuildContext | None = None) -> LatticeCorrector:
    """A `LatticeCorrector` over a random head and a random standard-normal embedding table."""
    generator = torch.Generator().manual_seed(config.seed)
    dtype = resolve_dtype(config.dtype, field="corrector.dtype")
    sizes = LatticeHeadSizes(model_hidden_size=config.model_hidden_size, hidden_size=config.hidden_size,
                             num_layers=config.num_layers, num_heads=config.num_heads, mlp_ratio=config.mlp_ratio,
                             num_slots=config.num_slots, block_size=config.num_slots,
                             candidate_topk=config.candidate_topk, factor_dim=config.factor_dim,
                             logit_scale=config.logit_scale, unary=config.unary)
    head = LatticeHead(sizes, generator=generator, dtype=dtype)
    _randomise_zero_init(head, generator)
    head.requires_grad_(False).eval()
    embed = torch.empty(config.vocab_size, config.model_hidden_size).normal_(generator=generator).to(dtype)
    return LatticeCorrector(head, embed, name=config.type)


@torch.no_grad()
def _randomise_zero_init(head: LatticeHead, generator: torch.Generator) -> None:
    """Give the zero-initialised slot/rank embeddings and attention biases random values, so a random head's
    scores depend on slot, rank and distance as a trained one's do (a test of the plumbing, not of a model)."""
    for param in (head.slot_embedding, head.rank_embedding, head.relative_slot_bias, head.same_slot_bias):
        param.copy_(torch.empty(param.shape).normal_(0.0, 0.5, generator=generator))
