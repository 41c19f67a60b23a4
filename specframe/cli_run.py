"""``specframe run``: decode prompts with a pipeline, stream the text, print τ, rounds and tokens/s.

With ``--compare-ar`` the same target decodes the same prompts with the autoregressive baseline that
``bench`` uses (:func:`specframe.builtin.baseline.ar_baseline`) in the same process, and, where the target
offers it, with transformers' own ``generate()`` for exactly as many tokens as the pipeline produced
(:mod:`specframe.reference`: the unmodified model, default kernels, the same prompt ids and sampling settings);
the summary then gives the speedups over both and whether the greedy outputs are identical.

With ``--batch-size N`` (N > 1) the prompts decode in one batched loop, up to N at a time
(`specframe.decode`); each request's text is printed as soon as it ends (``decode(on_finish=...)``), so a long
prompts file shows results from the first finished request on. With ``--json`` the report is one JSON document on
stdout at the end, and with more than one prompt a line per finished or refused request goes to stderr as it
happens. With either batch size, a prompt that cannot be decoded (longer than the target's context, empty) is
refused on its own: the others are decoded, the JSON report lists every result and every refusal, and the command
then exits with status 2 naming the refused prompts; when every prompt is refused there is nothing to time or
compare, so the summary and ``--compare-ar`` are skipped and the refusals are the output. Every result and refusal
carries its request index (the position among all prompts given) and its source: ``--prompt #k`` or ``FILE:LINE``,
the line of the prompts file (blank lines count).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from specframe.builtin.baseline import ar_baseline
from specframe.cli_output import console, emit_json, err_console, host_of
from specframe.config.bounds import check_max_new_tokens
from specframe.decode.request import RefusedRequest, Request
from specframe.errors import GenerationError
from specframe.files.prompts import read_numbered_prompts
from specframe.files.read import check_strings
from specframe.metrics.acceptance import tau_pooled
from specframe.metrics.records import GenerationResult
from specframe.metrics.speedup import PairedRun, aggregate_speedup
from specframe.reference import reference_result, supports_reference
from specframe.seeds import MAX_SEED

#: Verifiers whose tokens equal plain decoding's for the same seed at any temperature (specframe.sampling.noise).
TOKEN_EXACT_VERIFIERS = ("greedy", "walk")

if TYPE_CHECKING:
    from specframe.pipeline import Pipeline


def _read_prompts(prompts: tuple[str, ...], prompts_file: Path | None) -> list[tuple[str, str]]:
    """``(source, prompt)`` pairs: ``--prompt #i`` for the command line, ``FILE:LINE`` for the prompts file."""
    check_strings(list(prompts), where="--prompt", error=GenerationError)
    out = [(f"--prompt #{i + 1}", text) for i, text in enumerate(prompts)]
    if prompts_file is not None:
        out += [(f"{prompts_file}:{line}", text) for line, text in read_numbered_prompts(prompts_file)]
    if not out:
        raise GenerationError("no prompt given", hint='use --prompt "..." or --prompts-file FILE')
    return out


def _summary_line(name: str, results: list[GenerationResult], wall_s: float | None = None) -> str:
    """τ, rounds and tokens/s; ``wall_s`` is the batch's wall time (requests in one batch overlap)."""
    rounds = sum(r.num_rounds for r in results)
    tokens = sum(len(r.tokens) for r in results)
    seconds = sum(r.total_ns for r in results) / 1e9 if wall_s is None else wall_s
    tau = tau_pooled([r.accept_lengths() for r in results])
    speed = f"{tokens / seconds:.2f} tok/s" if seconds > 0 else "no time measured"
    return f"{name}: tau {tau:.2f} | rounds {rounds} | {tokens} tokens in {seconds:.2f}s | {speed}"


@click.command()
@click.argument("pipeline", type=click.Path(path_type=Path))
@click.option("--prompt", "prompts", multiple=True, help="A prompt (repeatable).")
@click.option("--prompts-file", type=click.Path(path_type=Path), help="One prompt per line (or JSONL 'prompt').")
@click.option("--max-new-tokens", type=int, default=None, help="Defaults to generation.max_new_tokens.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field (repeatable).")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=None,
              help="Seed of every request's random streams (0 to 2**63 - 1; default: derived per request from "
                   "the pipeline's `seed:`, else a fresh one per request; --json prints each result's seed).")
