"""Correction-head modules with the published checkpoints' parameter names and shapes.

Checkpoint loaders import these classes, load weights into them and wrap them in the matching corrector
(:class:`specframe_trees.correctors.gru.GRUCorrector`, :class:`specframe_trees.correctors.markov.MarkovCorrector`).
"""

from specframe_trees.heads.gru import DominoGRUHead, GRUFastForm, GRUHeadSizes
from specframe_trees.heads.markov import MarkovHead, MarkovHeadSizes, MarkovVariant

__all__ = ["DominoGRUHead", "GRUFastForm", "GRUHeadSizes", "MarkovHead", "MarkovHeadSizes", "MarkovVariant"]
