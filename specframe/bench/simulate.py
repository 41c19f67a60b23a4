"""Trace-driven simulator: replay recorded rounds under a cost model and predict tokens per second.

Bench records (:mod:`specframe.bench.record`) hold every request's rounds: the draft nodes each verified
(``tree_nodes``), the tokens it committed, its prompt length and the batch size it ran under. :func:`simulate`
prices those rounds with a cost model ``C(B, n)`` (`CostProfile`: one measured on any machine by `specframe profile`,
or :func:`roofline_profile` of a named accelerator) and predicts each method's tokens per second per batch size:

1. a group is one method at one batch size ``B``; its row-rounds are every record's rounds, ``N`` of them, with
   ``n̄`` draft nodes verified per row-round on average and a share ``d`` that verified any;
2. the rows run as the loop's continuous batching runs them (:func:`continuous_schedule`): the requests, in their
   order, take the ``B`` rows as rows free up, and each forward advances every row in flight by one round, so a
   forward with ``R`` rows in flight (``R = B`` until the last requests drain) carries ``R (1 + n̄)`` tokens and
   costs ``C(R, R (1 + n̄))`` plus the round's other stages (``verify + commit`` of the profile, or its ``plain``
   overhead when nothing was drafted and the profile has one) and the loop's own time per round outside every stage
   (``loop``: on the tiny pair as much as the forward itself);
3. a forward in which rows drafted also pays the draft: ``a + b R d`` ms for ``R`` rows in flight (``--draft-ms
   a,b``; by default the records' own measured draft + build + prune time per drafting forward, which holds on the
   machine they were measured on);
4. every request's prefill costs ``C(1, prompt tokens)``;
5. predicted tokens per second = the group's new tokens over the sum of (2) to (4); the measured figure beside it is
   the new tokens over the requests' wall times divided by ``B`` (rows overlap in a batch).

The roofline of an accelerator prices a forward over ``n`` tokens of a target of ``P`` parameters stored in ``s``
bytes each as ``max(2 P n / FLOPs, P s / bandwidth)`` (compute against reading the weights once; the KV cache and
kernel launches are not modelled), so it is a model, to be labelled as one. Validation: on the machine the records
were measured on, with its own measured profile, the prediction should be close to the measurement
(`tests/bench/test_simulate.py` checks it on the tiny pair within a tolerance a busy machine allows).

Example: 10 row-rounds at ``B = 2`` verifying 3 nodes each (``d = 1``), ``C(2, 8) = 20`` ms, no overheads, a draft
of ``4 + 1 B`` ms, prompts of 5 tokens at ``C(1, 5) = 6`` ms, 40 new tokens from two requests of 5 rounds each: 5
forwards of ``20 + 6`` ms plus 12 ms of prefill = 142 ms: 282 tokens per second. Had the requests run 8 and 2
rounds, the schedule would be 2 forwards with both rows and 6 with one, each at ``C(1, 4)`` and a draft of ``4 + 1``.

**Replay at another budget** (``budget=k``, `specframe simulate --budget k`): every round is re-priced as if the
verifier had seen only the first ``k`` draft nodes of the recorded tree in its ranking by path score
(:mod:`specframe.tree.score_order`; path scores never increase along an edge, so every prefix of the ranking is
ancestor-closed, and it is the tree a top-``k`` pruner by path score would have kept). The records carry, per round,
the score order of each accepted node (``path_order``). Per request with recorded rounds ``r = 1..R``:

a. the round's accepted draft tokens become ``a'_r = min(a_r, the number of leading path nodes whose order is
   below k)``: under greedy verification the accepted path in the kept tree is the recorded path's prefix inside
   it (the target's argmax at each kept node is the same), plus the bonus token;
b. its verified draft nodes become ``n'_r = min(k, n_r)``: a budget above a recorded tree verifies that tree, as the
   replay cannot verify nodes that were never drafted (so ``k`` above the recorded budget reproduces the record);
c. the request still emits its recorded tokens, at ``a'_r + 1`` a round instead of ``a_r + 1``, so it needs
   ``R' = R · Σ (a_r + 1) / Σ (a'_r + 1)`` rounds, and every recorded round stands for ``R' / R`` replayed ones
   (the node counts and the draft time scale the same way; ``τ' = Σ committed / R'``).

The approximation in (c): after a shorter acceptance the following tokens are the same target tokens, but the next
round's tree would have been drafted from a different position, and that tree was never recorded. The replay
assumes it would accept, at budget ``k``, as the recorded rounds did on average, i.e. it reuses the request's
per-round acceptance statistics at ``k`` for the rounds it adds. It holds for greedy verification only (a sampled
verifier's acceptance in a smaller tree is not a prefix of the recorded one), so records with a temperature above
0, and records written before ``path_order`` existed, replay only at their own budget (an error names them).
At ``k`` at or above every recorded tree the replay is the plain simulation above. Where the pipeline ranked its
nodes otherwise, the replayed tree is still the top ``k`` by path score of the tree that was verified: for
``deferred_topb`` with a depth bonus ``beta < 0`` the pruner's own top ``k`` can differ in a few nodes, and for a
``budget: auto`` record (nodes kept by calibrated ``p``) the replay answers "this run's trees, cut to ``k`` by path
score", not what a fixed-budget run would have drafted. A tree with two siblings of the same token (which no
built-in builder makes) could accept through the dropped one; the replay then counts the path as cut.

Example at ``k = 2``: a request of 3 rounds that accepted ``a = 3, 1, 0`` draft tokens from trees of 4 nodes, with
path orders ``[0, 2, 3]``, ``[0]`` and ``[]``: ``a' = 1, 1, 0`` (the first path leaves the kept tree at order 2),
so the 7 tokens the rounds emitted take ``R' = 3 · 7 / 5 = 4.2`` rounds of 2 nodes each, τ = 7 / 4.2 = 1.67
instead of 7 / 3 = 2.33.
"""

