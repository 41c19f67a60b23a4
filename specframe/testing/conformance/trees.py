"""Tree-builder and pruner contracts: every returned tree passes ``check_tree`` and is made of the proposal's
candidates (builders) or of the input tree's nodes (pruners); draft regimes and budgets are honoured.

Builders run on random proposals (ties, masked candidates, a dead depth, an empty proposal) with two
correctors: one returning the marginals and the path-aware toy corrector.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specframe.builtin.identity import IdentityCorrector
from specframe.errors import SpecframeError
from specframe.interfaces import Corrector, RoundContext, TreeBuilder
from specframe.registry import TreeBuilderCapabilities
from specframe.sampling.noise import RoundNoise
from specframe.testing.conformance.cases import BuiltCase
from specframe.testing.conformance.common import check_factory, fail, guarded
from specframe.testing.conformance.inputs import random_proposal, random_tree
from specframe.testing.toy import ToyCorrector
from specframe.tree import DraftTree, check_tree
from specframe.types import DraftProposal, SamplingParams

BUDGET = 8
SETTINGS = (SamplingParams(temperature=1.0), SamplingParams(temperature=0.0))


def _ctx(budget: int, params: SamplingParams, seed: int) -> RoundContext:
    return RoundContext(budget=budget, sampling=params, noise=RoundNoise.from_seed(seed))


def trees_equal(a: DraftTree, b: DraftTree) -> bool:
    """Same rows, nodes, tokens, parents and scores (padding ignored)."""
    if a.tokens.shape != b.tokens.shape or not torch.equal(a.valid.cpu(), b.valid.cpu()):
        return False
    v = a.valid.cpu()
    return (torch.equal(a.tokens.cpu()[v], b.tokens.cpu()[v]) and torch.equal(a.parent.cpu()[v], b.parent.cpu()[v])
            and torch.allclose(a.score.cpu()[v].double(), b.score.cpu()[v].double(), equal_nan=True))


def check_built_tree(who: str, tree: DraftTree, p: DraftProposal, caps: TreeBuilderCapabilities,
                     vocab_size: int) -> None:
    """A valid tree rooted at the proposal's root whose nodes are live candidates of their depth."""
    if not isinstance(tree, DraftTree):
        raise fail(who, f"build returned {type(tree).__name__}, expected DraftTree")
    problems = check_tree(tree)
    if problems:
        raise fail(who, "invalid tree:\n  " + "\n  ".join(problems))
    if tree.batch_size != p.batch_size or tree.tokens.device != p.tokens.device:
        raise fail(who, f"tree has {tree.batch_size} rows on {tree.tokens.device}; the proposal has "
                        f"{p.batch_size} on {p.tokens.device}")
    if not torch.equal(tree.tokens[:, 0].cpu(), p.root.cpu().long()):
        raise fail(who, "node 0 must carry the proposal's root token")
    if tree.max_depth > p.depth:
        raise fail(who, f"tree depth {tree.max_depth} exceeds the proposal's {p.depth} depths")
    live = torch.isfinite(p.logprobs.cpu())
    tokens, depth, valid = tree.tokens.cpu(), tree.depth.cpu(), tree.valid.cpu()
    for b in range(tree.batch_size):
        for i in range(1, int(valid[b].sum())):
            d = int(depth[b, i])
            allowed = set(p.tokens[b, d - 1].cpu()[live[b, d - 1]].tolist())
            if int(tokens[b, i]) not in allowed:
                raise fail(who, f"row {b} node {i} (depth {d}) has token {int(tokens[b, i])}, not a live candidate "
                                f"of depth {d}: {sorted(allowed)}")
    if not caps.produces_tree and any(len(kids) > 1 for row in tree.children() for kids in row):
        raise fail(who, "declares produces_tree=False (chains only) but a node has several children")
    if caps.draft_regime == "sampled":
        _check_sampled(who, tree, vocab_size)


