"""specframe-trees: correctors, tree builders and pruners for specframe.

* correctors: Domino's GRU head, DSpark's Markov head, DFlash2's path selector and LiLiCorr's lattice reranker
  (:mod:`specframe_trees.heads`) behind the `Corrector` interface, registered with random weights as
  ``random_gru`` / ``random_markov`` / ``random_path_selector`` / ``random_lilicorr``;
* tree builders: ``heap`` (DDTree), ``heap_sequential``, ``dartree``, ``chain_then_heap``, ``pctree``;
* pruners: ``deferred_topb``.

The null stages (``identity`` corrector, ``chain`` builder, ``none`` pruner) are built into specframe
(:mod:`specframe.builtin`).

Deterministic tie-breaking everywhere: an ancestor before its descendants, then the lower node (or
candidate) index; nothing depends on a backend's ``topk`` tie order.
"""

__version__ = "0.1.0"
