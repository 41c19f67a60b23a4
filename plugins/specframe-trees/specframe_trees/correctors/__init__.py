"""Correctors: the Domino GRU and DSpark Markov heads behind the `Corrector` interface."""

from specframe_trees.correctors.gru import GRUCorrector
from specframe_trees.correctors.markov import MarkovCorrector
from specframe_trees.correctors.random_heads import (
    RandomGRUConfig,
    RandomMarkovConfig,
    build_random_gru,
    build_random_markov,
)
from specframe_trees.correctors.residual import Normalize, ResidualCorrector

__all__ = [
    "GRUCorrector",
    "MarkovCorrector",
    "Normalize",
    "RandomGRUConfig",
    "RandomMarkovConfig",
    "ResidualCorrector",
    "build_random_gru",
    "build_random_markov",
]
