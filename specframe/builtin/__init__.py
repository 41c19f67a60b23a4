"""The core's built-in plugin: the null stages every pipeline falls back to, and the autoregressive baseline.

Like pytest's own plugins, these stages are registered through the same hooks as every installed plugin
(:mod:`specframe.builtin.plugin`, plugin name ``builtin``, distribution ``specframe``), so the registry,
``specframe components`` and validation treat them like any other component:

* drafter ``none`` (:mod:`~specframe.builtin.no_drafter`): an empty proposal, i.e. plain decoding;
* corrector ``identity`` (:mod:`~specframe.builtin.identity`): the drafter's marginals;
* tree builder ``chain`` (:mod:`~specframe.builtin.chain`): the best corrected candidate per depth;
* pruner ``none`` (:mod:`~specframe.builtin.no_pruner`): the tree as built.

:mod:`~specframe.builtin.baseline` defines the autoregressive baseline pipeline from these stages.
"""
