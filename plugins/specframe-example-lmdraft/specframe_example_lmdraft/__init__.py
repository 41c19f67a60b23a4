"""specframe-example-lmdraft: a third-party specframe plugin adding the ``lm_draft`` drafter.

``lm_draft`` drafts with a small autoregressive causal LM that shares the target's tokenizer (for example a
smaller model of the same family): each round it rolls out its own greedy continuation for ``L`` depths and
proposes the top ``K`` tokens of its distribution at every depth. The package is laid out the way an outside
author would publish it; docs/plugins/writing.md walks through it.
"""

from specframe_example_lmdraft.config import LMDraftConfig
from specframe_example_lmdraft.drafter import LMDrafter

__all__ = ["LMDraftConfig", "LMDrafter"]
