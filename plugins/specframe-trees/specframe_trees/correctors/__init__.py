"""Correctors: the Domino GRU, DSpark Markov, DFlash2 path-selector and LiLiCorr lattice heads behind the
`Corrector` interface."""

from specframe_trees.correctors.gru import GRUCorrector
from specframe_trees.correctors.lattice import LatticeCorrector
from specframe_trees.correctors.markov import MarkovCorrector
from specframe_trees.correctors.path_selector import PathSelectorCorrector
from specframe_trees.correctors.random_heads import (
    RandomGRUConfig,
    RandomLiLiCorrConfig,
    RandomMarkovConfig,
    RandomPathSelectorConfig,
    build_random_gru,
    build_random_lilicorr,
    build_random_markov,
    build_random_path_selector,
)
from specframe_trees.correctors.residual import Normalize, ResidualCorrector

__all__ = [
    "GRUCorrector",
    "LatticeCorrector",
    "MarkovCorrector",
    "Normalize",
    "PathSelectorCorrector",
    "RandomGRUConfig",
    "RandomLiLiCorrConfig",
    "RandomMarkovConfig",
    "RandomPathSelectorConfig",
    "ResidualCorrector",
    "build_random_gru",
    "build_random_lilicorr",
    "build_random_markov",
    "build_random_path_selector",
]
