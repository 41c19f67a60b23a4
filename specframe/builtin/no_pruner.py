"""The `none` pruner: the tree goes to verification exactly as the builder made it."""

from __future__ import annotations

from typing import Literal

from specframe.config.base import ComponentConfig
from specframe.interfaces import BuildContext, Pruner, RoundContext
from specframe.tree import DraftTree


class NoPruneConfig(ComponentConfig):
    """Keep every node the builder produced."""

    type: Literal["none"] = "none"


class NoPruner(Pruner):
    """Returns the tree unchanged."""

    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        return tree


def build_no_pruner(config: NoPruneConfig, ctx: BuildContext | None = None) -> NoPruner:
    return NoPruner()
