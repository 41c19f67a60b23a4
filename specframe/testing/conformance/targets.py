"""Target-adapter contracts: tree scoring equals causal prefill, commits keep exactly the accepted path,
``reset`` starts a new request, declared taps are delivered, and rows of a ragged batch score as alone.

The reference for "the logits after node i" is the adapter's own ``prefill`` of the prompt followed by the
tokens of node i's path: a tree forward with ancestor-only attention must agree with it.
"""

from __future__ import annotations

from typing import Any

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
    return _sized_tree(root, 7, vocab_size, seed=3)


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
        shared: Any = target  # a SharedEmbeddings target (checked above), with the dtype its weights are in
        weight = shared.input_embeddings().weight  # [V, H]
        if weight.shape[0] < target.vocab_size or weight.dtype != shared.dtype or weight.device != target.device:
            raise fail(who, f"input_embeddings() is {tuple(weight.shape)} {weight.dtype} on {weight.device}, "
                            f"expected [>= V={target.vocab_size}, H] {shared.dtype} on {target.device}")


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


def _single_rounds(target: TargetModel, prompt: list[int],
                   rounds: list[tuple[DraftTree, list[int]]]) -> list[torch.Tensor]:
    """Logits ``[N, V]`` of each (tree, accepted path) round of one request on the single-request path."""
    _prefill(target, prompt)
    out = []
    for tree, path in rounds:
        out.append(target.forward_tree(tree).logits[0].detach().cpu().double())
        target.commit(tree, torch.tensor([path], dtype=torch.long))
    return out


def check_target_ragged(built: BuiltCase) -> None:
    """Rows of a ragged batch (`TargetModel.ragged_batch`) score as the same requests do alone.

    Three prompts of different lengths join one after the other; each round stacks one tree per row (different
    sizes, padded), commits a different number of nodes per row, and a row leaves before the last round.
    Every row's logits must equal the single-request path's on the same tokens. Targets without batched
    decoding (``ragged_batch()`` returns None) have nothing to check.
    """
    who = f"target '{built.spec.name}'"
    target = guarded(who, built.build, inference=False)
    rows = guarded(who, target.ragged_batch, inference=False)
    if rows is None:
        return
    v = int(target.vocab_size)
    prompts = [random_ids(6, v, seed=1), random_ids(3, v, seed=2), random_ids(9, v, seed=3)]
    sizes = [(7, 1, 4), (3, 5, 1), (6, 2, 5)]  # per row, nodes of its tree in rounds 1..3
    plans: list[list[tuple[DraftTree, list[int]]]] = []
    for r, prompt in enumerate(prompts):
        plan, root = [], int(_last_logits(target, prompt).argmax())
        for k, n in enumerate(sizes[r]):
            tree = _tree_with_root(root, v) if n == 7 else _sized_tree(root, n, v, seed=10 * r + k)
            path = tree.path_to(0, (k + r) % tree.capacity)  # a different accepted depth per row and round
            plan.append((tree, path))
            root = (root + 3 + k) % v
        plans.append(plan)
    refs = [_single_rounds(target, p, plan) for p, plan in zip(prompts, plans, strict=True)]

    def batched() -> list[list[torch.Tensor]]:
        got: list[list[torch.Tensor]] = [[] for _ in prompts]
        for prompt in prompts:
            rows.add_row(torch.tensor([prompt], dtype=torch.long))
        active = [0, 1, 2]
        for k in range(3):
            if k == 2:  # row 1 leaves before the last round
                rows.keep_rows([0, 2])
                active = [0, 2]
            trees = [plans[r][k][0] for r in active]
            stacked = DraftTree.stack(trees)
            logits = rows.forward_tree(stacked).logits.detach().cpu().double()  # [B, N_max, V]
            width = max(len(plans[r][k][1]) for r in active)
            accepted = torch.full((len(active), width), -1, dtype=torch.long)
            for b, r in enumerate(active):
                got[r].append(logits[b, : trees[b].capacity])
                accepted[b, : len(plans[r][k][1])] = torch.tensor(plans[r][k][1])
            rows.commit(stacked, accepted)
        return got

    got = guarded(who, batched)
    for r in range(len(prompts)):
        for k, logits in enumerate(got[r]):
            _close(who, f"ragged batch row {r} (prompt of {len(prompts[r])} tokens), round {k + 1}", logits,
                   refs[r][k])


def _sized_tree(root: int, n: int, vocab_size: int, *, seed: int) -> DraftTree:
    tree = random_tree(n, vocab_size, seed=seed)
    tokens = tree.tokens.clone()
    tokens[0, 0] = root
    return DraftTree(tokens=tokens, parent=tree.parent, depth=tree.depth, logq=tree.logq, score=tree.score,
                     valid=tree.valid)
