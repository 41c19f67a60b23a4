"""Correction-head modules with the published checkpoints' parameter names and shapes.

Checkpoint loaders import these classes, load weights into them and wrap them in the matching corrector
(:class:`~specframe_trees.correctors.gru.GRUCorrector`, :class:`~specframe_trees.correctors.markov.MarkovCorrector`,
:class:`~specframe_trees.correctors.path_selector.PathSelectorCorrector`,
:class:`~specframe_trees.correctors.lattice.LatticeCorrector`).
"""

from specframe_trees.heads.gru import DominoGRUHead, GRUFastForm, GRUHeadSizes
from specframe_trees.heads.lattice import LatticeHead, LatticeHeadSizes, LatticeScores
from specframe_trees.heads.markov import MarkovHead, MarkovHeadSizes, MarkovVariant
from specframe_trees.heads.path_selector import PathSelectorHead, PathSelectorSizes

__all__ = ["DominoGRUHead", "GRUFastForm", "GRUHeadSizes", "LatticeHead", "LatticeHeadSizes", "LatticeScores",
           "MarkovHead", "MarkovHeadSizes", "MarkovVariant", "PathSelectorHead", "PathSelectorSizes"]
