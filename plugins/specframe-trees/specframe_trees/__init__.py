"""specframe-trees: correctors, tree builders and pruners for specframe.

* correctors: Domino's GRU head and DSpark's Markov head (:mod:`specframe_trees.heads`)
  behind the `Corrector` interface, registered with random weights as ``random_gru`` / ``random_markov``;
* tree builders: ``heap`` (DDTree), ``heap_sequential``, ``dartree``, ``chain_then_heap``;
* pruners: ``deferred_topb``.

The null stages (``identity`` corrector, ``chain`` builder, ``none`` pruner) are built into specframe
(:mod:`specframe.builtin`).

Deterministic tie-breaking everywhere: an ancestor before its descendants, then the lower node (or
candidate) index; nothing depends on a backend's ``topk`` tie order.
"""

__version__ = "0.1.0"
