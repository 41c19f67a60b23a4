"""Drafter contracts: proposals well-formed round after round and never deeper than the declared ``max_depth()``,
capabilities honest, runs reproducible, and (for drafters that declare ``supports_batch``) per-row state: forks
decoding different requests interleaved round by round draft exactly as each request decoded alone.

A drafter is driven through :func:`~specframe.testing.conformance.inputs.greedy_decode` (the pipeline's round
order with a brute-force greedy verifier), so its ``begin`` / ``propose`` / ``commit`` cycle sees accepted
paths that follow its own rollout, leave it at a sibling, or stop at the root.
"""

from __future__ import annotations

import torch

from specframe.registry import DrafterCapabilities
from specframe.testing.conformance.cases import BuiltCase
from specframe.testing.conformance.common import check_factory, fail, guarded
from specframe.testing.conformance.inputs import DecodeTrace, GreedySteps, greedy_decode, random_ids
from specframe.types import DraftProposal

ROUNDS = 5
PROMPT_LEN = 12


def check_proposal(who: str, proposal: DraftProposal, root: torch.Tensor, vocab_size: int,
                   caps: DrafterCapabilities) -> None:
    """Shapes, dtypes, devices and invariants of one proposal (see :class:`specframe.types.DraftProposal`)."""
    if not isinstance(proposal, DraftProposal):
        raise fail(who, f"propose returned {type(proposal).__name__}, expected DraftProposal")
    tokens, logprobs = proposal.tokens, proposal.logprobs
    b = int(root.shape[0])
    if tokens.dim() != 3 or tokens.shape[0] != b:
        raise fail(who, f"tokens must be [B={b}, L, K], got {tuple(tokens.shape)}")
    if logprobs.shape != tokens.shape:
        raise fail(who, f"logprobs {tuple(logprobs.shape)} must have the shape of tokens {tuple(tokens.shape)}")
    if tokens.dtype != torch.long or logprobs.dtype != torch.float32:
        raise fail(who, f"tokens must be int64 and logprobs float32, got {tokens.dtype} and {logprobs.dtype}")
    devices = {tokens.device, logprobs.device, proposal.root.device}
    if len(devices) != 1:
        raise fail(who, f"root, tokens and logprobs must share one device, got {sorted(map(str, devices))}")
    if not torch.equal(proposal.root.cpu().long(), root.cpu().long()):
        raise fail(who, f"proposal.root {proposal.root.tolist()} is not the state's root {root.tolist()}")
    if proposal.depth == 0:
        return
    lp = logprobs.detach().cpu().double()
    if bool(torch.isnan(lp).any()):
        raise fail(who, "logprobs contain NaN (mark unusable candidates with -inf)")
    if bool((lp > 1e-5).any()):
        raise fail(who, f"logprobs must be <= 0 (log-probabilities), max is {float(lp.max()):.4g}")
    if bool((lp[..., :-1] < lp[..., 1:]).any()):
        raise fail(who, "candidates must be sorted by logprob, best first, along K")
    finite = torch.isfinite(lp)
    ids = tokens.cpu()
    if bool(((ids < 0) | (ids >= vocab_size))[finite].any()):
        raise fail(who, f"usable candidate ids must lie in [0, {vocab_size}) (the target's vocabulary)")
    for row in range(b):
        for d in range(proposal.depth):
            usable = ids[row, d][finite[row, d]].tolist()
            if len(set(usable)) != len(usable):
                raise fail(who, f"row {row}, depth {d + 1} repeats a candidate token {usable}; siblings must "
                                "differ, so mark duplicates -inf")
    _check_full_outputs(who, proposal, vocab_size, caps)


def _check_full_outputs(who: str, proposal: DraftProposal, vocab_size: int, caps: DrafterCapabilities) -> None:
    b, depth = proposal.batch_size, proposal.depth
    if caps.emits_logits and proposal.logits is None:
        raise fail(who, "declares emits_logits=True but the proposal has no logits")
    if caps.emits_features and proposal.features is None:
        raise fail(who, "declares emits_features=True but the proposal has no features")
    if proposal.logits is not None:
        logits = proposal.logits
        if tuple(logits.shape) != (b, depth, vocab_size) or not logits.is_floating_point():
            raise fail(who, f"logits must be float [B, L, V] = {(b, depth, vocab_size)}, got "
                            f"{logits.dtype} {tuple(logits.shape)}")
        full = torch.log_softmax(logits.detach().cpu().double(), dim=-1)
        expected = full.gather(2, proposal.tokens.cpu().clamp(0, vocab_size - 1))
        got = proposal.logprobs.detach().cpu().double()
        finite = torch.isfinite(got)
        if not torch.allclose(expected[finite], got[finite], atol=1e-3, rtol=1e-3):
            raise fail(who, "logprobs are not log_softmax(logits) at the candidates (the base law over the "
                            "full vocabulary)")
    if proposal.features is not None:
        features = proposal.features
        if features.dim() != 3 or tuple(features.shape[:2]) != (b, depth):
            raise fail(who, f"features must be [B, L, H] with B, L = {(b, depth)}, got {tuple(features.shape)}")