@click.option("--compare-ar", is_flag=True, help="Also decode plainly in the same process; report speedup.")
@click.option("--no-stream", is_flag=True, help="Do not stream text while decoding.")
@click.option("--batch-size", type=click.IntRange(min=1, max=4096), default=1, show_default=True,
              help="Decode up to N prompts at once in one batched loop.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.pass_context
def run(ctx: click.Context, pipeline: Path, prompts: tuple[str, ...], prompts_file: Path | None,
        max_new_tokens: int | None, overrides: tuple[str, ...], seed: int | None, compare_ar: bool,
        no_stream: bool, batch_size: int, as_json: bool) -> None:
    """Generate with PIPELINE (a YAML file) for each prompt."""
    from specframe.pipeline import Pipeline

    sources = _read_prompts(prompts, prompts_file)
    texts = [text for _, text in sources]
    if max_new_tokens is not None:
        check_max_new_tokens(max_new_tokens, where="--max-new-tokens")
    pipe = Pipeline.from_yaml(pipeline, overrides=overrides, host=host_of(ctx))
    pipe.check_batch_size(batch_size)
    stream = None if (no_stream or as_json or batch_size > 1) else _Streamer(pipe.config.name)
    on_finish: _Printer | _Progress | None = None
    if as_json:
        on_finish = _Progress(sources) if len(texts) > 1 else None
    elif stream is None and not no_stream:  # a batch: each text as its request ends
        on_finish = _Printer(pipe.config.name, sources)
    outcomes, wall_s = _decode(pipe, texts, max_new_tokens, seed, batch_size, stream, on_finish)
    results = [o for o in outcomes if isinstance(o, GenerationResult)]
    refused = [o for o in outcomes if isinstance(o, RefusedRequest)]
    decoded = [i for i, o in enumerate(outcomes) if isinstance(o, GenerationResult)]
    report: dict = {"pipeline": pipe.config.name, "config_hash": pipe.config_hash,
                    "results": [{"request": i, "source": sources[i][0], **result.as_dict()}
                                for i, result in zip(decoded, results, strict=True)]}
    wall = wall_s if batch_size > 1 else None  # one request at a time: the requests' own times
    lines = [_summary_line(pipe.config.name, results, wall)] if results else []
    if compare_ar and results:
        ar = ar_baseline(pipe, "plain decoding", source=str(pipeline))
        same_seeds = [Request(texts[i], seed=r.seed) for i, r in zip(decoded, results, strict=True)]
        base_outcomes, base_wall = _decode(ar, same_seeds, max_new_tokens, seed, batch_size, None)
        baseline = [o for o in base_outcomes if isinstance(o, GenerationResult)]
        same = [b.tokens == r.tokens for b, r in zip(baseline, results, strict=True)]
        if batch_size == 1:
            speedup = aggregate_speedup([PairedRun(tokens=len(r.tokens), seconds=r.total_ns / 1e9,
                                                   base_tokens=len(b.tokens), base_seconds=b.total_ns / 1e9)
                                         for r, b in zip(results, baseline, strict=True)])
        else:  # a batch's requests overlap in time: compare the batches' wall times
            speedup = aggregate_speedup([PairedRun(tokens=sum(len(r.tokens) for r in results), seconds=wall_s,
                                                   base_tokens=sum(len(b.tokens) for b in baseline),
                                                   base_seconds=base_wall)])
        report["baseline"] = [b.summary() for b in baseline]
        report["speedup"] = speedup
        report["identical_to_ar"] = same
        lines.append(_summary_line("plain decoding", baseline, base_wall if batch_size > 1 else None))
        exact = "identical" if all(same) else f"DIFFERENT in {same.count(False)} of {len(same)}"
        lines.append(f"speedup over plain decoding: {speedup:.2f}x | outputs {exact}{_exactness_note(pipe)}")
        report.update(_compare_generate(pipe, [texts[i] for i in decoded], results, baseline, wall,
                                        base_wall if batch_size > 1 else None, seed, lines))
    if refused:
        report["refused"] = [{"request": r.index, "source": sources[r.index][0], "error": r.error.message}
                             for r in refused]
    if as_json:
        emit_json(report)
    else:
        for line in lines:
            err_console.print(line, highlight=False, markup=False)
    if refused:
        raise GenerationError(f"{len(refused)} of {len(texts)} requests refused:\n  "
                              + "\n  ".join(f"request {r.index}: {sources[r.index][0]}: {r.error.message}"
                                            for r in refused),
                              hint="the other requests were decoded; shorten the refused prompts" if results
                              else "no request was decoded; shorten the prompts or fix what each refusal names")


def _exactness_note(pipe: Pipeline) -> str:
    """What equal outputs mean: with WALK or greedy verification the tokens are plain decoding's for the seed at
    any temperature (guaranteed in float32, likely in bf16); other verifiers promise the law only."""
    if pipe.config.verifier.type not in TOKEN_EXACT_VERIFIERS:
        return ""
    dtype = str(getattr(pipe.target, "dtype", "float32")).removeprefix("torch.")
    if dtype in ("float32", "float64"):
        return " (expected: this verifier emits plain decoding's tokens for the seed)"
    return (f" (in {dtype}: likely, not guaranteed; a many-token verify and a one-token forward round "
            "differently, see docs/pipelines.md)")


def _compare_generate(pipe: Pipeline, texts: list[str], results: list[GenerationResult],
                      baseline: list[GenerationResult], wall_s: float | None, base_wall: float | None,
                      seed: int | None, lines: list[str]) -> dict[str, Any]:
    """transformers' ``generate()`` on each prompt for the pipeline's token count; the JSON fields it adds and
    its summary lines (appended to ``lines``)."""
    if not supports_reference(pipe):
        lines.append(f"generate(): not compared (the target {type(pipe.target).__name__} has none)")
        return {"generate": None}
    runs, kernels = [], ""
    for text, result in zip(texts, results, strict=True):
        run, kernels = reference_result(pipe, pipe.encode(text), new_tokens=len(result.tokens),
                                        seed=result.seed if result.seed is not None else seed or 0)
        runs.append(run)

    def versus(own: list[GenerationResult], own_wall: float | None) -> float:
        if own_wall is None:
            return aggregate_speedup([PairedRun(len(r.tokens), r.total_ns / 1e9, len(g.tokens), g.total_ns / 1e9)
                                      for r, g in zip(own, runs, strict=True)])
        return aggregate_speedup([PairedRun(sum(len(r.tokens) for r in own), own_wall,
                                            sum(len(g.tokens) for g in runs), sum(g.total_ns for g in runs) / 1e9)])

    speedup, plain = versus(results, wall_s), versus(baseline, base_wall)
    greedy = pipe.config.sampling.temperature == 0
    same = [g.tokens == r.tokens for g, r in zip(runs, results, strict=True)] if greedy else None
    lines.append(_summary_line("generate()", runs))
    exact = "" if same is None else " | outputs " + ("identical to generate()" if all(same) else
                                                      f"DIFFERENT from generate() in {same.count(False)} of "
                                                      f"{len(same)}")
    lines.append(f"plain decoding against transformers' generate(): {plain:.2f}x (the loop and its kernels; "
                 f"speculation's own gain is the speedup over plain decoding above){exact} ({kernels})")
    return {"generate": [g.summary() for g in runs], "generate_kernels": kernels, "speedup_vs_generate": speedup,
            "plain_vs_generate": plain, "identical_to_generate": same}


class _Streamer:
    """Streams each request's text as it is decoded, under a rule naming the pipeline (one request at a time)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.current: int | None = None

    def __call__(self, index: int, piece: str) -> None:
        if index != self.current:
            if self.current is not None:
                console.print()
            console.rule(f"[bold]{escape(self.name)}[/bold]")
            self.current = index
        console.print(piece, end="", markup=False, highlight=False)


class _Printer:
    """Prints each request's text as it ends (a batch's requests end in any order), under a rule naming it."""

    def __init__(self, name: str, sources: list[tuple[str, str]]) -> None:
        self.name, self.sources = name, sources

    def __call__(self, index: int, outcome: GenerationResult | RefusedRequest) -> None:
        if isinstance(outcome, GenerationResult):
            console.rule(f"[bold]{escape(self.name)}[/bold] request {index} ({escape(self.sources[index][0])})")
            console.print(outcome.text or "", markup=False, highlight=False)


class _Progress:
    """With ``--json``: a line on stderr per request as it ends or is refused (the JSON comes at the end)."""

    def __init__(self, sources: list[tuple[str, str]]) -> None:
        self.sources = sources

    def __call__(self, index: int, outcome: GenerationResult | RefusedRequest) -> None:
        what = (f"{len(outcome.tokens)} tokens ({outcome.stop_reason})" if isinstance(outcome, GenerationResult)
                else f"refused: {outcome.error.message}")
        err_console.print(f"request {index} ({self.sources[index][0]}): {what}", markup=False, highlight=False)


def _decode(pipe: Pipeline, texts: Sequence[str | Request], max_new_tokens: int | None, seed: int | None,
            batch_size: int, stream: _Streamer | None, on_finish: _Printer | _Progress | None = None
            ) -> tuple[list[GenerationResult | RefusedRequest], float]:
    """One outcome per prompt (a refused prompt does not stop the others) and the wall time in seconds."""
    start = time.perf_counter()
    outcomes = pipe.generate_batch(texts, max_new_tokens, seed=seed, batch_size=batch_size, stream=stream,
                                   on_finish=on_finish)
    if stream is not None and stream.current is not None:
        console.print()
    return outcomes, time.perf_counter() - start
