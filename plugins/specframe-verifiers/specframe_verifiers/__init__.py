"""specframe-verifiers: lossless verifiers and the sampled tree builders whose draft laws they need.

Verifiers: ``greedy`` (argmax walk, temperature 0), ``walk`` (target draws, any deterministic or independently
sampled tree), ``chain_rejection`` (speculative sampling on sampled chains), ``tree_rejection`` (recursive
rejection on trees sampled without replacement). Tree builders: ``sampled_chain``, ``sampled_tree``.
"""

from specframe_verifiers.chain_rejection import ChainRejectionVerifier
from specframe_verifiers.sampled_builders import SampledTreeBuilder
from specframe_verifiers.tree_rejection import TreeRejectionVerifier
from specframe_verifiers.walk import GreedyVerifier, WalkVerifier

__all__ = [
    "ChainRejectionVerifier",
    "GreedyVerifier",
    "SampledTreeBuilder",
    "TreeRejectionVerifier",
    "WalkVerifier",
]
