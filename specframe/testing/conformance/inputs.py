"""Inputs and references the contract checks share: random proposals and trees, a greedy oracle, a decode loop.

Everything is drawn from private ``torch.Generator`` objects with fixed seeds, so every check is deterministic.

* :func:`random_proposal` — sorted top-K candidates of random logits, with ties, masked (``-inf``) vocabulary
  entries and features, like :func:`specframe.testing.strategies.proposals` but sized for a given target;
* :func:`random_tree` — a valid tree whose path scores never increase along an edge;
* :func:`greedy_oracle` — the deepest node whose path follows the target's argmax, found by brute force;
* :func:`greedy_decode` — a reference round loop (chain of top candidates plus one sibling, greedy oracle as
  the verifier) that drives a drafter and a target the way the pipeline does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from specframe.interfaces import DecodeState, Drafter, TargetModel
from specframe.testing.conformance.cases import ProposalShape
from specframe.tree import DraftTree
from specframe.types import DraftProposal, SamplingParams, VerifyResult

GREEDY = SamplingParams(temperature=0.0)


def random_ids(length: int, vocab_size: int, seed: int) -> list[int]:
    """``length`` token ids drawn uniformly from a small alphabet (so prompt lookups find repeats)."""
    alphabet = min(vocab_size, 12)
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, alphabet, (length,), generator=gen).tolist()


def random_proposal(shape: ProposalShape, vocab_size: int, *, seed: int, masked: bool = True,
                    with_logits: bool = True, with_features: bool = True) -> DraftProposal:
    """A proposal of ``shape`` over ``vocab_size`` tokens with sorted top-K candidates.

    Logits are rounded to halves (many exact ties); with ``masked`` about a quarter of the vocabulary is
    ``-inf``; row 0's last depth is entirely ``-inf`` (a dead depth) and row 1's first depth keeps only two
    live tokens, so with K > 2 some of its candidates are ``-inf``.
    """
    gen = torch.Generator().manual_seed(seed)
    b, length, v = shape.batch, shape.depth, vocab_size
    k = min(shape.candidates, v)
    logits = (torch.randn(b, length, v, generator=gen) * 2.0 * 2).round() / 2  # [B, L, V]
    if masked:
        logits = logits.masked_fill(torch.rand(b, length, v, generator=gen) < 0.25, -math.inf)
        logits[:, :, 0] = 0.0  # keep every depth alive somewhere ...
        if length >= 2:
            logits[0, -1] = -math.inf  # ... except the last depth of row 0
        if b >= 2 and v > 2:
            logits[1, 0, 2:] = -math.inf
    lse = torch.logsumexp(logits, dim=-1, keepdim=True)
    logprobs = torch.where(torch.isfinite(lse), logits - lse, torch.full_like(logits, -math.inf))
    values, order = torch.sort(logprobs, dim=-1, descending=True, stable=True)
    return DraftProposal(
        root=torch.randint(v, (b,), generator=gen),
        tokens=order[..., :k].contiguous(),  # [B, L, K]
        logprobs=values[..., :k].contiguous(),  # [B, L, K]
        logits=logits if with_logits else None,  # [B, L, V]
        features=torch.randn(b, length, shape.hidden_size, generator=gen) if with_features else None,  # [B, L, H]
    )


def random_tree(num_nodes: int, vocab_size: int, *, seed: int, strict: bool = True) -> DraftTree:
    """One valid row: each node's parent is an earlier node, siblings distinct, ``logq < 0`` (or ``<= 0``)."""
    gen = torch.Generator().manual_seed(seed)
    tokens = [int(torch.randint(vocab_size, (1,), generator=gen))]
    parents, logq = [-1], [0.0]
    for _ in range(1, num_nodes):
        i = len(tokens)
        p = int(torch.randint(i, (1,), generator=gen))
        used = {tokens[j] for j in range(1, i) if parents[j] == p}
        free = [t for t in range(vocab_size) if t not in used]
        if not free:  # that parent already has a child of every token
            continue
        tokens.append(free[int(torch.randint(len(free), (1,), generator=gen))])
        parents.append(p)
        lq = -float(torch.rand((), generator=gen)) * 3.0
        logq.append(lq - 1e-3 if strict else round(lq))
    return DraftTree.from_lists(tokens, parents, logq=logq)