def _check_sampled(who: str, tree: DraftTree, vocab_size: int) -> None:
    dense = tree.child_q  # [B, N, V], the dense view of the recorded candidate laws
    if dense is None or tuple(dense.shape) != (*tree.tokens.shape, vocab_size):
        raise fail(who, f"declares draft_regime='sampled' but child_q is "
                        f"{None if dense is None else tuple(dense.shape)}, expected "
                        f"{(*tree.tokens.shape, vocab_size)} (the law each node's children were drawn from)")
    q = dense.cpu().double()
    parent = tree.parent.cpu().clamp(min=0)
    q_parent = torch.gather(q, 1, parent[..., None].expand_as(q))  # [B, N, V]
    q_token = q_parent.gather(2, tree.tokens.cpu()[..., None])[..., 0]  # [B, N]
    child = tree.valid.cpu() & (tree.parent.cpu() >= 0)
    if bool((q_token[child] <= 0).any()):
        raise fail(who, "a sampled node's token has probability 0 under its parent's child_q")


def _proposals(built: BuiltCase, vocab_size: int) -> list[DraftProposal]:
    shape = built.case.proposal
    return [random_proposal(shape, vocab_size, seed=0), random_proposal(shape, vocab_size, seed=1),
            random_proposal(shape, vocab_size, seed=2, masked=False)]


def _correctors(vocab_size: int) -> dict[str, Corrector]:
    return {"marginal corrector": IdentityCorrector(), "path-aware toy corrector": ToyCorrector(vocab_size, seed=2)}


def _build(who: str, builder: TreeBuilder, p: DraftProposal, corrector: Corrector, ctx: RoundContext) -> DraftTree:
    return guarded(who, lambda: builder.build(p, corrector, ctx))


def check_tree_builder(built: BuiltCase) -> None:
    """Valid trees from every probe; deterministic builders ignore the RNG; optional inputs really are."""
    who = f"tree_builder '{built.spec.name}'"
    caps = built.capabilities
    target = built.make_target()
    v = target.vocab_size
    builder = guarded(who, lambda: built.build(target), inference=False)
    check_factory(built.spec, builder)
    for params in SETTINGS:
        for n, p in enumerate(_proposals(built, v)):
            for label, corrector in _correctors(v).items():
                what = f"{who} (proposal {n}, {label}, T={params.temperature})"
                tree = _build(what, builder, p, corrector, _ctx(BUDGET, params, seed=n))
                check_built_tree(what, tree, p, caps, v)
                if caps.draft_regime == "deterministic":
                    other = _build(what, builder, p, corrector, _ctx(BUDGET, params, seed=n + 100))
                    if not trees_equal(tree, other):
                        raise fail(what, "declares draft_regime='deterministic' but the tree changes with the "
                                         "random streams; declare 'sampled' (and record child_q)")
                if not caps.needs_logits:
                    ctx = _ctx(BUDGET, params, seed=n)
                    bare = _build(what, builder, replace(p, logits=None), corrector, ctx)
                    check_built_tree(what + " without logits", bare, p, caps, v)
    _check_empty_proposal(who, builder, v)


def _check_empty_proposal(who: str, builder: TreeBuilder, vocab_size: int) -> None:
    """Depth 0 (a drafter with nothing to propose) gives the root alone, or a SpecframeError that says why."""
    root = torch.tensor([3 % vocab_size, 5 % vocab_size])
    try:
        tree = _build(who, builder, DraftProposal.empty(root), IdentityCorrector(),
                      _ctx(BUDGET, SETTINGS[0], seed=0))
    except SpecframeError:
        return
    if not isinstance(tree, DraftTree) or check_tree(tree) or bool((tree.num_nodes != 1).any()):
        raise fail(who, "an empty proposal (depth 0) must give the root-only tree")


def check_tree_builder_reproducible(built: BuiltCase) -> None:
    """The same inputs and seeds give the same tree, from the same builder and from a second build."""
    who = f"tree_builder '{built.spec.name}'"
    target = built.make_target()
    p = random_proposal(built.case.proposal, target.vocab_size, seed=3)
    corrector = ToyCorrector(target.vocab_size, seed=2)
    builder = built.build(target)
    first = _build(who, builder, p, corrector, _ctx(BUDGET, SETTINGS[0], seed=7))
    if not trees_equal(first, _build(who, builder, p, corrector, _ctx(BUDGET, SETTINGS[0], seed=7))):
        raise fail(who, "building twice from the same proposal and seeds gave different trees")
    rebuilt = built.build(built.make_target())
    if not trees_equal(first, _build(who, rebuilt, p, corrector, _ctx(BUDGET, SETTINGS[0], seed=7))):
        raise fail(who, "a second build from the same config builds different trees")


