"""Round-by-round comparison of two engines' speculative decoding of one prompt (standard library only).

Both sides record, per verification round, ``start`` (output tokens committed before it: its drafts predict
``output[start:]``), ``accepted`` (drafts accepted) and ``top`` (per depth, the drafter's best candidates and their
log-probabilities). When the two engines decode the same output (the target-numerics check), a round that starts at
the same ``start`` in both had the same context, so with the same drafter it must draft the same tokens and accept
the same number, up to float rounding:

* **log-probabilities**: for every depth of every aligned round, a token in both engines' candidate lists has
  log-probabilities at most ``tol`` apart, and the best candidate is the same unless it is a near tie (both
  engines' top-two gap within ``2 * tol``: rounding of at most ``tol`` can reorder only such a pair);
* **acceptance**: aligned rounds accept the same number of drafts *within the output* (below), unless the first
  depth where the two differ is a near tie in both engines (an *explained* divergence). After one, the engines'
  rounds start at different places until a round starts at the same place again; the rounds in between
  (*unaligned*) are not compared. Unaligned rounds without an explained divergence before them fail.

Within the output: a round that starts ``k`` tokens before the output's end (the token limit, or the EOS token) has
only ``k`` drafts with a token to compare, and the engines count the rest differently: specframe counts the accepted
drafts that made it into the output (``min(accepted, committed)``), vLLM counts every draft its verify forward
accepted, the ones past ``max_tokens`` included (its output is cut afterwards). So both counts are taken as
``min(accepted, end - start)``, ``end`` the output's length. This was one of the per-prompt differences the former
check left untraced: a round at 62 of 64 tokens that accepted 2 drafts in specframe and 3 in vLLM, the third being
the 65th token, which neither engine outputs.

Worked example (``tol`` 1e-3): specframe rounds ``(1, acc 3), (5, acc 0), (6, acc 2)``, vLLM ``(1, 3), (5, 1),
(7, 0), (8, ...)``: rounds at 1 agree; at 5 they differ at depth 1, explained only if both engines' top-two gap at
depth 1 is at most 2e-3 (a near tie), and then specframe's round at 6 and vLLM's at 7 are unaligned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PromptRounds:
    """What the round comparison of one prompt found."""

    aligned: int = 0  # rounds starting at the same place in both engines
    equal: int = 0  # of those, rounds that accepted the same number of drafts
    explained: list[str] = field(default_factory=list)  # divergences at a near tie
    unexplained: list[str] = field(default_factory=list)  # divergences that are not
    unaligned: tuple[int, int] = (0, 0)  # rounds compared with nothing (specframe, vLLM)
    max_logprob_diff: float = 0.0  # largest |log p| difference of a token both engines list
    top1_disagreements: list[str] = field(default_factory=list)  # best candidates differing without a near tie

    @property
    def ok(self) -> bool:
        orphaned = any(self.unaligned) and not self.explained
        return not self.unexplained and not orphaned


def gap(top: dict[str, list[Any]]) -> float:
    """The log-probability gap between a depth's best two candidates (infinite with one candidate)."""
    lp = top["logprobs"]
    return float(lp[0] - lp[1]) if len(lp) > 1 else float("inf")


def logprob_diff(a: dict[str, list[Any]], b: dict[str, list[Any]]) -> float:
    """The largest log-probability difference over the tokens both candidate lists hold (0 if none)."""
    lb = dict(zip(b["ids"], b["logprobs"], strict=True))
    diffs = [abs(float(x) - float(lb[i])) for i, x in zip(a["ids"], a["logprobs"], strict=True) if i in lb]
    return max(diffs, default=0.0)


def within(r: dict[str, Any], end: int | None) -> int:
    """The drafts round ``r`` accepted within an output of ``end`` tokens (all of them when ``end`` is None)."""
    return int(r["accepted"]) if end is None else max(0, min(int(r["accepted"]), end - int(r["start"])))


def per_position(rounds: list[dict[str, Any]], depth: int, end: int | None = None) -> list[int]:
    """vLLM's ``accepted_per_pos``: per depth ``d + 1``, the rounds that accepted more than ``d`` drafts (within
    an output of ``end`` tokens, when given)."""
    return [sum(1 for r in rounds if within(r, end) > d) for d in range(depth)]


def compare_rounds(sf: list[dict[str, Any]], vl: list[dict[str, Any]], *, tol: float,
                   end: int | None = None) -> PromptRounds:
    """Align the two engines' rounds by ``start`` and compare the drafts they accepted within an output of ``end``
    tokens (module docstring)."""
    out = PromptRounds()
    tie = 2.0 * tol
    i = j = 0
    unaligned_sf = unaligned_vl = 0
    while i < len(sf) or j < len(vl):
        if j >= len(vl) or (i < len(sf) and sf[i]["start"] < vl[j]["start"]):
            unaligned_sf += 1
            i += 1
            continue
        if i >= len(sf) or vl[j]["start"] < sf[i]["start"]:
            unaligned_vl += 1
            j += 1
            continue
        a, b = sf[i], vl[j]
        out.aligned += 1
        for d, (ta, tb) in enumerate(zip(a["top"], b["top"], strict=True)):
            out.max_logprob_diff = max(out.max_logprob_diff, logprob_diff(ta, tb))
            if ta["ids"][0] != tb["ids"][0] and not (gap(ta) <= tie and gap(tb) <= tie):
                out.top1_disagreements.append(f"round at {a['start']}, depth {d + 1}: specframe {ta['ids'][0]} "
                                              f"(gap {gap(ta):.3g}), vLLM {tb['ids'][0]} (gap {gap(tb):.3g})")
        acc_a, acc_b = within(a, end), within(b, end)
        if acc_a == acc_b:
            out.equal += 1
        else:
            d = min(acc_a, acc_b)  # the first depth (0-based) where one accepted, one did not
            ga, gb = gap(a["top"][d]), gap(b["top"][d])
            note = (f"round at {a['start']}: specframe accepted {acc_a}, vLLM {acc_b}; top-two "
                    f"gap at depth {d + 1}: specframe {ga:.3g}, vLLM {gb:.3g} (near tie: <= {tie:.3g})")
            (out.explained if ga <= tie and gb <= tie else out.unexplained).append(note)
        i += 1
        j += 1
    out.unaligned = (unaligned_sf, unaligned_vl)
    return out
