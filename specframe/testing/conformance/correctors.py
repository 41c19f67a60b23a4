"""Corrector contracts: shapes of states and scores, candidate laws that stay within the candidates, masked
candidates that stay masked, and honest ``path_dependent`` / ``stateful`` / ``needs_*`` declarations.

The probe scores the root's children (depth 1), advances two kept children, and scores their children
(depth 2) in one batched call, as a depth-wise builder does.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specframe.interfaces import Corrector
from specframe.testing.conformance.cases import BuiltCase
from specframe.testing.conformance.common import check_factory, fail, guarded
from specframe.testing.conformance.inputs import random_proposal
from specframe.types import DraftProposal


def _probe(who: str, corrector: Corrector, p: DraftProposal) -> tuple[torch.Tensor, torch.Tensor]:
    """Depth-1 scores ``[B, 1, K]`` of the root and depth-2 scores ``[B, 2, K]`` of two kept children."""
    b, k, s = p.batch_size, p.num_candidates, corrector.state_size
    state = corrector.init_state(p)
    if tuple(state.shape) != (b, 1, s):
        raise fail(who, f"init_state must be [B, 1, S] = {(b, 1, s)}, got {tuple(state.shape)}")
    first = corrector.child_logprobs(p, 1, p.root.view(b, 1).long(), state)
    kept = p.tokens[:, 0, :2].contiguous()  # [B, 2]
    children = corrector.advance(p, 1, state.expand(b, 2, s).contiguous(), kept)
    if tuple(children.shape) != (b, 2, s):
        raise fail(who, f"advance must return [B, M, S] = {(b, 2, s)}, got {tuple(children.shape)}")
    second = corrector.child_logprobs(p, 2, kept, children)
    for depth, scores, m in ((1, first, 1), (2, second, 2)):
        _check_scores(who, depth, scores, p, m, k)
    return first, second


def _check_scores(who: str, depth: int, scores: torch.Tensor, p: DraftProposal, m: int, k: int) -> None:
    b = p.batch_size
    if tuple(scores.shape) != (b, m, k) or not scores.is_floating_point():
        raise fail(who, f"child_logprobs at depth {depth} must be float [B, M, K] = {(b, m, k)}, got "
                        f"{scores.dtype} {tuple(scores.shape)}")
    if scores.device != p.tokens.device:
        raise fail(who, f"scores are on {scores.device}, the proposal on {p.tokens.device}")
    s = scores.detach().cpu().double()
    if bool(torch.isnan(s).any()):
        raise fail(who, f"child_logprobs at depth {depth} contain NaN")
    alive = torch.isfinite(s).any(dim=-1)
    total = torch.logsumexp(s, dim=-1)[alive]
    if bool((total > 1e-3).any()):
        raise fail(who, f"child_logprobs at depth {depth} are not log-probabilities: the K candidates' "
                        f"probabilities sum to {float(total.exp().max()):.4f} > 1")
    masked = ~torch.isfinite(p.logprobs[:, depth - 1].cpu())[:, None, :].expand(b, m, k)
    if bool(torch.isfinite(s[masked]).any()):
        raise fail(who, f"a candidate the drafter marked -inf (unusable) got a finite score at depth {depth}")


def _same(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> bool:
    return all(torch.allclose(x.cpu(), y.cpu(), atol=1e-5, equal_nan=True) for x, y in zip(a, b, strict=True))


def _snapshot(p: DraftProposal) -> list[torch.Tensor]:
    return [t.clone() for t in (p.root, p.tokens, p.logprobs, p.logits, p.features) if t is not None]


def check_corrector(built: BuiltCase) -> None:
    """Scores and states are well-formed; capability flags match what the scores depend on."""
    who = f"corrector '{built.spec.name}'"
    caps = built.capabilities
    target = built.make_target()
    corrector = guarded(who, lambda: built.build(target), inference=False)
    check_factory(built.spec, corrector)
    if not caps.stateful and corrector.state_size != 0:
        raise fail(who, f"declares stateful=False but has state_size {corrector.state_size}")
    for seed in (0, 1):
        p = random_proposal(built.case.proposal, target.vocab_size, seed=seed)
        before = _snapshot(p)
        first, second = guarded(who, lambda p=p: _probe(who, corrector, p))
        if any(not torch.equal(x, y) for x, y in zip(before, _snapshot(p), strict=True)):
            raise fail(who, "child_logprobs / advance modified the proposal")
        if not caps.path_dependent and not torch.allclose(second[:, 0], second[:, 1], equal_nan=True):
            raise fail(who, "declares path_dependent=False but scores the children of two different depth-1 "
                            "nodes differently; declare path_dependent=True so marginal builders refuse it")
        optional = (("needs_logits", replace(p, logits=None)), ("needs_features", replace(p, features=None)))
        for flag, stripped in optional:
            if getattr(caps, flag):
                continue
            try:
                without = guarded(who, lambda q=stripped: _probe(who, corrector, q))
            except (AttributeError, TypeError, RuntimeError) as exc:
                raise fail(who, f"declares {flag}=False but fails without them: {type(exc).__name__}: {exc}") from None
            if not _same((first, second), without):
                raise fail(who, f"declares {flag}=False but its scores change when they are absent")


def check_corrector_reproducible(built: BuiltCase) -> None:
    """The same call twice and a second build give the same scores."""
    who = f"corrector '{built.spec.name}'"
    target = built.make_target()
    p = random_proposal(built.case.proposal, target.vocab_size, seed=2)
    corrector = built.build(target)
    once = guarded(who, lambda: _probe(who, corrector, p))
    if not _same(once, guarded(who, lambda: _probe(who, corrector, p))):
        raise fail(who, "scoring the same frontier twice gave different results")
    rebuilt = built.build(built.make_target())
    if not _same(once, guarded(who, lambda: _probe(who, rebuilt, p))):
        raise fail(who, "a second build from the same config scores differently")