from __future__ import annotations

from collections import deque
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
    """One method at one batch size and budget: what its records measured and what the cost model predicts."""

    method: str
    batch_size: int
    requests: int
    row_rounds: float  # replayed row-rounds (the recorded count at the recorded budget)
    nodes_per_round: float
    measured_tokens_per_s: float
    predicted_tokens_per_s: float
    budget: int | None = None  # the replayed budget; None: as recorded (a fixed budget, or the controller's choices)
    tau: float = 0.0  # committed tokens per replayed round (the bonus counted, the prefill's token not)

    @property
    def ratio(self) -> float:
        """Predicted over measured."""
        return self.predicted_tokens_per_s / self.measured_tokens_per_s if self.measured_tokens_per_s else 0.0


@dataclass(frozen=True)
class Replayed:
    """One request's rounds replayed at a budget (:func:`replay_request`): all counts over its replayed rounds."""

    rounds: float  # R'
    nodes: float  # verified draft nodes, summed
    drafted: float  # rounds that verified any draft node
    scale: float  # R' / R: how many replayed rounds each recorded round stands for


def roofline_draft_ms(accelerator: str, params: float, tokens_per_row: int,
                      bytes_per_param: float = 2.0) -> tuple[float, float]:
    """A drafter's cost on ``accelerator``'s roofline as :func:`simulate`'s ``draft_ms`` ``(fixed, per_row)``: reading
    its ``params`` weights once per forward, plus each drafting row's ``2 params tokens_per_row`` FLOPs (the sum
    of the two roofline terms, where :func:`roofline_profile` takes their maximum: at most 2x above it)."""
    if accelerator not in ACCELERATORS:
        raise ValueError(f"unknown accelerator {accelerator!r}; known: {', '.join(ACCELERATORS)}")
    flops, bandwidth = ACCELERATORS[accelerator]
    return 1e3 * params * bytes_per_param / bandwidth, 1e3 * 2.0 * params * tokens_per_row / flops


