"""Batched decoding: many requests in one loop, with ragged per-row trees and caches (continuous batching).

One round over the ``B`` active rows::

    for each row:  proposal -> tree -> pruned tree        # the row's own drafter fork, RoundContext and rng
    (budget: auto) each row's node count, chosen jointly   # specframe.cost.batch_budget
    out = rt.forward_tree(DraftTree.stack(trees))          # ONE target forward, rows padded to the widest tree
    for each row:  verdict from its logits slice           # the row's own random streams
    rt.commit(stacked, accepted)                           # per-row commit of a different number of nodes
    for each row:  tokens, drafter commit, stop checks     # rows that end leave; waiting requests join

Per-request exactness: every step that consumes randomness or per-request state runs per row with that
request's own `RngStreams` (seeded exactly as a single request), its own drafter fork and its own
`DecodeState`, so a request's output law is its single-request law whatever else is in the batch, and with a
fixed seed its sampled tokens do not depend on its batch-mates. Only the target forward is shared.

A request whose prompt does not fit the target's context (or holds ids outside its vocabulary) is refused on
its own (`RefusedRequest`, naming the request); the others decode. A drafter that does not declare
``supports_batch`` is refused up front.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specframe.cost.batch_budget import choose_batch
from specframe.device_sync import StageClock
from specframe.errors import ConfigError, GenerationError
from specframe.interfaces import DecodeState, Drafter, RoundContext
from specframe.metrics.records import GenerationResult, RoundRecord
from specframe.sampling import sample
from specframe.tree import DraftTree
from specframe.types import RngStreams, TargetOutput, VerifyResult

if TYPE_CHECKING:
    from specframe.batch_target import RaggedBatchTarget
    from specframe.pipeline import Pipeline, Prompt, RequestDecode

#: Called with (request index, new text) while decoding.
BatchStreamFn = Callable[[int, str], None]


@dataclass(frozen=True)
class Request:
    """One request of a batch: a prompt and its own limits and seed (None: the pipeline's defaults)."""

    prompt: Prompt
    max_new_tokens: int | None = None
    seed: int | None = None
    stop: Sequence[str] | None = None


@dataclass(frozen=True)
class RefusedRequest:
    """The outcome of a request that was refused before decoding (the others in its batch still ran)."""

    index: int
    error: GenerationError

    def __str__(self) -> str:
        return f"request {self.index}: {self.error.message}"


def check_batch_support(pipe: Pipeline, batch_size: int) -> None:
    """Refuse a batch size above 1 with a drafter or target that cannot keep per-row state."""
    if batch_size < 1:
        raise ConfigError(f"the batch size must be at least 1, got {batch_size}", hint="use --batch-size 1 or more")
    if batch_size == 1:
        return
    drafter = pipe.stages.drafter
    name = pipe.config.drafter.type  # type: ignore[attr-defined]
    if not getattr(drafter, "supports_batch", False):
        raise ConfigError(f"drafter '{name}' ({type(drafter).__name__}) does not declare batch support",
                          hint="decode with --batch-size 1, or set `supports_batch = True` on the drafter once "
                               "its per-request state lives only in what begin() creates (see Drafter.fork)")


class _Row:
    """One request in flight: its bookkeeping, random streams, drafter fork and measurements."""

    def __init__(self, index: int, dec: RequestDecode, drafter: Drafter) -> None:
        self.index = index
        self.dec = dec
        self.drafter = drafter
        self.rng = RngStreams.from_seed(dec.seed, device=dec.pipe.target.device)
        self.state: DecodeState | None = None
        self.ctx: RoundContext | None = None
        self.rounds: list[RoundRecord] = []
        self.t_start = 0
        self.prefill_ns = 0
        self.text: str | None = None
        self.reason: str | None = None

    def check_stop(self) -> None:
        """Stop reason after the newest tokens; a stop string trims the tokens and the last round's counts."""
        self.text, removed = self.dec.check_text()
        if removed and self.rounds:  # the round is credited only with the tokens before the stop string
            last = self.rounds[-1]
            kept = last.committed - removed
            last.committed, last.accepted = kept, min(last.accepted, kept)
        self.reason = "stop_string" if removed is not None else self.dec.stop_reason()


class BatchDecode:
    """Decodes ``requests`` with at most ``batch_size`` rows in flight (see the module docstring)."""

    def __init__(self, pipe: Pipeline, requests: Sequence[Request], batch_size: int, *,
                 stream: BatchStreamFn | None = None, chat: bool | None = None) -> None:
        from specframe.pipeline import RequestDecode

        check_batch_support(pipe, batch_size)
        self.pipe = pipe
        self.batch_size = batch_size
        self.outcomes: list[GenerationResult | RefusedRequest | None] = [None] * len(requests)
        self.waiting: deque[_Row] = deque()
        self.started = False  # a first request has joined
        # Stage times (and `budget: auto`'s cost model) need the devices idle before each clock reading.
        self.clock = StageClock(pipe.devices(), sync=pipe.config.metrics.stage_timing or pipe.config.auto)
        for i, req in enumerate(requests):
            try:
                ids, max_new, stops = pipe.request_inputs(req.prompt, req.max_new_tokens, req.stop, chat=chat)
                low, high = int(ids.min()), int(ids.max())
                if low < 0 or high >= pipe.target.vocab_size:
                    raise GenerationError(f"prompt token ids must lie in [0, {pipe.target.vocab_size}), found "
                                          f"{low}..{high}", hint="encode the prompt with the target's tokenizer")
            except GenerationError as exc:
                self.outcomes[i] = RefusedRequest(i, exc)
                continue
            row_stream = None if stream is None else (lambda text, i=i: stream(i, text))
            seed = pipe.config.seed if req.seed is None else req.seed
            dec = RequestDecode(pipe, ids, max_new, stops, row_stream, seed)
            drafter = pipe.stages.drafter if batch_size == 1 else pipe.stages.drafter.fork()
            self.waiting.append(_Row(i, dec, drafter))

    def run(self) -> list[GenerationResult | RefusedRequest]:
        pipe = self.pipe
        rt: RaggedBatchTarget | None = pipe.target.ragged_batch() if self.waiting else None
        if self.waiting and rt is None:
            raise ConfigError(f"target {type(pipe.target).__name__} does not support batched decoding",
                              hint="its adapter needs ragged_batch() (see specframe.batch_target)")
        try:
            active: list[_Row] = []
            with torch.inference_mode():
                while self.waiting or active:
                    while self.waiting and len(active) < self.batch_size:
                        row = self.waiting.popleft()
                        self._join(rt, row)  # type: ignore[arg-type]
                        if row.reason is None:
                            active.append(row)
                        else:  # ended on its prefill token: it leaves at once
                            rt.keep_rows(range(len(active)))  # type: ignore[union-attr]
                            self._finish(row)
                    if active:
                        self._round(rt, active)  # type: ignore[arg-type]
                        done = [r for r in active if r.reason is not None]
                        if done:
                            rt.keep_rows([i for i, r in enumerate(active) if r.reason is None])  # type: ignore[union-attr]
                            for r in done:
                                self._finish(r)
                            active = [r for r in active if r.reason is None]
        finally:
            if pipe.auto_budget is not None:  # single requests on this pipeline decode one row again
                pipe.auto_budget.rows = 1
        if pipe.auto_budget is not None:
            from specframe.cost.setup import save_learned_profile

            save_learned_profile(pipe)
        return [o for o in self.outcomes if o is not None]

    # ---------------------------------------------------------------------------------------- rows
    def _join(self, rt: RaggedBatchTarget, row: _Row) -> None:
        pipe = self.pipe
        if pipe.config.auto and pipe.auto_budget is None:
            from specframe.cost.setup import build_auto_budget

            pipe.auto_budget = build_auto_budget(pipe, row.dec.ids)
            pipe.target.reset()
        row.t_start = time.perf_counter_ns()
        prefill = rt.add_row(row.dec.ids)
        first = sample(prefill.logits[:, -1], pipe.sampling, row.rng.target)  # [1]
        row.dec.accept_tokens([int(first[0])])
        row.prefill_ns = time.perf_counter_ns() - row.t_start
        ids = row.dec.ids
        row.state = DecodeState(tokens=torch.cat([ids, first.view(1, 1).to(ids.device)], dim=1),
                                prompt_len=ids.shape[1], sampling=pipe.sampling, rng=row.rng)
        row.drafter.begin(row.state, prefill)
        row.ctx = RoundContext(budget=pipe.config.max_budget, sampling=pipe.sampling, rng=row.rng)
        if pipe.auto_budget is not None and not self.started:
            # Once per call: the batch is one stream to the controller. Probing soon for every joining request
            # would make a drafter that does not pay draft every few rounds in a busy continuous batch.
            pipe.auto_budget.start_request()
        self.started = True
        row.check_stop()

    def _finish(self, row: _Row) -> None:
        if row.text is not None and row.reason != "stop_string":
            row.dec.emit(row.text, len(row.text))  # the end: nothing held back can become a stop string now
        self.outcomes[row.index] = GenerationResult(
            tokens=row.dec.new, text=row.text, prompt_len=int(row.dec.ids.shape[1]), rounds=row.rounds,
            prefill_ns=row.prefill_ns, total_ns=time.perf_counter_ns() - row.t_start,
            stop_reason=row.reason or "length", batch_size=self.batch_size)

    # --------------------------------------------------------------------------------------- round
    def _round(self, rt: RaggedBatchTarget, active: list[_Row]) -> None:
        from specframe.pipeline import check_round_tree, draft_tree, plain_step

        pipe, st = self.pipe, self.pipe.stages
        auto = pipe.auto_budget
        # Stage times (and `budget: auto`'s cost model) need the devices idle before each clock reading.
        clock = self.clock
        if auto is not None:
            auto.rows = len(active)
        drafted = auto is None or auto.should_draft()
        trees: list[DraftTree] = []
        own_ns: list[dict[str, int]] = []
        for row in active:
            state, ctx = row.state, row.ctx
            assert state is not None and ctx is not None
            t0 = clock()
            if drafted:
                tree, t1, t2 = draft_tree(st, row.drafter, state, ctx, pipe.target, clock)
            else:  # budget: auto decided that drafting does not pay this round: the roots alone
                tree = DraftTree.root_only(state.root)
                t1 = t2 = t0
            trees.append(tree)
            own_ns.append({"draft": t1 - t0, "build": t2 - t1, "prune": clock() - t2})
        chosen: list[int | None] = [None] * len(active)
        if auto is not None and drafted:
            t0 = clock()
            trees, kept = choose_batch(auto, trees)
            chosen = list(kept)
            share = (clock() - t0) // len(active)
            for ns in own_ns:
                ns["prune"] += share
        if pipe.config.metrics.check_trees:
            for tree in trees:
                check_round_tree(tree)
        stacked = DraftTree.stack(trees)  # [B, N_max], padding nodes invalid
        t3 = clock()
        out = rt.forward_tree(stacked)
        t4 = clock()
        results: list[VerifyResult] = []
        outs: list[TargetOutput] = []
        for b, (row, tree) in enumerate(zip(active, trees, strict=True)):
            n = tree.capacity
            hidden = None if out.hidden is None else out.hidden[b : b + 1, :n]
            row_out = TargetOutput(logits=out.logits[b : b + 1, :n], hidden=hidden)
            t = clock()
            if drafted:
                results.append(st.verifier.verify(tree, row_out.logits, row.ctx))  # type: ignore[arg-type]
            else:
                results.append(plain_step(row_out, pipe, row.rng))
            own_ns[b]["verify"] = clock() - t
            outs.append(row_out)
        accepted, num_accepted, bonus = _verdicts_on_host(results)  # [B, D_max + 1], [B], [B]
        tokens, nodes, depths = _tree_facts_on_host(stacked)  # [B, N_max], [B], [B]
        t5 = clock()
        rt.commit(stacked, accepted)
        t6 = clock()
        timing = pipe.config.metrics.stage_timing
        expected_tokens = 0.0  # what the verified trees commit in expectation (AutoBudget.expected_tokens)
        for b, (row, tree, result, row_out) in enumerate(zip(active, trees, results, outs, strict=True)):
            state = row.state
            assert state is not None
            t = clock()
            n = int(num_accepted[b])
            emitted = tokens[b, accepted[b, 1 : n + 1]].tolist() + [int(bonus[b])]
            committed = row.dec.accept_tokens(emitted)
            state.tokens = torch.cat(
                [state.tokens, torch.tensor([emitted], dtype=torch.long, device=state.tokens.device)], dim=1)
            row.drafter.commit(state, tree, result, row_out)
            stage_ns = {**own_ns[b], "target": t4 - t3, "commit": (t6 - t5) + clock() - t}
            stage_ns = {k: stage_ns[k] for k in ("draft", "build", "prune", "target", "verify", "commit")}
            row.rounds.append(RoundRecord(nodes=int(nodes[b]) - 1, depth=int(depths[b]), accepted=n,
                                          committed=len(committed), stage_ns=stage_ns if timing else {},
                                          drafted=drafted, budget=chosen[b]))
            if auto is not None and drafted:
                expected_tokens += auto.expected_tokens(tree)
                auto.estimator.observe(tree, accepted[b, : result.accepted_nodes.shape[1]], 0)
            row.check_stop()
        if auto is not None:
            round_ms = {"draft": sum(ns["draft"] for ns in own_ns) / 1e6,
                        "build": sum(ns["build"] for ns in own_ns) / 1e6,
                        "prune": sum(ns["prune"] for ns in own_ns) / 1e6, "target": (t4 - t3) / 1e6,
                        "verify": sum(ns["verify"] for ns in own_ns) / 1e6, "commit": (clock() - t5) / 1e6}
            if drafted:
                auto.observe_round(stacked.batch_size * stacked.capacity, expected_tokens, round_ms)
            else:
                auto.observe_plain(round_ms)


def _verdicts_on_host(results: list[VerifyResult]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every row's accepted path ``[B, D_max + 1]`` (-1 padded), accepted count ``[B]`` and bonus ``[B]`` on the
    CPU, in one device-to-host copy (a per-row copy would synchronise with the device once per row)."""
    dev = results[0].accepted_nodes.device
    width = max(int(r.accepted_nodes.shape[1]) for r in results)
    packed = torch.full((len(results), width + 2), -1, dtype=torch.long, device=dev)  # [B, D_max + 3]
    for b, r in enumerate(results):
        packed[b, : r.accepted_nodes.shape[1]] = r.accepted_nodes[0].to(dev)
        packed[b, width] = r.num_accepted[0].to(dev)
        packed[b, width + 1] = r.bonus_token[0].to(dev)
    host = packed.cpu()
    return host[:, :width], host[:, width], host[:, width + 1]


def _tree_facts_on_host(tree: DraftTree) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens ``[B, N]``, valid node counts ``[B]`` and depths ``[B]`` of a stacked tree, on the CPU."""
    depth = torch.where(tree.valid, tree.depth, torch.zeros_like(tree.depth)).max(dim=1).values  # [B]
    packed = torch.cat([tree.tokens, tree.num_nodes[:, None], depth[:, None]], dim=1).cpu()  # [B, N + 2]
    n = tree.capacity
    return packed[:, :n], packed[:, n], packed[:, n + 1]
