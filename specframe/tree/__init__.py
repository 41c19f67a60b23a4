"""The draft-tree type, its derived views and its invariant checker."""

from specframe.tree.draft_tree import DraftTree
from specframe.tree.invariants import assert_valid_tree, check_tree

__all__ = ["DraftTree", "assert_valid_tree", "check_tree"]
