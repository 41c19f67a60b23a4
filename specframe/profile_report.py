"""`specframe profile`: measure a pipeline's round costs where it runs, print them, write JSON and a plot.

Steps: build the pipeline; check the prompt fits the target's context; measure the target's cost model on the
prompt (`measure_cost_model`: the one-row curve ``C(1, n)`` and ``C(B, B (k + 1))`` for the batch sizes of
:data:`~specframe.cost.profile.PROFILE_BATCHES` and node counts up to the budget); decode the prompt once with
the pipeline at its (maximum) budget to time the draft, build, prune, verify and commit stages (medians over
rounds); offer the profile to the cache that `budget: auto` reads (:func:`specframe.cost.measure.cache_profile`:
only a plausible profile measured on a quiet machine that covers the cached one replaces it); print a table with,
for every verify size, the acceptance length τ a drafted round needs just to break even with plain decoding, and
one of ``C(B, n)`` per batch size:

    τ_even(n) = (draft + build + prune + T(n) + verify + commit) / T(1)

Example row (CPU, SmolLM2-135M): ``n = 9: T = 99 ms, 11.0 ms per token, τ to break even 3.1``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specframe.cost.measure import cache_profile, measure_cost_model
from specframe.cost.profile import DEFAULT_GRID, PROFILE_BATCHES, PROFILE_NODES, CostProfile
from specframe.cost.setup import target_profile_key
from specframe.decode.exclusive import exclusive
from specframe.decode.request import Request
from specframe.errors import GenerationError
from specframe.files import write_with
from specframe.files.cache import measuring
from specframe.metrics.machine_load import MachineLoad
from specframe.metrics.memory import format_bytes, pipeline_memory
from specframe.notices import notify

if TYPE_CHECKING:
    from specframe.pipeline import Pipeline

ROUND_STAGES = ("draft", "build", "prune", "verify", "commit")


@dataclass(frozen=True)
class MeasuredProfile:
    """A measured profile and the machine's load while it was measured (None: unknown), with the τ and tokens per
    second of the timed decode and the pipeline's memory at its context length (:mod:`specframe.metrics.memory`)."""

    profile: CostProfile
    load: MachineLoad | None
    tau: float = float("nan")
    tokens_per_s: float = float("nan")
    memory: dict[str, Any] = field(default_factory=dict)


def measure_pipeline_profile(pipe: Pipeline, prompt: str, *, reps: int = 5, new_tokens: int = 48,
                             batches: tuple[int, ...] = PROFILE_BATCHES) -> MeasuredProfile:
    """The cost model up to the pipeline's maximum budget (one row and the batch sizes of ``batches``) and the median
    per-round stage overheads, with the machine's load over both measurements (the profile is cached only from a
    quiet one)."""
    ids = pipe.request_inputs(Request(prompt, new_tokens), chat=None).ids  # a prompt the context cannot hold
    top = pipe.config.max_budget + 1
    grid = sorted({n for n in DEFAULT_GRID if n <= top} | {top})
    fixed = pipe if not pipe.config.auto else pipe.with_stage("budget", None, budget=pipe.config.max_budget)
    with measuring() as window:
        try:
            with exclusive(pipe.target, "the verify-curve measurement"):
                nodes = [k for k in PROFILE_NODES if k <= pipe.config.max_budget]
                model = measure_cost_model(pipe.target, ids, target_profile_key(pipe.target, pipe.config), grid=grid,
                                           batches=batches, nodes=nodes, reps=reps)
        except ValueError as exc:
            raise GenerationError(f"cannot measure the verify curve: {exc}",
                                  hint="use a target with a longer context, or fewer --reps") from None
        result = fixed.generate(prompt, new_tokens)
    profile = CostProfile(key=model.key, verify_ms=model.verify_ms, batch_ms=model.batch_ms,
                          overhead_ms=round_overheads(result))
    memory = pipeline_memory(pipe).at(result.prompt_len + len(result.tokens))
    return MeasuredProfile(profile, window.load, result.tau, result.decode_tokens_per_s, memory)


