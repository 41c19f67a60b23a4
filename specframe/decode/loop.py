"""`decode`: the one decode loop, continuous batching over requests; a single request is a batch of one.

::

    rows, joining = [], None
    while requests wait or rows are in flight or a prompt is joining:
        while a request waits and len(rows) + joining < batch_size:  # join: prefill alone, first token drawn
            if the target's KV pool has no room for it: wait   # (refused if it can never fit)
            if its prompt is longer than the target's prefill_chunk: joining = begin_row(request)
            else: rows.append(start(request))
        if joining: one chunk of its prompt; after the last, it starts and rows.append(it)
        run_round(rows)                                       # specframe.decode.rounds: every row advances
        rows that ended leave (their results are final)

A target that prefills in chunks (``prefill_chunk`` and ``begin_row``, e.g. the ``hf`` lean engine) takes a long
prompt a chunk per round, so rows in flight keep decoding while it joins (one such prompt at a time, in order);
its first token is drawn, and its drafter begins with the whole prompt's taps, after its last chunk.

A request that cannot run is refused on its own (`RefusedRequest`, naming it); the others decode. So is a request
that fails while decoding: a prefill that raises refuses that request alone, and a round that raises is retried
row by row (each row readmitted alone by prefilling its committed tokens again) so that only the rows whose own
round fails are refused; finished results are never lost. A drafter that
does not declare ``supports_batch`` is refused up front for a batch size above 1. A `ContractError` raised by a
stage is attributed to the component that broke the contract (``attribute``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch

from specframe.cost.auto_budget import AutoBudget
from specframe.decode.acceptance_alarm import AcceptanceAlarm
from specframe.decode.request import RefusedRequest, RequestInputs
from specframe.decode.rounds import run_round
from specframe.decode.row import Row
from specframe.decode.session import DecodeSettings, Session, Stages
from specframe.decode.target_rows import target_rows
from specframe.device_sync import StageClock
from specframe.errors import ConfigError, ContractError, GenerationError
from specframe.interfaces import DecodeState, TargetModel
from specframe.metrics.records import GenerationResult
from specframe.sampling import sample
from specframe.sampling.noise import TARGET, RoundNoise
from specframe.types import TargetOutput

#: Called with (request index, new text) while decoding.
StreamFn = Callable[[int, str], None]
Outcome = GenerationResult | RefusedRequest
#: Called with (request index, outcome) as each request is refused or ends, in that order.
FinishFn = Callable[[int, Outcome], None]


def check_batch_support(stages: Stages, drafter_name: str, batch_size: int) -> None:
    """Refuse a batch size below 1, or above 1 with a drafter that cannot keep per-row state."""
    if batch_size < 1:
        raise ConfigError(f"the batch size must be at least 1, got {batch_size}", hint="use --batch-size 1 or more")
    if batch_size > 1 and not stages.drafter.supports_batch:
        raise ConfigError(f"drafter '{drafter_name}' ({type(stages.drafter).__name__}) does not declare batch support",
                          hint="decode with --batch-size 1, or set `supports_batch = True` on the drafter once "
                               "its per-request state lives only in what begin() creates (see Drafter.fork)")


def decode(target: TargetModel, stages: Stages, settings: DecodeSettings,
           requests: Sequence[RequestInputs | GenerationError], batch_size: int, *, auto: AutoBudget | None,
           stream: StreamFn | None = None, on_finish: FinishFn | None = None,
           alarm: AcceptanceAlarm | None = None) -> list[Outcome]:
    """Decode ``requests`` (checked inputs, or the error that refused each) with up to ``batch_size`` rows in flight;
    ``alarm`` watches the drafted rounds for drafts that are never accepted (:mod:`specframe.decode.acceptance_alarm`).

    Returns one outcome per request, in order; ``on_finish(index, outcome)`` is called as each is known.
    """
    outcomes: list[Outcome | None] = [None] * len(requests)

    def finish(index: int, outcome: Outcome) -> None:
        outcomes[index] = outcome
        if on_finish is not None:
            on_finish(index, outcome)

    waiting: deque[tuple[int, RequestInputs]] = deque()
    for i, req in enumerate(requests):
        if isinstance(req, GenerationError):
            finish(i, RefusedRequest(i, req))
        else:
            waiting.append((i, req))
    if not waiting:
        return [o for o in outcomes if o is not None]
    eos = set(target.eos_token_ids) if settings.stop_at_eos else set()
    taps = stages.drafter.target_layers if settings.drafts else ()  # the plain loop taps nothing
    session = Session(stages=stages, settings=settings, target=target_rows(target, taps),
                      drafter=stages.drafter.rows() if settings.drafts else None,
                      # `budget: auto` learns its costs from exactly timed rounds, so it samples one in
                      # `StageClock.every` on an accelerator even when stage timing is off for the records.
                      clock=StageClock(settings.devices, sync=settings.stage_timing or auto is not None), auto=auto,
                      alarm=alarm)
    if auto is not None:  # the controller prices rounds on what this target's forward runs, in the sizes it runs
        auto.packs = bool(getattr(session.target, "selective_batching", False))
        auto.allowed = getattr(session.target, "node_buckets", None)
    plan = getattr(session.target, "plan", None)
    if plan is not None:  # an adapter that pools its KV memory sizes it once for the largest batch
        plan(sorted(_capacity(inputs, settings) for _, inputs in waiting)[-batch_size:])
    rows: list[Row] = []
    joining: tuple[Row, Any] | None = None  # a long prompt prefilled a chunk per round, and its chunked prefill

    def join(row: Row, start: Callable[[], bool | None]) -> bool:
        """Prefill and start ``row`` by ``start()`` (False: a chunked prefill has chunks left, and this returns
        False); it then decodes, ends on its prefill token, or is refused."""
        try:
            if start() is False:
                return False
        except ContractError:
            raise
        except Exception as exc:  # this request alone fails (e.g. its prefill runs out of memory)
            _keep(session, list(range(len(rows))))  # whatever it left in the caches leaves
            finish(row.index, RefusedRequest(row.index, _failure(exc, "its prefill")))
            return True
        if row.reason is None:
            rows.append(row)
        else:  # ended on its prefill token: it leaves at once
            _keep(session, list(range(len(rows))))
            finish(row.index, row.result(batch_size))
        return True

    try:
        with torch.inference_mode():
            while waiting or rows or joining:
                while waiting and len(rows) + (joining is not None) < batch_size:
                    index, inputs = waiting[0]
                    begin = _begin_row(session, inputs)
                    if begin is not None and joining is not None:
                        break  # one prompt joins in chunks at a time
                    room = _room(session, inputs)
                    if room is False and (rows or joining):
                        break  # the target's KV pool is full: the request waits until rows leave
                    waiting.popleft()
                    if isinstance(room, GenerationError):  # it can never fit: refused alone
                        finish(index, RefusedRequest(index, room))
                        continue
                    row_stream = None if stream is None else (lambda text, i=index: stream(i, text))
                    row = Row(index, inputs, tokenizer=target.tokenizer, eos=eos, stream=row_stream)
                    if begin is None:
                        join(row, partial(_start, session, row))
                        continue
                    try:
                        joining = (row, begin(inputs.ids, capacity=_capacity(inputs, settings)))
                    except Exception as exc:
                        finish(index, RefusedRequest(index, _failure(exc, "its prefill")))
                if joining is not None:  # one chunk of the joining prompt between two rounds
                    row, job = joining
                    if join(row, partial(_chunk, session, row, job)):
                        joining = None  # its last chunk ran (or it was refused)
                if rows:
                    try:
                        run_round(session, rows)
                    except ContractError:
                        raise
                    except Exception as exc:  # find the row(s) at fault; the others go on
                        rows, failed = _isolate(session, rows, exc)
                        for r, err in failed:
                            finish(r.index, RefusedRequest(r.index, err))
                    done = [r for r in rows if r.reason is not None]
                    if done:
                        keep = [i for i, r in enumerate(rows) if r.reason is None]
                        _keep(session, keep)
                        for r in done:
                            finish(r.index, r.result(batch_size))
                        rows = [rows[i] for i in keep]
    finally:
        session.target.close()
    return [o for o in outcomes if o is not None]


def _isolate(session: Session, rows: list[Row],
             error: Exception) -> tuple[list[Row], list[tuple[Row, GenerationError]]]:
    """A round of several rows failed: find the rows at fault and keep the others decoding.

    Every row leaves the caches; each is then readmitted alone (its committed tokens prefilled again, as an engine
    recomputes a preempted request) and runs one round by itself. A row whose own round fails is refused with
    that error; the others are readmitted together and continue exactly where they were (their tokens, seeds and
    positions are unchanged, so their outputs do not depend on the failure). A round of one row is that row's.
    """
    if len(rows) == 1:
        _keep(session, [])
        return [], [(rows[0], _failure(error, "a decode round"))]
    _keep(session, [])
    survivors: list[Row] = []
    failed: list[tuple[Row, GenerationError]] = []
    for row in rows:
        try:
            _resume(session, row)
            run_round(session, [row])
            survivors.append(row)
        except ContractError:
            raise
        except Exception as exc:
            failed.append((row, _failure(exc, "a decode round")))
        _keep(session, [])
    for row in survivors:
        if row.reason is None:
            _resume(session, row)
    return survivors, failed


def _resume(session: Session, row: Row) -> None:
    """Readmit a row that left the caches: prefill its committed tokens alone (no token is drawn)."""
    state = row.state
    assert state is not None
    prefill = session.target.add_row(state.tokens[:, :-1], capacity=_capacity(row.inputs, session.settings))
    if session.drafter is not None:
        session.drafter.add_row(state, prefill)


def _capacity(inputs: RequestInputs, settings: DecodeSettings) -> int:
    """A row's whole life: prompt, up to ``cap`` new tokens, one verified tree beyond the last committed token."""
    return inputs.prompt_len + inputs.cap + settings.budget + 1