# ------------------------------------------------------------------------------------------------ pruners
def _token_paths(tree: DraftTree, b: int) -> dict[tuple[int, ...], float]:
    out = {}
    for i in range(int(tree.num_nodes[b])):
        out[tuple(int(tree.tokens[b, j]) for j in tree.path_to(b, i))] = float(tree.score[b, i])
    return out


def pruner_inputs(vocab_size: int = 16) -> DraftTree:
    """Rows of 1, 4, 9 and 15 nodes with strictly decreasing path scores."""
    return DraftTree.stack([random_tree(n, vocab_size, seed=n) for n in (1, 4, 9, 15)])


def check_pruner(built: BuiltCase) -> None:
    """Each output is a valid, ancestor-closed subset of its input; a changed tree fits the budget."""
    who = f"pruner '{built.spec.name}'"
    pruner = guarded(who, lambda: built.build(built.make_target()), inference=False)
    check_factory(built.spec, pruner)
    tree = pruner_inputs()
    for budget in (1, 3, 6, 100):
        what = f"{who} (budget {budget})"
        ctx = _ctx(budget, SETTINGS[1], seed=0)
        out = guarded(what, lambda ctx=ctx: pruner.prune(tree, ctx))
        if not isinstance(out, DraftTree):
            raise fail(what, f"prune returned {type(out).__name__}, expected DraftTree")
        problems = check_tree(out)
        if problems:
            raise fail(what, "invalid tree:\n  " + "\n  ".join(problems))
        if out.batch_size != tree.batch_size:
            raise fail(what, f"returned {out.batch_size} rows for {tree.batch_size}")
        for b in range(tree.batch_size):
            kept, source = _token_paths(out, b), _token_paths(tree, b)
            extra = [path for path in kept if path not in source]
            if extra:
                raise fail(what, f"row {b} holds paths that are not in the input tree: {extra[:3]}")
            if any(abs(kept[path] - source[path]) > 1e-6 for path in kept):
                raise fail(what, f"row {b}: kept nodes must keep their scores")
        if built.capabilities.keeps_child_prefix:
            _check_child_prefix(what, tree, out)
        if not trees_equal(out, tree) and bool((out.num_nodes - 1 > budget).any()):
            raise fail(what, f"pruned to {(out.num_nodes - 1).tolist()} nodes, over the budget {budget} (a pruner "
                             "either returns the tree unchanged or cuts it to the budget)")


def _check_child_prefix(who: str, tree: DraftTree, out: DraftTree) -> None:
    """Every kept node keeps a prefix of its children, in the input's child order."""
    for b in range(tree.batch_size):
        kept = set(_token_paths(out, b))
        for i, kids in enumerate(tree.children()[b]):
            prefix = tuple(int(tree.tokens[b, j]) for j in tree.path_to(b, i))
            if prefix not in kept:
                continue
            flags = [(*prefix, int(tree.tokens[b, k])) in kept for k in kids]
            if flags != sorted(flags, reverse=True):
                raise fail(who, f"declares keeps_child_prefix=True but row {b} keeps children {flags} of node {i} "
                                "(kept ones must come first)")


def check_pruner_reproducible(built: BuiltCase) -> None:
    """Pruning twice, and with a second build, gives the same subtree."""
    who = f"pruner '{built.spec.name}'"
    tree = pruner_inputs()
    ctx = _ctx(3, SETTINGS[1], seed=0)
    pruner = built.build(built.make_target())
    first = guarded(who, lambda: pruner.prune(tree, ctx))
    if not trees_equal(first, guarded(who, lambda: pruner.prune(tree, ctx))):
        raise fail(who, "pruning the same tree twice gave different trees")
    rebuilt = built.build(built.make_target())
    if not trees_equal(first, guarded(who, lambda: rebuilt.prune(tree, ctx))):
        raise fail(who, "a second build from the same config prunes differently")