def mean_tau_records(method: str, tau: float, nodes: int, batch: int, *, rounds: int = 100,
                     prompt_tokens: int = 128) -> list[dict[str, Any]]:
    """Stand-in records for a pipeline known only by its mean acceptance length ``tau`` (committed tokens per round,
    the bonus included) at ``nodes`` draft nodes a round, e.g. a paper's reported τ: ``batch`` requests of
    ``rounds`` rounds each, every round verifying ``nodes`` nodes, the committed tokens spread so their mean is
    ``tau`` to ``1 / rounds``. At the recorded budget :func:`simulate` reads only such aggregates (rounds, nodes,
    tokens, prompt lengths), so these price a reported τ as any trace with that mean would; they carry no
    ``path_order`` and cannot be replayed at another budget.

    Example: ``tau = 2.5, rounds = 4`` commits 3, 3, 2, 2 tokens."""
    if not 1.0 <= tau <= nodes + 1:
        raise ValueError(f"a mean acceptance length of {tau} is impossible with {nodes} draft nodes a round")
    committed = round(tau * rounds)
    base, extra = divmod(committed, rounds)
    lengths = [base + (r < extra) for r in range(rounds)]
    return [{"method": method, "batch_size": batch, "question_id": i, "tree_nodes": [nodes] * rounds,
             "accepted": [n - 1 for n in lengths], "tokens": list(range(committed + 1)), "prompt_tokens": prompt_tokens,
             "total_ns": 0, "stage_ns": {}, "choices": [{"accept_lengths": lengths}]} for i in range(batch)]


def kept_prefix(order: Sequence[int], budget: int) -> int:
    """How many leading nodes of an accepted path with score orders ``order`` lie in the first ``budget`` nodes."""
    n = 0
    for o in order:
        if o >= budget:
            break
        n += 1
    return n


def replay_request(record: Mapping[str, Any], budget: int | None) -> Replayed:
    """``record``'s rounds replayed at ``budget`` (None: as recorded); see the module docstring, steps (a) to (c).

    Raises:
        ValueError: a budget was given and the record lacks ``path_order`` or was sampled (temperature above 0).
    """
    nodes = [int(n) for n in record["tree_nodes"]]
    accepted = [int(a) for a in record.get("accepted", [0] * len(nodes))]
    if budget is None:
        return Replayed(len(accepted), sum(nodes), sum(n > 0 for n in nodes), 1.0)
    where = f"{record.get('method')!r} (question {record.get('question_id')!r})"
    if float(record.get("temperature", 0.0) or 0.0) > 0:
        raise ValueError(f"the records of {where} were sampled (temperature {record.get('temperature')}); a replay "
                         "at another budget holds for greedy records only; leave out --budget to simulate them at "
                         "their own budget")
    orders = record.get("path_order")
    if orders is None:
        raise ValueError(f"the records of {where} have no path_order (written before it existed); re-run "
                         "`specframe bench` to replay them at another budget, or leave out --budget to simulate "
                         "them at their own budget")
    kept = [min(a, kept_prefix(o, budget)) for a, o in zip(accepted, orders, strict=True)]  # (a)
    replay_nodes = [min(budget, n) for n in nodes]  # (b)
    recorded_tokens = sum(a + 1 for a in accepted)
    scale = recorded_tokens / sum(a + 1 for a in kept) if accepted else 1.0  # (c)
    return Replayed(len(accepted) * scale, sum(replay_nodes) * scale, sum(n > 0 for n in replay_nodes) * scale,
                    scale)


def continuous_schedule(rounds: Sequence[float], batch: int) -> dict[int, float]:
    """How many forwards run with each number of rows in flight when requests of ``rounds[i]`` rounds each (in
    admission order; fractional for a replay at another budget) share ``batch`` rows: a waiting request takes a row
    as soon as one frees, and every forward advances each row in flight by one round.

    Example: rounds ``[4, 1, 2]`` on 2 rows: both rows for 1 forward (the second request ends), the third request
    joins, both rows for 2 more, then the first request alone for 1: ``{2: 3, 1: 1}``."""
    waiting = deque(r for r in rounds if r > 0)
    running: list[float] = []
    steps: dict[int, float] = {}
    while waiting or running:
        while waiting and len(running) < batch:
            running.append(waiting.popleft())
        step = min(running)  # forwards until the next row frees
        steps[len(running)] = steps.get(len(running), 0.0) + step
        running = [r - step for r in running if r - step > 1e-9]
    return steps