def random_tree_batch(rows: int, vocab_size: int, *, seed: int, max_nodes: int = 12,
                      chains: bool = False) -> DraftTree:
    """``rows`` random trees of 1..``max_nodes`` nodes stacked (padded); ``chains`` makes each a single path."""
    gen = torch.Generator().manual_seed(seed)
    trees = []
    for r in range(rows):
        n = int(torch.randint(1, max_nodes + 1, (1,), generator=gen))
        if chains:
            tokens = torch.randint(vocab_size, (n,), generator=gen).tolist()
            trees.append(DraftTree.from_lists(tokens, [-1, *range(n - 1)], logq=[0.0] + [-0.5] * (n - 1)))
        else:
            trees.append(random_tree(n, vocab_size, seed=seed * 1000 + r))
    return DraftTree.stack(trees)


def argmax_heavy_logits(tree: DraftTree, vocab_size: int, *, seed: int) -> torch.Tensor:  # [B, N, V] float64
    """Random logits where most nodes' argmax is one of their children, so greedy walks go deep."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(tree.batch_size, tree.capacity, vocab_size, generator=gen, dtype=torch.float64)
    for b, row in enumerate(tree.children()):
        for i, kids in enumerate(row):
            if kids and float(torch.rand((), generator=gen)) < 0.7:
                pick = kids[int(torch.randint(len(kids), (1,), generator=gen))]
                logits[b, i, int(tree.tokens[b, pick])] = 5.0
    return logits


def greedy_oracle(tree: DraftTree, logits: torch.Tensor) -> tuple[list[list[int]], list[int]]:
    """Per row: the deepest node path that follows the argmax (checked node by node), and the bonus token."""
    argmax = logits.argmax(dim=-1).tolist()  # [B][N]
    paths, bonus = [], []
    for b in range(tree.batch_size):
        best = [0]
        for node in range(int(tree.num_nodes[b])):
            path = tree.path_to(b, node)
            follows = all(int(tree.tokens[b, path[i + 1]]) == argmax[b][path[i]] for i in range(len(path) - 1))
            if follows and len(path) > len(best):
                best = path
        paths.append(best)
        bonus.append(argmax[b][best[-1]])
    return paths, bonus


def oracle_result(tree: DraftTree, logits: torch.Tensor) -> VerifyResult:
    """The greedy oracle as a :class:`VerifyResult` (root first, -1 padded)."""
    paths, bonus = greedy_oracle(tree, logits)
    width = max(len(p) for p in paths)
    nodes = torch.full((tree.batch_size, width), -1, dtype=torch.long)
    for b, path in enumerate(paths):
        nodes[b, : len(path)] = torch.tensor(path)
    return VerifyResult(accepted_nodes=nodes, num_accepted=torch.tensor([len(p) - 1 for p in paths]),
                        bonus_token=torch.tensor(bonus))


def probe_tree(proposal: DraftProposal) -> DraftTree:
    """Row 0 of a proposal as a tree: the chain of top candidates over the live depths, plus the runner-up
    at depth 1 as a sibling (so an accepted path can leave the drafter's own rollout)."""
    logprobs, tokens = proposal.logprobs[0].cpu(), proposal.tokens[0].cpu()  # [L, K]
    nodes, parents, logq = [int(proposal.root[0])], [-1], [0.0]
    tip = 0
    for d in range(proposal.depth):
        if not math.isfinite(float(logprobs[d, 0])):
            break
        nodes.append(int(tokens[d, 0]))
        parents.append(tip)
        logq.append(float(logprobs[d, 0]))
        tip = len(nodes) - 1
        runner_up = d == 0 and proposal.num_candidates > 1 and math.isfinite(float(logprobs[0, 1]))
        if runner_up and int(tokens[0, 1]) != int(tokens[0, 0]):
            nodes.append(int(tokens[0, 1]))
            parents.append(0)
            logq.append(float(logprobs[0, 1]))
    return DraftTree.from_lists(nodes, parents, logq=logq)


@dataclass
class DecodeTrace:
    """What :func:`greedy_decode` saw: every round's root, proposal and tree, and the tokens generated."""

    roots: list[torch.Tensor]  # [B] the state's root when the round began
    proposals: list[DraftProposal]
    trees: list[DraftTree]
    tokens: list[int]
    accepted: list[int]


def greedy_decode(drafter: Drafter, target: TargetModel, prompt: list[int], rounds: int) -> DecodeTrace:
    """Drive ``drafter`` and ``target`` through ``rounds`` greedy rounds, as the pipeline's loop does.

    The verifier is the brute-force :func:`oracle_result`, so the trace is exact whatever the drafter does;
    what varies with the drafter is which nodes get accepted and hence which commits it must absorb. Like the
    pipeline, the whole request runs under ``torch.inference_mode()``.
    """
    with torch.inference_mode():
        return _greedy_decode(drafter, target, prompt, rounds)


def _greedy_decode(drafter: Drafter, target: TargetModel, prompt: list[int], rounds: int) -> DecodeTrace:
    steps = GreedySteps(drafter, target, prompt, rounds)
    for _ in steps:
        pass
    return steps.trace


class GreedySteps:
    """:func:`greedy_decode` one round per ``next()``, so several requests can be interleaved round by round.

    Iterating yields after ``begin`` and after every round; ``trace`` holds what was seen so far. Callers run
    each step under ``torch.inference_mode()``, as the pipeline does.
    """

    def __init__(self, drafter: Drafter, target: TargetModel, prompt: list[int], rounds: int) -> None:
        self.drafter, self.target, self.prompt, self.rounds = drafter, target, prompt, rounds
        self.trace = DecodeTrace(roots=[], proposals=[], trees=[], tokens=[], accepted=[])

    def __iter__(self) -> Iterator[None]:
        drafter, target, trace = self.drafter, self.target, self.trace
        ids = torch.tensor([self.prompt], dtype=torch.long)  # [1, P]
        target.reset()
        if drafter.target_layers:
            target.set_taps(tuple(drafter.target_layers))
        prefill = target.prefill(ids)
        first = prefill.logits[:, -1].argmax(dim=-1)  # [1]
        state = DecodeState(tokens=torch.cat([ids, first.view(1, 1).cpu()], dim=1), prompt_len=len(self.prompt),
                            sampling=GREEDY)
        drafter.begin(state, prefill)
        trace.tokens.append(int(first[0]))
        yield
        for _ in range(self.rounds):
            before = state.tokens.clone()
            proposal = drafter.propose(state)
            if not torch.equal(before, state.tokens):
                raise AssertionError("drafter.propose modified state.tokens (only the decode loop may write it)")
            tree = probe_tree(proposal) if proposal.depth > 0 else DraftTree.root_only(state.root.cpu())
            if int(tree.tokens[0, 0]) != int(state.root[0]):
                raise AssertionError(f"drafter proposed for root {int(tree.tokens[0, 0])}, but the state's root "
                                     f"is {int(state.root[0])}")
            out = target.forward_tree(tree)
            result = oracle_result(tree, out.logits.cpu())
            target.commit(tree, result.accepted_nodes)
            emitted = result.emitted_tokens(tree.tokens)[0]
            state.tokens = torch.cat([state.tokens, torch.tensor([emitted], dtype=torch.long)], dim=1)
            drafter.commit(state, tree, result, out)
            trace.roots.append(before[:, -1])
            trace.proposals.append(proposal)
            trace.trees.append(tree)
            trace.tokens.extend(emitted)
            trace.accepted.append(int(result.num_accepted[0]))
            yield