def _prompt(vocab_size: int, seed: int) -> list[int]:
    return random_ids(PROMPT_LEN, vocab_size, seed)


def check_drafter(built: BuiltCase) -> DecodeTrace:
    """Every proposal of a multi-round greedy decode is well-formed and honest about capabilities."""
    who = f"drafter '{built.spec.name}'"
    target = built.make_target()
    drafter = guarded(who, lambda: built.build(target), inference=False)
    check_factory(built.spec, drafter)
    caps = built.capabilities
    if caps.needs_target_hidden and not tuple(drafter.target_layers):
        raise fail(who, "declares needs_target_hidden=True but its target_layers is empty")
    limit = drafter.max_depth()
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise fail(who, f"max_depth() must be a non-negative int or None, got {limit!r}")
    trace = guarded(who, lambda: greedy_decode(drafter, target, _prompt(target.vocab_size, 0), ROUNDS))
    for r, (root, proposal) in enumerate(zip(trace.roots, trace.proposals, strict=True)):
        check_proposal(who, proposal, root, target.vocab_size, caps)
        if limit is not None and proposal.depth > limit:
            raise fail(who, f"round {r + 1} proposed {proposal.depth} depths, more than its max_depth() of {limit} "
                            "(a chain's budget beyond max_depth() is taken to change nothing)")
    return trace


def _same_trace(who: str, what: str, a: DecodeTrace, b: DecodeTrace) -> None:
    for r, (pa, pb) in enumerate(zip(a.proposals, b.proposals, strict=True)):
        same = pa.tokens.shape == pb.tokens.shape and torch.equal(pa.tokens.cpu(), pb.tokens.cpu()) and \
            torch.allclose(pa.logprobs.cpu(), pb.logprobs.cpu(), atol=1e-5, equal_nan=True)
        if not same:
            raise fail(who, f"{what}: round {r + 1} proposed {pb.tokens[0].tolist()} instead of "
                            f"{pa.tokens[0].tolist()}")


def check_drafter_reproducible(built: BuiltCase) -> None:
    """A second request (``begin`` again, after another prompt) and a second build repeat the first run."""
    who = f"drafter '{built.spec.name}'"
    target = built.make_target()
    drafter = built.build(target)
    first_prompt, other_prompt = _prompt(target.vocab_size, 0), _prompt(target.vocab_size, 1)
    first = guarded(who, lambda: greedy_decode(drafter, target, first_prompt, ROUNDS))
    guarded(who, lambda: greedy_decode(drafter, target, other_prompt, ROUNDS))
    again = guarded(who, lambda: greedy_decode(drafter, target, first_prompt, ROUNDS))
    _same_trace(who, "begin() on a used drafter did not reset its state", first, again)
    fresh_target = built.make_target()
    rebuilt = built.build(fresh_target)
    second = guarded(who, lambda: greedy_decode(rebuilt, fresh_target, first_prompt, ROUNDS))
    _same_trace(who, "a second build from the same config drafted differently", first, second)


def check_drafter_batch_rows(built: BuiltCase) -> None:
    """Forks of a drafter that declares ``supports_batch`` keep per-row state (see :meth:`Drafter.fork`).

    Three forks decode three prompts of different lengths, interleaved round by round (as rows of a batch
    are); each must propose exactly what a fresh drafter proposes for its prompt alone. A drafter that keeps
    request state outside what ``begin`` creates (a shared cache, a history list built in ``__init__``) drafts
    one row from another's state and fails. Drafters that do not declare batch support are refused by the
    batched loop instead, so there is nothing to check.
    """
    who = f"drafter '{built.spec.name}'"
    target = built.make_target()
    drafter = guarded(who, lambda: built.build(target), inference=False)
    if not getattr(drafter, "supports_batch", False):
        return
    vocab = target.vocab_size
    prompts = [random_ids(length, vocab, seed) for length, seed in ((PROMPT_LEN, 0), (5, 1), (PROMPT_LEN + 7, 2))]
    alone = [guarded(who, lambda p=p: greedy_decode(built.build(target), target, p, ROUNDS)) for p in prompts]
    forks = [guarded(who, drafter.fork, inference=False) for _ in prompts]
    if len({id(f) for f in forks}) != len(forks) or any(f is drafter for f in forks):
        raise fail(who, "fork() must return a new drafter object per row")
    runs = [GreedySteps(fork, built.make_target(), p, ROUNDS) for fork, p in zip(forks, prompts, strict=True)]
    iterators = [iter(run) for run in runs]
    for _ in range(ROUNDS + 1):  # begin, then every round, one row after the other
        for it in iterators:
            guarded(who, lambda it=it: next(it))
    for row, (run, single) in enumerate(zip(runs, alone, strict=True)):
        _same_trace(who, f"row {row} of interleaved forks (per-row state leaks between batch rows)", single,
                    run.trace)