def _room(session: Session, inputs: RequestInputs) -> bool | GenerationError:
    """Whether the target has KV room for the request now (True), after rows leave (False), or never (the error
    that refuses it); targets without a pool (no ``room``) always have room."""
    room = getattr(session.target, "room", None)
    return True if room is None else room(_capacity(inputs, session.settings))


def _failure(exc: Exception, where: str) -> GenerationError:
    """The refusal of a request that failed in ``where`` (its other batch-mates go on)."""
    if isinstance(exc, GenerationError):
        return exc
    return GenerationError(f"the request failed in {where}: {type(exc).__name__}: {exc}",
                           hint="its batch-mates were decoded; retry this request alone, or with a smaller batch "
                                "or shorter prompt if it ran out of memory")


def _keep(session: Session, rows: list[int]) -> None:
    session.target.keep_rows(rows)
    if session.drafter is not None:
        session.drafter.keep_rows(rows)


def _begin_row(session: Session, inputs: RequestInputs) -> Callable[..., Any] | None:
    """The target's ``begin_row`` when it prefills this request's prompt in chunks between rounds (`_chunk`): a
    prompt longer than its ``prefill_chunk``; else None (the prompt is prefilled in one forward, `_start`)."""
    chunk = getattr(session.target, "prefill_chunk", None)
    begin = getattr(session.target, "begin_row", None)
    return begin if chunk is not None and begin is not None and inputs.prompt_len > chunk else None


