"""``specframe run``: decode prompts with a pipeline, stream the text, print τ, rounds and tokens/s.

With ``--compare-ar`` the same target decodes the same prompts with the autoregressive baseline that
``bench`` uses (:func:`specframe.builtin.baseline.ar_baseline`) in the same process;
the summary then gives the speedup and whether the greedy outputs are identical.

With ``--batch-size N`` (N > 1) the prompts decode in one batched loop, up to N at a time
(`specframe.batch_decode`); texts are printed as each request ends. With either batch size, a prompt that
cannot be decoded (longer than the target's context, empty) is refused on its own: the others are decoded,
the JSON report lists every result and every refusal, and the command then exits with status 2 naming the
refused prompts. Every result and refusal carries its request index (the position among all prompts given)
and its source: ``--prompt #k`` or ``FILE:LINE``, the line of the prompts file (blank lines count).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from specframe.builtin.baseline import ar_baseline
from specframe.cli_output import console, emit_json, err_console, host_of
from specframe.config.bounds import check_max_new_tokens
from specframe.errors import GenerationError
from specframe.files.prompts import read_numbered_prompts
from specframe.files.read import check_strings
from specframe.metrics.acceptance import tau_pooled
from specframe.metrics.records import GenerationResult
from specframe.metrics.speedup import PairedRun, aggregate_speedup
from specframe.seeds import MAX_SEED

if TYPE_CHECKING:
    from specframe.batch_decode import RefusedRequest
    from specframe.pipeline import Pipeline


def _read_prompts(prompts: tuple[str, ...], prompts_file: Path | None) -> list[tuple[str, str]]:
    """``(source, prompt)`` pairs: ``--prompt #k`` for the options, ``FILE:LINE`` for the prompts file."""
    check_strings(list(prompts), where="--prompt", error=GenerationError)
    out = [(f"--prompt #{k}", text) for k, text in enumerate(prompts, start=1)]
    if prompts_file is not None:
        out += [(f"{prompts_file}:{line}", text) for line, text in read_numbered_prompts(prompts_file)]
    if not out:
        raise GenerationError("no prompt given", hint='use --prompt "..." or --prompts-file FILE')
    return out


@dataclass(frozen=True)
class _Refusal:
    """A prompt refused on its own (the others are decoded)."""

    index: int
    source: str
    error: GenerationError

    def __str__(self) -> str:
        return f"request {self.index}: {self.source}: {self.error.message}"


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
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=None,
              help="Seed of the request's random streams (0 to 2**63 - 1).")
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

    sourced = _read_prompts(prompts, prompts_file)
    texts = [text for _, text in sourced]
    if max_new_tokens is not None:
        check_max_new_tokens(max_new_tokens, where="--max-new-tokens")
    pipe = Pipeline.from_yaml(pipeline, overrides=overrides, host=host_of(ctx))
    stream = None if (no_stream or as_json) else (lambda piece: console.print(piece, end="", markup=False,
                                                                             highlight=False))
    refused: list[_Refusal] = []
    if batch_size > 1:
        check_batch_support(pipe, batch_size)
        decoded, batch_refused, wall_s = _decode_batch(pipe, texts, max_new_tokens, seed, batch_size)
        refused = [_Refusal(r.index, sourced[r.index][0], r.error) for r in batch_refused]
        if stream is not None:
            for _, result in decoded:
                console.rule(f"[bold]{escape(pipe.config.name)}[/bold]")
                console.print(result.text or "", markup=False, highlight=False)
    else:
        decoded, wall_s = [], None
        for index, (source, text) in enumerate(sourced):
            try:  # a request the target cannot take is refused alone; the others are still decoded
                pipe.request_inputs(text, max_new_tokens, None, chat=None)
                if stream is not None:
                    console.rule(f"[bold]{escape(pipe.config.name)}[/bold]")
                decoded.append((index, pipe.generate(text, max_new_tokens, seed=seed, stream=stream)))
            except GenerationError as exc:
                refused.append(_Refusal(index, source, exc))
                continue
            if stream is not None:
                console.print()
    results = [result for _, result in decoded]
    report: dict = {"pipeline": pipe.config.name, "config_hash": pipe.config_hash,
                    "results": [{"request": i, "source": sourced[i][0], **r.as_dict()} for i, r in decoded]}
    lines = [_summary_line(pipe.config.name, results, wall_s)] if results else []
    if compare_ar and results:
        ar = ar_baseline(pipe, "plain decoding", source=str(pipeline))
        kept = [texts[i] for i, _ in decoded]
        if batch_size > 1:
            baseline, _, base_wall = _decode_batch(ar, kept, max_new_tokens, seed, batch_size)
            baseline_results = [b for _, b in baseline]
        else:
            baseline_results, base_wall = [ar.generate(text, max_new_tokens, seed=seed) for text in kept], None
        same = [b.tokens == r.tokens for b, r in zip(baseline_results, results, strict=True)]
        if wall_s is None or base_wall is None:
            speedup = aggregate_speedup([PairedRun(tokens=len(r.tokens), seconds=r.total_ns / 1e9,
                                                   base_tokens=len(b.tokens), base_seconds=b.total_ns / 1e9)
                                         for r, b in zip(results, baseline_results, strict=True)])
        else:  # a batch's requests overlap in time: compare the batches' wall times
            speedup = aggregate_speedup([PairedRun(tokens=sum(len(r.tokens) for r in results), seconds=wall_s,
                                                   base_tokens=sum(len(b.tokens) for b in baseline_results),
                                                   base_seconds=base_wall)])
        report["baseline"] = [b.summary() for b in baseline_results]
        report["speedup"] = speedup
        report["identical_to_ar"] = same
        lines.append(_summary_line("plain decoding", baseline_results, base_wall))
        exact = "identical" if all(same) else f"DIFFERENT in {same.count(False)} of {len(same)}"
        lines.append(f"speedup over plain decoding: {speedup:.2f}x | outputs {exact}"
                     + (" (expected at temperature 0)" if pipe.config.sampling.temperature == 0 else ""))
    if refused:
        report["refused"] = [{"request": r.index, "source": r.source, "error": r.error.message} for r in refused]
    if as_json:
        emit_json(report)
    else:
        for line in lines:
            err_console.print(line, highlight=False, markup=False)
    if refused:
        raise GenerationError(f"{len(refused)} of {len(texts)} requests refused:\n  "
                              + "\n  ".join(str(r) for r in refused),
                              hint="the other requests were decoded; shorten the refused prompts")


def _decode_batch(pipe: Pipeline, texts: list[str], max_new_tokens: int | None, seed: int | None,
                  batch_size: int) -> tuple[list[tuple[int, GenerationResult]], list[RefusedRequest], float]:
    """(request index, result) of the decoded requests in prompt order, the requests refused on their own, and
    the wall time in seconds."""
    from specframe.batch_decode import RefusedRequest

    start = time.perf_counter()
    outcomes = pipe.generate_batch(texts, max_new_tokens, seed=seed, batch_size=batch_size)
    wall_s = time.perf_counter() - start
    refused = [o for o in outcomes if isinstance(o, RefusedRequest)]
    gone = {r.index for r in refused}
    indices = [i for i in range(len(texts)) if i not in gone]
    results = [o for o in outcomes if isinstance(o, GenerationResult)]
    return list(zip(indices, results, strict=True)), refused, wall_s
