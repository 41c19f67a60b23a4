"""The "τ ≈ 1 with drafts" alarm: a warning when a pipeline's drafts are never accepted.

A drafter that runs but whose drafts the target always rejects (weights that went NaN, a head on the wrong drafter,
``target_layer_ids`` listed in another order than the drafter was trained with) gives outputs that are still
exactly right, so nothing fails: every round pays for the drafter and the tree and commits one token (τ = 1.00).
This is the metric failure the field keeps reporting, and only the run itself can see it.

:class:`AcceptanceAlarm` counts the consecutive verified drafts (rows of rounds whose tree held at least one
draft node) in which not one draft token was accepted, from the counts the round has already read to the host
(no device read of its own; O(1) per row). Once :data:`WINDOW` of them pass in a row, it warns once per pipeline,
naming the pipeline and the likely causes; any accepted token restarts the count.

Example: a greedy drafter with a sound checkpoint accepts something within a few rounds; a drafter loaded with the
wrong tap order accepts nothing, and after 128 drafted rounds the warning appears.
"""

from __future__ import annotations

import warnings

#: Consecutive drafted rows without an accepted draft token before the alarm fires. A useful drafter accepts at
#: least one token in a few rounds (τ 1.3 means a third of them); 128 rejections in a row are a broken drafter,
#: not bad luck, at any temperature a drafter helps at.
WINDOW = 128


class DraftAcceptanceWarning(UserWarning):
    """A pipeline drafts, but the target has accepted none of its drafts for :data:`WINDOW` rounds."""


class AcceptanceAlarm:
    """Watches one pipeline's drafted rounds (see the module docstring)."""

    def __init__(self, pipeline: str) -> None:
        self.pipeline = pipeline
        self.rejected_run = 0  # drafted rows since the last accepted draft token
        self.fired = False

    def observe(self, drafted_nodes: int, accepted: int) -> None:
        """One row of one round: ``drafted_nodes`` draft nodes verified, ``accepted`` of its tokens accepted."""
        if self.fired or drafted_nodes <= 0:
            return
        if accepted > 0:
            self.rejected_run = 0
            return
        self.rejected_run += 1
        if self.rejected_run >= WINDOW:
            self.fired = True
            warnings.warn(
                f"pipeline '{self.pipeline}': the target has accepted none of the last {WINDOW} drafts (τ ≈ 1): "
                "every round pays for the drafter and commits one token. Likely a broken drafter: weights from a "
                "diverged run, a corrector head trained on another drafter, or target_layer_ids in another order "
                "than the drafter was trained with; compare with `drafter: {type: none}` and check the checkpoint",
                DraftAcceptanceWarning, stacklevel=2)
