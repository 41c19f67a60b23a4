"""Verifier contracts: well-formed results, exact greedy decisions, and losslessness where it is declared.

* every result is a root-first path of the tree plus a bonus token in the vocabulary;
* at temperature 0 a verifier that is lossless (or ``greedy_only``) reproduces the brute-force greedy oracle
  on 300 random trees exactly (path and bonus);
* a verifier declaring ``lossless=True`` (and not ``greedy_only``) passes a G-test of the joint law of the
  first two emitted tokens against the exact toy law, in every regime it declares, at two sampling settings
  (the test of :mod:`specframe.testing.stats`, p >= 1e-6 over 20,000 rounds with fixed seeds).

Verifiers declaring ``chain_only`` are given chains; every other verifier must handle branching trees.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from specframe.errors import GenerationError
from specframe.interfaces import RoundContext, Verifier
from specframe.sampling import gumbel_from_uniforms, probs, sample_without_replacement, uniforms
from specframe.sampling.noise import RoundNoise
from specframe.testing.conformance.cases import BuiltCase
from specframe.testing.conformance.common import check_factory, fail, guarded
from specframe.testing.conformance.inputs import argmax_heavy_logits, greedy_oracle, random_tree_batch
from specframe.testing.stats import GTestResult, exact_first_two_law, first_two_tokens, g_test, joint_counts
from specframe.testing.toy import ToyDrafter, ToyTarget
from specframe.tree import DraftTree
from specframe.types import SamplingParams, VerifyResult

VOCAB = 6
PROMPT = (3, 1)
ROOT = 4
ALPHA = 1e-6
SETTINGS = {"T1": SamplingParams(temperature=1.0), "T0.7-p0.9": SamplingParams(temperature=0.7, top_p=0.9)}


def _ctx(params: SamplingParams, seed: int) -> RoundContext:
    """Independent draws per row (each row is one round of its own), all at one root position."""
    return RoundContext(budget=64, sampling=params, noise=RoundNoise.from_seed(seed, root=len(PROMPT)))


def with_uniform_q(tree: DraftTree, vocab_size: int) -> DraftTree:
    """The tree with ``child_q`` uniform over the vocabulary (every drawn child is possible under it)."""
    q = torch.full((*tree.tokens.shape, vocab_size), 1.0 / vocab_size)
    return DraftTree(tokens=tree.tokens, parent=tree.parent, depth=tree.depth, logq=tree.logq, score=tree.score,
                     valid=tree.valid, child_q=q)


def _verify(who: str, make: Callable[[bool], tuple[DraftTree, torch.Tensor]], verifier: Verifier,
            ctx: RoundContext, chain_only: bool) -> tuple[DraftTree, torch.Tensor, VerifyResult]:
    """Verify a batch of chains (``chain_only`` verifiers) or of branching trees (every other verifier)."""
    tree, logits = make(chain_only)
    try:
        result = guarded(who, lambda: verifier.verify(tree, logits, ctx))
    except GenerationError as exc:
        if chain_only:
            raise
        raise fail(who, f"refused a branching tree ({exc.message}); declare chain_only=True if it verifies "
                        "chains only") from None
    return tree, logits, result


def check_result(who: str, tree: DraftTree, logits: torch.Tensor, result: VerifyResult) -> None:
    """A root-first path of tree nodes (-1 padded), its length, and a bonus token in the vocabulary."""
    b, v = tree.batch_size, logits.shape[-1]
    nodes, count, bonus = result.accepted_nodes, result.num_accepted, result.bonus_token
    if nodes.dim() != 2 or nodes.shape[0] != b or tuple(count.shape) != (b,) or tuple(bonus.shape) != (b,):
        raise fail(who, f"accepted_nodes must be [B={b}, D + 1], num_accepted and bonus_token [B]; got "
                        f"{tuple(nodes.shape)}, {tuple(count.shape)}, {tuple(bonus.shape)}")
    if {nodes.dtype, count.dtype, bonus.dtype} != {torch.long}:
        raise fail(who, "accepted_nodes, num_accepted and bonus_token must be int64")
    nodes, count, bonus = nodes.cpu(), count.cpu(), bonus.cpu()
    if bool(((bonus < 0) | (bonus >= v)).any()):
        raise fail(who, f"bonus tokens must lie in [0, {v})")
    parent, valid = tree.parent.cpu(), tree.valid.cpu()
    for row in range(b):
        n = int(count[row])
        path = nodes[row, : n + 1].tolist()
        if n < 0 or n + 1 > nodes.shape[1] or path[0] != 0 or bool((nodes[row, n + 1 :] != -1).any()):
            raise fail(who, f"row {row}: accepted_nodes {nodes[row].tolist()} with num_accepted {n} is not "
                            "root-first and -1 padded")
        for prev, node in itertools.pairwise(path):
            if not (0 <= node < tree.capacity and bool(valid[row, node]) and int(parent[row, node]) == prev):
                raise fail(who, f"row {row}: accepted_nodes {path} is not a path of the tree")


def check_verifier(built: BuiltCase) -> None:
    """Well-formed results at two temperatures, on branching trees (or chains if branching is refused)."""
    who = f"verifier '{built.spec.name}'"
    verifier = guarded(who, lambda: built.build(built.make_target()), inference=False)
    check_factory(built.spec, verifier)
    for seed, params in enumerate((SamplingParams(temperature=1.0), SamplingParams(temperature=0.0))):
        def make(chains: bool, seed: int = seed) -> tuple[DraftTree, torch.Tensor]:
            tree = with_uniform_q(random_tree_batch(64, VOCAB, seed=seed, chains=chains), VOCAB)
            return tree, argmax_heavy_logits(tree, VOCAB, seed=seed).float()

        tree, logits, result = _verify(who, make, verifier, _ctx(params, seed), built.capabilities.chain_only)
        check_result(f"{who} (T={params.temperature})", tree, logits, result)


def check_verifier_greedy(built: BuiltCase) -> None:
    """At temperature 0 the accepted path and bonus equal the brute-force greedy oracle, row by row."""
    who = f"verifier '{built.spec.name}' at temperature 0"
    verifier = built.build(built.make_target())

    def make(chains: bool) -> tuple[DraftTree, torch.Tensor]:
        tree = with_uniform_q(random_tree_batch(300, 5, seed=11, chains=chains), 5)
        return tree, argmax_heavy_logits(tree, 5, seed=12)

    ctx = _ctx(SamplingParams(temperature=0.0), 0)
    tree, logits, result = _verify(who, make, verifier, ctx, built.capabilities.chain_only)
    check_result(who, tree, logits, result)
    paths, bonus = greedy_oracle(tree, logits)
    for row, (path, token) in enumerate(zip(paths, bonus, strict=True)):
        n = int(result.num_accepted[row])
        got = result.accepted_nodes[row, : n + 1].tolist()
        if got != path or int(result.bonus_token[row]) != token:
            raise fail(who, f"row {row}: accepted {got} + bonus {int(result.bonus_token[row])}, but the greedy "
                            f"oracle accepts {path} + bonus {token}")


# ------------------------------------------------------------------------------------------ losslessness
def _target() -> ToyTarget:
    return ToyTarget.random(VOCAB, seed=0, scale=0.8)


def _replicate(tree: DraftTree, rows: int) -> DraftTree:
    def rep(t: torch.Tensor) -> torch.Tensor:
        return t.expand(rows, *t.shape[1:]).contiguous()

    return DraftTree(tokens=rep(tree.tokens), parent=rep(tree.parent), depth=rep(tree.depth), logq=rep(tree.logq),
                     score=rep(tree.score), valid=rep(tree.valid))


def deterministic_tree(target: ToyTarget, *, chain: bool = False) -> DraftTree:
    """A fixed tree: likely and unlikely children at depth 1, two branches at depth 2, one node at depth 3.

    With ``chain`` only its spine ``root -> a -> a's best child -> its best child`` is kept.
    """
    first = target.logits_after([*PROMPT, ROOT]).argsort(descending=True).tolist()
    a, b, c = first[0], first[1], first[-1]
    under_a = target.logits_after([*PROMPT, ROOT, a]).argsort(descending=True).tolist()
    under_b = target.logits_after([*PROMPT, ROOT, b]).argsort(descending=True).tolist()
    deep = int(target.logits_after([*PROMPT, ROOT, a, under_a[0]]).argmax())
    if chain:
        return DraftTree.from_lists([ROOT, a, under_a[0], deep], [-1, 0, 1, 2])
    tokens = [ROOT, a, b, c, under_a[0], under_a[2], under_b[0], under_b[1], deep]
    return DraftTree.from_lists(tokens, [-1, 0, 0, 0, 1, 1, 2, 2, 4])


def sampled_tree(target: ToyTarget, rows: int, branching: tuple[int, ...], params: SamplingParams,
                 seed: int) -> DraftTree:
    """Per row, children drawn without replacement from a draft law q (recorded in ``child_q``), level by level.

    q after a node is the processed law of a perturbed copy of the target's table (a toy drafter's).
    """
    table = ToyDrafter(target, distance=1.0, seed=1).table  # [V, V, V]
    gen = torch.Generator().manual_seed(seed)
    tokens, parents, prev = [torch.full((rows,), ROOT)], [-1], [torch.full((rows,), PROMPT[-1])]
    alive, depth_of = [torch.ones(rows, dtype=torch.bool)], [0]
    child_laws: dict[int, torch.Tensor] = {}  # node -> [R, V] law its children are drawn from
    frontier = [0]
    for width in branching:
        next_frontier = []
        for node in frontier:
            q = probs(table[prev[node], tokens[node]], params)  # [R, V]
            child_laws[node] = q
            draws, ok = sample_without_replacement(q.log(), width, gumbel_from_uniforms(uniforms(tuple(q.shape), gen)))
            for j in range(width):
                tokens.append(draws[:, j])
                parents.append(node)
                prev.append(tokens[node])
                alive.append(alive[node] & ok[:, j])
                depth_of.append(depth_of[node] + 1)
                next_frontier.append(len(tokens) - 1)
        frontier = next_frontier
    n = len(tokens)
    child_q = torch.full((rows, n, VOCAB), 1.0 / VOCAB)
    for node, q in child_laws.items():
        child_q[:, node] = q.float()
    valid = torch.stack(alive, dim=1)  # [R, N], ancestor-closed by construction
    full = DraftTree(tokens=torch.stack(tokens, dim=1), parent=torch.tensor(parents).expand(rows, n).contiguous(),
                     depth=torch.tensor(depth_of).expand(rows, n).contiguous(), logq=torch.zeros(rows, n),
                     score=torch.zeros(rows, n), valid=torch.ones(rows, n, dtype=torch.bool), child_q=child_q)
    return full.subtree(valid)


def lossless_g_test(verifier: Verifier, regime: str, params: SamplingParams, *, rows: int = 20_000,
                    seed: int = 0, chain_only: bool = False, who: str = "verifier") -> GTestResult:
    """G-test of the first two emitted tokens of ``rows`` independent rounds against the exact target law."""
    target = _target()

    def make(chains: bool) -> tuple[DraftTree, torch.Tensor]:
        if regime == "deterministic":
            tree = _replicate(deterministic_tree(target, chain=chains), rows)
        else:
            tree = sampled_tree(target, rows, (1, 1, 1) if chains else (2, 2), params, seed)
        target.prefill(torch.tensor([PROMPT]).expand(rows, -1))
        return tree, target.forward_tree(tree).logits

    tree, _, result = _verify(who, make, verifier, _ctx(params, seed + 1), chain_only)
    gen = torch.Generator().manual_seed(seed + 2)
    first, second = first_two_tokens(result, tree, target, params, gen)
    law = exact_first_two_law(target, PROMPT[-1], ROOT, params)
    return g_test(joint_counts(first, second, VOCAB), law)


def check_verifier_lossless(built: BuiltCase, rows: int = 20_000) -> None:
    """Every declared regime at every setting passes the G-test (no impossible tokens, p >= 1e-6)."""
    verifier = built.build(built.make_target())
    for regime in sorted(built.capabilities.supported_regimes):
        for name, params in SETTINGS.items():
            who = f"verifier '{built.spec.name}' ({regime} trees, {name})"
            res = lossless_g_test(verifier, regime, params, rows=rows, who=who,
                                  chain_only=built.capabilities.chain_only)
            if res.impossible or res.p_value < ALPHA:
                raise fail(who, f"declares lossless=True but its output law differs from the target's: G = "
                                f"{res.statistic:.1f} on {res.dof} dof, p = {res.p_value:.3g}, "
                                f"{res.impossible} impossible tokens")


def check_verifier_reproducible(built: BuiltCase) -> None:
    """Same tree, logits and seeds: the same decision, from the same verifier and from a second build."""
    who = f"verifier '{built.spec.name}'"
    params = SamplingParams(temperature=1.0)

    def make(chains: bool) -> tuple[DraftTree, torch.Tensor]:
        tree = with_uniform_q(random_tree_batch(32, VOCAB, seed=5, chains=chains), VOCAB)
        return tree, argmax_heavy_logits(tree, VOCAB, seed=5).float()

    def decide(verifier: Verifier) -> VerifyResult:
        return _verify(who, make, verifier, _ctx(params, 9), built.capabilities.chain_only)[2]

    verifier = built.build(built.make_target())
    first = decide(verifier)
    again, rebuilt = decide(verifier), decide(built.build(built.make_target()))
    for label, other in (("verifying twice", again), ("a second build", rebuilt)):
        same = torch.equal(first.accepted_nodes, other.accepted_nodes) and \
            torch.equal(first.bonus_token, other.bonus_token)
        if not same:
            raise fail(who, f"{label} with the same inputs and seeds gave a different decision")
