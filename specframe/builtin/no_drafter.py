"""`NoDrafter`: proposes nothing, so every round verifies the root alone.

Running the pipeline with this drafter is plain autoregressive decoding through the same loop, target adapter
and verifier as every speculative configuration: the denominator of a speedup measurement.
"""

from __future__ import annotations

from typing import Literal

from specframe.config.base import ComponentConfig
from specframe.config.bounds import StageShape
from specframe.interfaces import DecodeState, Drafter
from specframe.types import DraftProposal


class NoDraftConfig(ComponentConfig):
    """No drafting: every round verifies the root alone, i.e. plain autoregressive decoding."""

    type: Literal["none"] = "none"

    def output_shape(self, upstream: StageShape) -> StageShape:
        return StageShape(depth=0, candidates=0, nodes=0)


class NoDrafter(Drafter):
    """Always returns ``DraftProposal.empty(root)``."""

    supports_batch = True  # stateless: the history is the row's own DecodeState
    proposes = False  # the decode loop runs plain rounds: no draft, build, prune or verify stage

    def propose(self, state: DecodeState) -> DraftProposal:
        return DraftProposal.empty(state.root)

    def max_depth(self) -> int:
        return 0
