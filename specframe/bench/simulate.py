"""Trace-driven simulator: replay recorded rounds under a cost model and predict tokens per second.

Bench records (:mod:`specframe.bench.record`) hold every request's rounds: the draft nodes each verified
(``tree_nodes``), the tokens it committed, its prompt length and the batch size it ran under. :func:`simulate`
prices those rounds with a cost model ``C(B, n)`` (`CostProfile`: one measured on any machine by `specframe profile`,
or :func:`roofline_profile` of a named accelerator) and predicts each method's tokens per second per batch size:

1. a group is one method at one batch size ``B``; its row-rounds are every record's rounds, ``N`` of them, with
   ``n̄`` draft nodes verified per row-round on average and a share ``d`` that verified any;
2. the rows run ``B`` at a time, so the group runs ``N / B`` forwards (the tail in which fewer rows are left is
   not modelled), each over ``B (1 + n̄)`` tokens: ``C(B, B (1 + n̄))`` plus the round's other stages
   (``verify + commit`` of the profile, or its ``plain`` overhead when nothing was drafted and the profile has
   one) and the loop's
   own time per round outside every stage (``loop``: on the tiny pair as much as the forward itself);
3. a forward in which rows drafted also pays the draft: ``a + b B d`` ms (``--draft-ms a,b``; by default the
   records' own measured draft + build + prune time per forward, which holds on the machine they were measured on);
4. every request's prefill costs ``C(1, prompt tokens)``;
5. predicted tokens per second = the group's new tokens over the sum of (2) to (4); the measured figure beside it is
   the new tokens over the requests' wall times divided by ``B`` (rows overlap in a batch).

The roofline of an accelerator prices a forward over ``n`` tokens of a target of ``P`` parameters stored in ``s``
bytes each as ``max(2 P n / FLOPs, P s / bandwidth)`` (compute against reading the weights once; the KV cache and
kernel launches are not modelled), so it is a model, to be labelled as one. Validation: on the machine the records
were measured on, with its own measured profile, the prediction should be close to the measurement
(`tests/bench/test_simulate.py` checks it on the tiny pair within a tolerance a busy machine allows).

Example: 10 row-rounds at ``B = 2`` verifying 3 nodes each (``d = 1``), ``C(2, 8) = 20`` ms, no overheads, a draft
of ``4 + 1 B`` ms, prompts of 5 tokens at ``C(1, 5) = 6`` ms, 40 new tokens from two requests: 5 forwards of
``20 + 6`` ms plus 12 ms of prefill = 142 ms: 282 tokens per second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specframe.cost.profile import CostProfile

#: Named accelerators: dense bf16 peak FLOP/s and memory bandwidth in bytes per second (vendor data sheets).
ACCELERATORS: dict[str, tuple[float, float]] = {
    "h100-sxm": (989e12, 3.35e12),
    "h200": (989e12, 4.8e12),
    "a100-80gb": (312e12, 2.04e12),
    "l4": (121e12, 0.3e12),
}
#: Token counts per row the roofline profile is tabulated at (root included).
ROOFLINE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128)
ROOFLINE_BATCHES = (1, 2, 4, 8, 16, 32, 64)


def roofline_profile(accelerator: str, params: float, bytes_per_param: float = 2.0) -> CostProfile:
    """The roofline cost model of a target of ``params`` parameters on ``accelerator`` (a key of
    :data:`ACCELERATORS`): ``C(B, n) = max(2 params n / FLOPs, params bytes / bandwidth)`` in ms."""
    if accelerator not in ACCELERATORS:
        raise ValueError(f"unknown accelerator {accelerator!r}; known: {', '.join(ACCELERATORS)}")
    if not params > 0 or not bytes_per_param > 0:
        raise ValueError("the target's parameter count and bytes per parameter must be positive")
    flops, bandwidth = ACCELERATORS[accelerator]

    def ms(n: int) -> float:
        return 1e3 * max(2.0 * params * n / flops, params * bytes_per_param / bandwidth)

    batch_ms = {b: {b * t: ms(b * t) for t in ROOFLINE_TOKENS} for b in ROOFLINE_BATCHES if b > 1}
    return CostProfile(key={"roofline": accelerator, "params": params, "bytes_per_param": bytes_per_param},
                       verify_ms={t: ms(t) for t in ROOFLINE_TOKENS}, batch_ms=batch_ms)


@dataclass(frozen=True)
class Prediction:
    """One method at one batch size: what its records measured and what the cost model predicts."""

    method: str
    batch_size: int
    requests: int
    row_rounds: int
    nodes_per_round: float
    measured_tokens_per_s: float
    predicted_tokens_per_s: float

    @property
    def ratio(self) -> float:
        """Predicted over measured."""
        return self.predicted_tokens_per_s / self.measured_tokens_per_s if self.measured_tokens_per_s else 0.0


def simulate(records: Sequence[Mapping[str, Any]], profile: CostProfile,
             draft_ms: tuple[float, float] | None = None) -> list[Prediction]:
    """Predictions per (method, batch size) of ``records`` under ``profile``; see the module docstring.
    ``draft_ms``: ``(a, b)`` of the draft cost (None: the records' own measured draft time)."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in records:
        if r.get("reference"):
            continue  # transformers' generate() has no rounds to replay
        groups.setdefault((str(r["method"]), int(r.get("batch_size", 1) or 1)), []).append(r)
    out = []
    for (method, batch), group in sorted(groups.items()):
        nodes = [int(n) for r in group for n in r["tree_nodes"]]
        rounds = len(nodes)
        if rounds == 0:
            continue
        tokens = sum(len(r["tokens"]) for r in group)
        mean_nodes = sum(nodes) / rounds
        drafted = sum(n > 0 for n in nodes) / rounds
        forwards = rounds / batch
        stages = profile.overhead("verify") + profile.overhead("commit")  # a plain round verifies and commits too
        other = stages if drafted or "plain" not in profile.overhead_ms else profile.overhead("plain")
        forward_ms = profile.cost(batch, batch * (1.0 + mean_nodes)) + other + profile.overhead("loop")
        if draft_ms is not None:
            draft_total = forwards * (draft_ms[0] + draft_ms[1] * batch * drafted) if drafted else 0.0
        else:
            measured = sum(r["stage_ns"].get(s, 0) for r in group for s in ("draft", "build", "prune")) / 1e6
            draft_total = measured / batch
        prefill = sum(profile.cost(1, max(int(r.get("prompt_tokens", 1)), 1)) for r in group)
        predicted_ms = forwards * forward_ms + draft_total + prefill
        measured_s = sum(int(r["total_ns"]) for r in group) / 1e9 / batch
        out.append(Prediction(method, batch, len(group), rounds, round(mean_nodes, 3),
                              tokens / measured_s if measured_s > 0 else 0.0,
                              tokens / (predicted_ms / 1e3) if predicted_ms > 0 else 0.0))
    return out