def committed_tokens(record: Mapping[str, Any]) -> int:
    """Tokens the request's rounds committed (Spec-Bench's ``accept_lengths``; without them, every token but the
    prefill's)."""
    choices = record.get("choices")
    if choices:
        return sum(int(c) for c in choices[0]["accept_lengths"])
    return max(len(record["tokens"]) - 1, 0)


def simulate(records: Sequence[Mapping[str, Any]], profile: CostProfile,
             draft_ms: tuple[float, float] | None = None, budget: int | None = None) -> list[Prediction]:
    """Predictions per (method, batch size) of ``records`` under ``profile``, replayed at ``budget`` (None: as
    recorded); see the module docstring. ``draft_ms``: ``(a, b)`` of the draft cost (None: the records' own
    measured draft time, scaled by the replay's drafted rounds).

    Raises:
        ValueError: ``budget`` is below 1, or a record cannot be replayed at it (:func:`replay_request`).
    """
    if budget is not None and budget < 1:
        raise ValueError(f"a replayed budget must be at least 1 draft node, got {budget}")
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in records:
        if r.get("reference"):
            continue  # transformers' generate() has no rounds to replay
        groups.setdefault((str(r["method"]), int(r.get("batch_size", 1) or 1)), []).append(r)
    out = []
    for (method, batch), group in sorted(groups.items()):
        replays = [replay_request(r, budget) for r in group]
        rounds = sum(p.rounds for p in replays)
        if rounds == 0:
            continue
        tokens = sum(len(r["tokens"]) for r in group)
        committed = sum(committed_tokens(r) for r in group)
        mean_nodes = sum(p.nodes for p in replays) / rounds
        drafted = sum(p.drafted for p in replays) / rounds
        steps = continuous_schedule([p.rounds for p in replays], batch)  # rows in flight -> forwards
        stages = profile.overhead("verify") + profile.overhead("commit")  # a plain round verifies and commits too
        other = stages if drafted or "plain" not in profile.overhead_ms else profile.overhead("plain")
        forward_total = sum(n * (profile.cost(a, a * (1.0 + mean_nodes)) + other + profile.overhead("loop"))
                            for a, n in steps.items())
        if draft_ms is not None:
            draft_total = sum(n * (draft_ms[0] + draft_ms[1] * a * drafted) for a, n in steps.items()) \
                if drafted else 0.0
        else:  # the records' measured draft time per drafting forward, for as many as the schedule runs
            # A row's record holds its rounds' whole draft times (a round's stages are shared by its rows), so the
            # mean over recorded drafted row-rounds is the mean draft time of a forward, weighted by rows in flight.
            measured = sum(r["stage_ns"].get(s, 0) for r in group for s in ("draft", "build", "prune")) / 1e6
            recorded = sum(int(n) > 0 for r in group for n in r["tree_nodes"])
            per_forward = measured / recorded if recorded else 0.0
            draft_total = per_forward * drafted * sum(steps.values())
        prefill = sum(profile.cost(1, max(int(r.get("prompt_tokens", 1)), 1)) for r in group)
        predicted_ms = forward_total + draft_total + prefill
        measured_s = sum(int(r["total_ns"]) for r in group) / 1e9 / batch
        out.append(Prediction(method, batch, len(group), round(rounds, 3), round(mean_nodes, 3),
                              tokens / measured_s if measured_s > 0 else 0.0,
                              tokens / (predicted_ms / 1e3) if predicted_ms > 0 else 0.0,
                              budget, round(committed / rounds, 4)))
    return out
