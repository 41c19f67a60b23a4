"""Target-adapter contracts: tree scoring equals causal prefill, commits keep exactly the accepted path,
``reset`` starts a new request, and declared taps are delivered.

The reference for "the logits after node i" is the adapter's own ``prefill`` of the prompt followed by the
tokens of node i's path: a tree forward with ancestor-only attention must agree with it.
"""

from __future__ import annotations

import torch

from specframe.interfaces import SharedEmbeddings, TargetModel
from specframe.testing.conformance.cases import BuiltCase
from specframe.testing.conformance.common import check_factory, fail, guarded
from specframe.testing.conformance.inputs import random_ids, random_tree
from specframe.tree import DraftTree
from specframe.types import TargetOutput

#: Tolerance of tree logits against causal prefill logits (float32 kernels differ in summation order).
ATOL = RTOL = 1e-3


def _prefill(target: TargetModel, ids: list[int]) -> TargetOutput:
    """A new request: reset, then prefill ``ids``."""
    target.reset()
    return target.prefill(torch.tensor([ids], dtype=torch.long))


def _last_logits(target: TargetModel, ids: list[int]) -> torch.Tensor:  # [V]
    return guarded("target", lambda: _prefill(target, ids)).logits[0, -1].detach().cpu().double()


def _close(who: str, what: str, got: torch.Tensor, want: torch.Tensor) -> None:
    got, want = got.detach().cpu().double(), want.detach().cpu().double()
    if not torch.allclose(got, want, atol=ATOL, rtol=RTOL):
        gap = float((got - want).abs().max())
        raise fail(who, f"{what}: logits differ from the causal prefill of the same tokens by up to {gap:.3g}")


def _tree_with_root(root: int, vocab_size: int) -> DraftTree:
    tree = random_tree(7, vocab_size, seed=3)
    tokens = tree.tokens.clone()
    tokens[0, 0] = root
    return DraftTree(tokens=tokens, parent=tree.parent, depth=tree.depth, logq=tree.logq, score=tree.score,
                     valid=tree.valid)


def check_target(built: BuiltCase) -> None:
    """Prefill shapes, tree logits vs causal references, commit, a second tree, reset and a rebuild."""
    who = f"target '{built.spec.name}'"
    target = guarded(who, built.build, inference=False)
    check_factory(built.spec, target)
    v = int(target.vocab_size)
    if v <= 0:
        raise fail(who, f"vocab_size must be positive, got {v}")
    if any(not 0 <= int(e) < v for e in target.eos_token_ids):
        raise fail(who, f"eos_token_ids {target.eos_token_ids} must lie in [0, {v})")
    prompt = random_ids(6, v, seed=1)

    first = guarded(who, lambda: _prefill(target, prompt))
    if tuple(first.logits.shape) != (1, 1, v) or not first.logits.is_floating_point():
        raise fail(who, f"prefill must return float logits [1, 1, V={v}], got {first.logits.dtype} "
                        f"{tuple(first.logits.shape)}")
    if target.cache_len != len(prompt):
        raise fail(who, f"cache_len is {target.cache_len} after prefilling {len(prompt)} tokens")
    root = int(first.logits[0, -1].argmax())
    tree = _tree_with_root(root, v)
    paths = [tree.path_to(0, i) for i in range(tree.capacity)]
    deepest = max(paths, key=len)
    path_tokens = [int(tree.tokens[0, j]) for j in deepest]
    # References first: each one is a separate request on the same adapter.
    node_refs = [_last_logits(target, prompt + [int(tree.tokens[0, j]) for j in p]) for p in paths]
    bonus = int(node_refs[deepest[-1]].argmax())
    second = DraftTree.from_lists([bonus, (bonus + 1) % v], [-1, 0])
    second_refs = [_last_logits(target, prompt + path_tokens + [bonus]),
                   _last_logits(target, prompt + path_tokens + [bonus, (bonus + 1) % v])]

    def round_trip() -> tuple[torch.Tensor, torch.Tensor]:
        _prefill(target, prompt)
        out = target.forward_tree(tree)
        if tuple(out.logits.shape) != (1, tree.capacity, v):
            raise fail(who, f"forward_tree must return logits [1, N={tree.capacity}, V={v}], got "
                            f"{tuple(out.logits.shape)}")
        accepted = torch.tensor([deepest], dtype=torch.long)
        target.commit(tree, accepted)
        if target.cache_len != len(prompt) + len(deepest):
            raise fail(who, f"cache_len is {target.cache_len} after committing a path of {len(deepest)} nodes "
                            f"on {len(prompt)} prompt tokens")
        return out.logits, target.forward_tree(second).logits

    logits, after_commit = guarded(who, round_trip)
    for i, ref in enumerate(node_refs):
        _close(who, f"tree node {i} (path {paths[i]})", logits[0, i], ref)
    for i, ref in enumerate(second_refs):
        _close(who, f"node {i} of the tree after commit (only the accepted path {deepest} may be cached)",
               after_commit[0, i], ref)
    again, _ = guarded(who, round_trip)
    _close(who, "the same request after reset()", again, logits)
    rebuilt = built.build()
    _close(who, "a second build from the same config", guarded(who, lambda: _prefill(rebuilt, prompt)).logits[0, -1],
           first.logits[0, -1])
    guarded(who, lambda: _check_taps(who, built, target, prompt, tree))
    _check_shared_embeddings(who, built, target)


def _check_shared_embeddings(who: str, built: BuiltCase, target: TargetModel) -> None:
    declared = built.capabilities.shares_embeddings
    if declared != isinstance(target, SharedEmbeddings):
        raise fail(who, f"declares shares_embeddings={declared} but {type(target).__name__} "
                        f"{'does not implement' if declared else 'implements'} SharedEmbeddings")
    if declared:
        weight = target.input_embeddings().weight  # [V, H]
        if weight.shape[0] < target.vocab_size or weight.dtype != target.dtype or weight.device != target.device:
            raise fail(who, f"input_embeddings() is {tuple(weight.shape)} {weight.dtype} on {weight.device}, "
                            f"expected [>= V={target.vocab_size}, H] {target.dtype} on {target.device}")


def _check_taps(who: str, built: BuiltCase, target: TargetModel, prompt: list[int], tree: DraftTree) -> None:
    if not built.capabilities.exposes_taps:
        return
    target.set_taps((0,))
    try:
        hidden = _prefill(target, prompt).hidden
        if hidden is None or hidden.dim() != 3 or tuple(hidden.shape[:2]) != (1, len(prompt)):
            raise fail(who, f"declares exposes_taps=True but prefill with taps (0,) returned hidden "
                            f"{None if hidden is None else tuple(hidden.shape)}, expected [1, P={len(prompt)}, H]")
        tree_hidden = target.forward_tree(tree).hidden
        if tree_hidden is None or tuple(tree_hidden.shape) != (1, tree.capacity, hidden.shape[2]):
            raise fail(who, f"forward_tree with taps (0,) returned hidden "
                            f"{None if tree_hidden is None else tuple(tree_hidden.shape)}, expected "
                            f"[1, N={tree.capacity}, {hidden.shape[2]}]")
    finally:
        target.set_taps(())
