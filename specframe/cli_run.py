"""``specframe run``: decode prompts with a pipeline, stream the text, print τ, rounds and tokens/s.

With ``--compare-ar`` the same target decodes the same prompts with the autoregressive baseline that
``bench`` uses (:func:`specframe.builtin.baseline.ar_baseline`) in the same process, and, where the target
offers it, with transformers' own ``generate()`` for exactly as many tokens as the pipeline produced
(:mod:`specframe.reference`: the unmodified model, default kernels, the same prompt ids and sampling settings);
the summary then gives the speedups over both and whether the greedy outputs are identical.

With ``--batch-size N`` (N > 1) the prompts decode in one batched loop, up to N at a time
(`specframe.batch_decode`); texts are printed as each request ends. A prompt that does not fit the target's
context is refused on its own (named, exit status 2 after the others are decoded).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from specframe.builtin.baseline import ar_baseline
from specframe.cli_output import console, emit_json, err_console, host_of
from specframe.config.bounds import check_max_new_tokens
from specframe.errors import GenerationError
from specframe.files.prompts import read_prompts_file
from specframe.files.read import check_strings
from specframe.metrics.acceptance import tau_pooled
from specframe.metrics.records import GenerationResult
from specframe.metrics.speedup import PairedRun, aggregate_speedup
from specframe.reference import reference_result, supports_reference

if TYPE_CHECKING:
    from specframe.batch_decode import RefusedRequest
    from specframe.pipeline import Pipeline


def _read_prompts(prompts: tuple[str, ...], prompts_file: Path | None) -> list[str]:
    out = list(prompts)
    check_strings(out, where="--prompt", error=GenerationError)
    if prompts_file is not None:
        out += read_prompts_file(prompts_file)
    if not out:
        raise GenerationError("no prompt given", hint='use --prompt "..." or --prompts-file FILE')
    return out


def _summary_line(name: str, results: list[GenerationResult], wall_s: float | None = None) -> str:
    """τ, rounds and tokens/s; ``wall_s`` is the batch's wall time (requests in one batch overlap)."""
    rounds = sum(r.num_rounds for r in results)
    tokens = sum(len(r.tokens) for r in results)
    seconds = sum(r.total_ns for r in results) / 1e9 if wall_s is None else wall_s
    tau = tau_pooled([r.accept_lengths() for r in results])
    return f"{name}: tau {tau:.2f} | rounds {rounds} | {tokens} tokens in {seconds:.2f}s | {tokens / seconds:.2f} tok/s"


@click.command()
@click.argument("pipeline", type=click.Path(path_type=Path))
@click.option("--prompt", "prompts", multiple=True, help="A prompt (repeatable).")
@click.option("--prompts-file", type=click.Path(path_type=Path), help="One prompt per line (or JSONL 'prompt').")
@click.option("--max-new-tokens", type=int, default=None, help="Defaults to generation.max_new_tokens.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field (repeatable).")
@click.option("--seed", type=int, default=None, help="Seed of the request's random streams.")
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
    from specframe.batch_decode import check_batch_support
    from specframe.pipeline import Pipeline

    texts = _read_prompts(prompts, prompts_file)
    if max_new_tokens is not None:
        check_max_new_tokens(max_new_tokens, where="--max-new-tokens")
    pipe = Pipeline.from_yaml(pipeline, overrides=overrides, host=host_of(ctx))
    stream = None if (no_stream or as_json) else (lambda piece: console.print(piece, end="", markup=False,
                                                                             highlight=False))
    refused: list[RefusedRequest] = []
    if batch_size > 1:
        check_batch_support(pipe, batch_size)
        results, refused, wall_s = _decode_batch(pipe, texts, max_new_tokens, seed, batch_size)
        if stream is not None:
            for result in results:
                console.rule(f"[bold]{escape(pipe.config.name)}[/bold]")
                console.print(result.text or "", markup=False, highlight=False)
    else:
        results, wall_s = [], None
        for text in texts:
            if stream is not None:
                console.rule(f"[bold]{escape(pipe.config.name)}[/bold]")
            results.append(pipe.generate(text, max_new_tokens, seed=seed, stream=stream))
            if stream is not None:
                console.print()
    report: dict = {"pipeline": pipe.config.name, "config_hash": pipe.config_hash,
                    "results": [r.as_dict() for r in results]}
    lines = [_summary_line(pipe.config.name, results, wall_s)]
    if compare_ar:
        ar = ar_baseline(pipe, "plain decoding", source=str(pipeline))
        if batch_size > 1:
            kept = [t for i, t in enumerate(texts) if i not in {r.index for r in refused}]
            baseline, _, base_wall = _decode_batch(ar, kept, max_new_tokens, seed, batch_size)
        else:
            baseline, base_wall = [ar.generate(text, max_new_tokens, seed=seed) for text in texts], None
        same = [b.tokens == r.tokens for b, r in zip(baseline, results, strict=True)]
        if wall_s is None or base_wall is None:
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
        lines.append(_summary_line("plain decoding", baseline, base_wall))
        exact = "identical" if all(same) else f"DIFFERENT in {same.count(False)} of {len(same)}"
        lines.append(f"speedup over plain decoding: {speedup:.2f}x | outputs {exact}{_exactness_note(pipe)}")
        kept = [t for i, t in enumerate(texts) if i not in {r.index for r in refused}]
        report.update(_compare_generate(pipe, kept, results, baseline, wall_s, base_wall, seed, lines))
    if refused:
        report["refused"] = [{"request": r.index, "error": r.error.message} for r in refused]
    if as_json:
        emit_json(report)
    else:
        for line in lines:
            err_console.print(line, highlight=False, markup=False)
    if refused:
        raise GenerationError(f"{len(refused)} of {len(texts)} requests refused:\n  "
                              + "\n  ".join(str(r) for r in refused),
                              hint="the other requests were decoded; shorten the refused prompts")


def _exactness_note(pipe: Pipeline) -> str:
    """What equal outputs mean for this pipeline: guaranteed at temperature 0 in float32, likely in bf16."""
    if pipe.config.sampling.temperature != 0:
        return ""
    dtype = str(getattr(pipe.target, "dtype", "float32")).removeprefix("torch.")
    if dtype in ("float32", "float64"):
        return " (expected at temperature 0)"
    return (f" (at temperature 0 in {dtype}: likely, not guaranteed; a many-token verify and a one-token forward "
            "round differently, see docs/pipelines.md)")


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
                                        seed=pipe.config.seed if seed is None else seed)
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
    lines.append(f"speedup over transformers' generate(): {speedup:.2f}x | plain decoding against generate(): "
                 f"{plain:.2f}x{exact} ({kernels})")
    return {"generate": [g.summary() for g in runs], "generate_kernels": kernels, "speedup_vs_generate": speedup,
            "plain_vs_generate": plain, "identical_to_generate": same}


def _decode_batch(pipe: Pipeline, texts: list[str], max_new_tokens: int | None, seed: int | None,
                  batch_size: int) -> tuple[list[GenerationResult], list[RefusedRequest], float]:
    """Decoded results (in prompt order), the requests refused on their own, and the wall time in seconds."""
    from specframe.batch_decode import RefusedRequest

    start = time.perf_counter()
    outcomes = pipe.generate_batch(texts, max_new_tokens, seed=seed, batch_size=batch_size)
    wall_s = time.perf_counter() - start
    results = [o for o in outcomes if isinstance(o, GenerationResult)]
    return results, [o for o in outcomes if isinstance(o, RefusedRequest)], wall_s