def _chunk(session: Session, row: Row, job: Any) -> bool:
    """Prefill the next chunk of a joining row's prompt (``job`` from the target's ``begin_row``); after its last
    chunk the row starts (`_start`) and this returns True. A chunk that raises gives the row's reservation back."""
    prefill = job.step()
    if prefill is None:
        return False
    _start(session, row, prefill)
    return True


def _start(session: Session, row: Row, prefill: TargetOutput | None = None) -> None:
    """Prefill the row's prompt alone (unless ``prefill`` holds its chunked prefill's output), draw its first
    token, start its drafter and controller state."""
    cfg = session.settings
    if prefill is None:
        prefill = session.target.add_row(row.inputs.ids, capacity=_capacity(row.inputs, cfg))
    noise = RoundNoise.for_rows([row.inputs.seed], [row.inputs.prompt_len - 1], session.target.device)
    u = None if cfg.sampling.greedy else noise.uniforms(TARGET, torch.zeros(1, dtype=torch.long))
    first = int(sample(prefill.logits[:, -1], cfg.sampling, u)[0])
    row.prefill_ns = time.perf_counter_ns() - row.t_start
    ids = row.inputs.ids.to(session.target.device)
    state = DecodeState(tokens=torch.cat([ids, torch.tensor([[first]], device=ids.device)], dim=1),
                        prompt_len=row.inputs.prompt_len, sampling=cfg.sampling, seed=row.inputs.seed,
                        capacity=_capacity(row.inputs, cfg))
    row.start(first, state)
    if session.drafter is not None:
        session.drafter.add_row(state, prefill)
    if session.auto is not None:
        row.budget = session.auto.start_row()
