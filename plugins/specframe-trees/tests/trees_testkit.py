"""Helpers for the specframe-trees tests: small correctors, round contexts and independent oracles.

The oracles are written independently of the builders: a brute-force enumeration of all prefixes (DDTree)
and a plain best-first heap over an explicit tree (Lemma 1).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable

from specframe_trees.correctors import (
    RandomGRUConfig,
    RandomLiLiCorrConfig,
    RandomMarkovConfig,
    RandomPathSelectorConfig,
    build_random_gru,
    build_random_lilicorr,
    build_random_markov,
    build_random_path_selector,
)

from specframe.builtin.identity import IdentityCorrector
from specframe.interfaces import Corrector, RoundContext
from specframe.sampling.noise import RoundNoise
from specframe.tree import DraftTree
from specframe.types import DraftProposal, SamplingParams

#: Large enough for every proposal drawn by specframe.testing.strategies.proposals with default ranges.
VOCAB = 16
HIDDEN = 8


def ctx(budget: int) -> RoundContext:
    return RoundContext(budget=budget, sampling=SamplingParams(), noise=RoundNoise.from_seed(0))


def small_gru(*, dtype: str = "float64", seed: int = 0, **overrides: object) -> Corrector:
    config = RandomGRUConfig(seed=seed, hidden_size=HIDDEN, gru_hidden=6, emb_dim=5, vocab_size=VOCAB,
                             dtype=dtype, **overrides)
    return build_random_gru(config)


def small_markov(variant: str = "vanilla", *, dtype: str = "float64", seed: int = 0,
                 **overrides: object) -> Corrector:
    config = RandomMarkovConfig(seed=seed, vocab_size=VOCAB, rank=4, hidden_size=HIDDEN, variant=variant,
                                dtype=dtype, **overrides)
    return build_random_markov(config)


def small_path_selector(*, dtype: str = "float64", seed: int = 0, **overrides: object) -> Corrector:
    config = RandomPathSelectorConfig(seed=seed, vocab_size=VOCAB, rank=4, hidden_size=HIDDEN, dtype=dtype,
                                      **{"top_k": 3, "init_std": 0.6, **overrides})
    return build_random_path_selector(config)


def small_lilicorr(*, dtype: str = "float64", seed: int = 0, **overrides: object) -> Corrector:
    config = RandomLiLiCorrConfig(seed=seed, vocab_size=VOCAB, model_hidden_size=HIDDEN, dtype=dtype,
                                  **{"hidden_size": 8, "num_heads": 2, "num_slots": 4, "candidate_topk": 4,
                                     "factor_dim": 4, **overrides})
    return build_random_lilicorr(config)


#: Corrector factories exercised by the builder property tests.
CORRECTORS: dict[str, Callable[[], Corrector]] = {
    "identity": IdentityCorrector,
    "gru": small_gru,
    "gru_fp32_direct": lambda: small_gru(dtype="float32", low_rank=False),
    "markov_vanilla": small_markov,
    "markov_gated": lambda: small_markov("gated"),
    "markov_rnn": lambda: small_markov("rnn", pure_prefix_len=1),
    "path_selector": small_path_selector,
    "lilicorr": small_lilicorr,
}


def token_paths(tree: DraftTree, b: int) -> dict[tuple[int, ...], tuple[float, float]]:
    """Each non-root node of row ``b`` as its token path (root excluded) -> (score, logq)."""
    out = {}
    for i in range(1, int(tree.num_nodes[b])):
        path = tuple(int(tree.tokens[b, j]) for j in tree.path_to(b, i)[1:])
        out[path] = (float(tree.score[b, i]), float(tree.logq[b, i]))
    return out


def brute_force_top_prefixes(logq: list[list[float]], budget: int) -> list[tuple[int, ...]]:
    """All finite prefixes of the implicit K-ary tree, sorted by (-score, rank path), first ``budget``."""
    depth, k = len(logq), len(logq[0])
    scored = []
    for d in range(1, depth + 1):
        for ranks in itertools.product(range(k), repeat=d):
            score = 0.0
            for i, r in enumerate(ranks):
                score += logq[i][r]
            if score > -math.inf:
                scored.append((-score, ranks))
    scored.sort()
    return [ranks for _, ranks in scored[:budget]]


def heap_pops(children: list[list[int]], score: list[float], budget: int) -> list[int]:
    """First ``budget`` pops of a best-first heap over an explicit tree (root 0, key (-score, index))."""
    heap = [(-score[c], c) for c in children[0]]
    heapq.heapify(heap)
    popped: list[int] = []
    while heap and len(popped) < budget:
        _, node = heapq.heappop(heap)
        popped.append(node)
        for c in children[node]:
            heapq.heappush(heap, (-score[c], c))
    return popped


def proposal_vocab_ok(p: DraftProposal) -> bool:
    return int(p.tokens.max()) < VOCAB and int(p.root.max()) < VOCAB