def round_overheads(result: Any) -> dict[str, float]:
    """Per-round milliseconds a decode spent outside the target's forward, from ``result``'s rounds: the median of
    each stage of :data:`ROUND_STAGES` and, when every round was timed, ``loop`` (the wall time of the rounds minus
    every timed stage, per round: the loop's own Python). What a profile's ``overhead_ms`` holds."""
    overhead: dict[str, float] = {}
    for stage in ROUND_STAGES:
        values = [r.stage_ns.get(stage, 0) / 1e6 for r in result.rounds]
        if values:
            overhead[stage] = statistics.median(values)
    if result.rounds and all(r.stage_ns for r in result.rounds):  # every round timed: the rest is the loop's own
        inside = sum(sum(r.stage_ns.values()) for r in result.rounds)
        overhead["loop"] = max(result.total_ns - result.prefill_ns - inside, 0) / 1e6 / len(result.rounds)
    return overhead


def memory_line(measured: MeasuredProfile) -> str:
    """One line: τ and speed of the timed decode, then the drafter's, heads' and per-request bytes."""
    mem = measured.memory
    heads = ", ".join(f"{k} {format_bytes(v)}" for k, v in mem.get("heads", {}).items()) or "none"
    return (f"timed decode: τ {measured.tau:.2f}, {measured.tokens_per_s:.1f} tokens/s; memory: drafter "
            f"{format_bytes(mem.get('drafter_bytes'))}, heads {heads}, target {format_bytes(mem.get('target_bytes'))}; "
            f"per request at {mem.get('context_tokens')} tokens: KV cache {format_bytes(mem.get('kv_bytes'))}, "
            f"drafter cache {format_bytes(mem.get('drafter_state_bytes'))}")


def break_even_tau(profile: CostProfile, tokens: int) -> float:
    """τ a drafted round verifying ``tokens`` tokens needs to match plain decoding's tokens per second."""
    drafted = sum(profile.overhead(s) for s in ROUND_STAGES) + profile.verify_cost(tokens)
    plain = profile.verify_cost(1) + profile.overhead("plain")
    return drafted / plain if plain > 0 else float("inf")


def profile_rows(profile: CostProfile) -> list[dict[str, Any]]:
    return [{"tokens": n, "verify_ms": round(ms, 2), "ms_per_token": round(ms / n, 2),
             "break_even_tau": round(break_even_tau(profile, n), 2)} for n, ms in profile.verify_ms.items()]


def batch_rows(profile: CostProfile) -> list[dict[str, Any]]:
    """``C(B, n)`` of every measured batch size, with the plain rate ``lambda_B`` (tokens per ms) it implies."""
    return [{"batch": b, "tokens": n, "forward_ms": round(ms, 2),
             "plain_tokens_per_ms": round(profile.plain_rate(b), 4)}
            for b, curve in profile.batch_ms.items() for n, ms in curve.items()]


def write_plot(profile: CostProfile, path: Path) -> None:
    """Verify time against tokens per forward, and the break-even τ, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rows = profile_rows(profile)
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([r["tokens"] for r in rows], [r["verify_ms"] for r in rows], marker="o", label="target forward (ms)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per forward (root + verified nodes)")
    ax.set_ylabel("ms")
    twin = ax.twinx()
    twin.plot([r["tokens"] for r in rows], [r["break_even_tau"] for r in rows], marker="s", color="tab:red",
              label="τ to break even")
    twin.set_ylabel("τ to break even with plain decoding")
    ax.set_title(f"{profile.key.get('device', '?')}, {profile.key.get('dtype', '?')}, "
                 f"{profile.key.get('threads', '?')} threads", fontsize=9)
    fig.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    write_with(path, lambda handle: fig.savefig(handle, format="png", dpi=110), what="profile plot")


def save_to_cache(measured: MeasuredProfile) -> Path | None:
    """Offer the measured profile to the cache (:func:`cache_profile`: not when measured on a busy machine); the file
    written, or None (with a notice why)."""
    return cache_profile(measured.profile, notify, load=measured.load)
