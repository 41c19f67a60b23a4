"""The `DraftTree` invariant checker, used by tests, the conformance kit and the pipeline's debug mode."""

from __future__ import annotations

import torch

from specframe.tree.draft_tree import DraftTree


def check_tree(tree: DraftTree, *, budget: int | None = None, monotone_scores: bool = False) -> list[str]:
    """Return every violated invariant as a readable sentence (an empty list means the tree is valid).

    Invariants: consistent shapes and dtypes; a valid root at index 0 with parent -1 and depth 0; valid
    nodes form a contiguous prefix; each valid non-root node's parent is valid and has a smaller index;
    ``depth = depth[parent] + 1``; siblings carry distinct tokens; padding has parent -1. Optionally the
    node count (root excluded) is within ``budget`` and path scores never increase along an edge.
    """
    errors: list[str] = []
    fields = {
        "tokens": tree.tokens,
        "parent": tree.parent,
        "depth": tree.depth,
        "logq": tree.logq,
        "score": tree.score,
        "valid": tree.valid,
    }
    shape = tree.tokens.shape
    for name, t in fields.items():
        if t.shape != shape:
            errors.append(f"{name} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    for name in ("tokens", "parent", "depth"):
        if fields[name].dtype != torch.long:
            errors.append(f"{name} has dtype {fields[name].dtype}, expected torch.int64")
    if tree.valid.dtype != torch.bool:
        errors.append(f"valid has dtype {tree.valid.dtype}, expected torch.bool")
    if tree.child_ids is not None and tree.child_probs is not None:  # the draft laws, [B, N, K] each
        if tree.child_ids.shape[:2] != shape or tree.child_probs.shape != tree.child_ids.shape:
            errors.append(f"child_ids / child_probs have shapes {tuple(tree.child_ids.shape)} / "
                          f"{tuple(tree.child_probs.shape)}, expected {tuple(shape)} + [K] both")
        elif tree.child_ids.dtype != torch.long:
            errors.append(f"child_ids has dtype {tree.child_ids.dtype}, expected torch.int64")
    if errors or tree.tokens.dim() != 2 or shape[1] == 0:
        return errors or ["tree must be 2-D [B, N] with N >= 1"]

    parent = tree.parent.cpu().tolist()
    depth = tree.depth.cpu().tolist()
    valid = tree.valid.cpu().tolist()
    tokens = tree.tokens.cpu().tolist()
    score = tree.score.float().cpu().tolist()
    for b in range(shape[0]):
        if not valid[b][0]:
            errors.append(f"row {b}: root (node 0) is not valid")
            continue
        if parent[b][0] != -1 or depth[b][0] != 0:
            errors.append(f"row {b}: root must have parent -1 and depth 0")
        n = sum(valid[b])
        if not all(valid[b][:n]):
            errors.append(f"row {b}: valid nodes are not a contiguous prefix")
        if budget is not None and n - 1 > budget:
            errors.append(f"row {b}: {n - 1} nodes exceed the budget {budget}")
        seen: set[tuple[int, int]] = set()
        for i in range(1, shape[1]):
            p = parent[b][i]
            if not valid[b][i]:
                if p != -1:
                    errors.append(f"row {b}: padding node {i} has parent {p}, expected -1")
                continue
            if not 0 <= p < i:
                errors.append(f"row {b}: node {i} has parent {p}, which does not precede it")
                continue
            if not valid[b][p]:
                errors.append(f"row {b}: node {i} has an invalid parent {p}")
            if depth[b][i] != depth[b][p] + 1:
                errors.append(f"row {b}: node {i} has depth {depth[b][i]}, parent depth {depth[b][p]}")
            key = (p, tokens[b][i])
            if key in seen:
                errors.append(f"row {b}: node {i} repeats token {tokens[b][i]} among the children of {p}")
            seen.add(key)
            if monotone_scores and score[b][i] > score[b][p]:
                errors.append(f"row {b}: node {i} scores {score[b][i]} above its parent's {score[b][p]}")
    return errors


def assert_valid_tree(tree: DraftTree, **kwargs: object) -> None:
    """Raise ``AssertionError`` listing every violation if ``tree`` breaks an invariant."""
    errors = check_tree(tree, **kwargs)  # type: ignore[arg-type]
    if errors:
        raise AssertionError("invalid DraftTree:\n  " + "\n  ".join(errors))
