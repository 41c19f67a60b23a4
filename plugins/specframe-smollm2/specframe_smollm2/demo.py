"""``specframe demo``: every method on a few math, code and chat prompts with the shipped SmolLM2 drafters.

Steps: make sure the target is converted (``setup-target``); load it once; run plain decoding first (the speedup
denominator, measured in the same process), then transformers' own ``generate()`` on the same model for the same
prompts and token counts (:mod:`specframe.reference`: default kernels, the unmodified model), then each method's
pipeline file from ``examples/smollm2`` on the same prompts; stream the default pipeline's text (DARTree pruned)
last; print one table with τ, tokens/s, each method's speedup over plain decoding, the plain loop's over
``generate()``, whether every greedy output equals plain decoding's, and each stage's share of round time; then
the two gains apart, each with its 95 % bootstrap interval over the prompts and the prompt count
(:mod:`specframe.metrics.gains`: the plain loop against ``generate()``, speculation against the plain loop; their
product is never quoted). Each
request's machine load is sampled (:mod:`specframe.metrics.machine_load`); when other processes loaded the machine
during a method's requests, the demo says so under the table, since its speeds then mean little.

Example output row::

    dartree-pruned   τ 2.41   9.8 tok/s   1.12x [0.98, 1.31]   -   exact   draft 21% build 9% prune 1% target 63% ...
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from specframe.errors import CheckpointError
from specframe.files import write_text
from specframe.metrics.gains import KERNEL_HEADING, SPECULATION_HEADING, estimate_to_json, paired_gain
from specframe.metrics.machine_load import CONTENDED_OTHER_CPUS, LoadWindow, MachineLoad
from specframe.metrics.records import STAGES, GenerationResult
from specframe.reference import supports_reference

#: Methods in table order: (label, pipeline file under examples/smollm2).
METHODS: list[tuple[str, str]] = [
    ("plain decoding", "plain.yaml"),
    ("prompt-lookup chain", "prompt-lookup-chain.yaml"),
    ("DFlash chain", "dflash-chain.yaml"),
    ("DDTree", "ddtree.yaml"),
    ("Domino chain", "domino-chain.yaml"),
    ("Domino-chain + DDTree", "domino-chain-ddtree.yaml"),
    ("DSpark chain", "dspark-chain.yaml"),
    ("DARTree fixed", "dartree-fixed.yaml"),
    ("DARTree pruned B=16", "dartree-pruned-b16.yaml"),
    ("DARTree pruned", "dartree-pruned.yaml"),
    ("path selector chain", "path-selector-chain.yaml"),
    ("path selector DARTree", "path-selector-dartree.yaml"),
]
DEFAULT_METHOD = "DARTree pruned"
#: The bf16 rows, run on machines where bf16 is native and plain bf16 decoding measures faster than float32.
BF16_METHODS: list[tuple[str, str]] = [
    ("plain decoding (bf16)", "plain-bf16.yaml"),
    ("prompt-lookup chain (bf16)", "prompt-lookup-chain-bf16.yaml"),
    ("DARTree pruned B=16 (bf16)", "dartree-pruned-b16-bf16.yaml"),
    ("DARTree pruned (bf16)", "dartree-pruned-bf16.yaml"),
]
#: Row label of transformers' generate() (the reference, run right after plain decoding).
GENERATE_LABEL = "transformers generate()"
QUICK_METHODS = ("plain decoding", "DFlash chain", "DARTree pruned B=16", "DARTree pruned", "path selector DARTree")

#: Demo prompts of different kinds, written for the demo (not from any benchmark or the training templates).
PROMPTS: list[tuple[str, str]] = [
    ("math", "A bakery sells muffins for $3 each and cookies for $1.25 each. Jenna buys 4 muffins and 6 "
             "cookies. How much does she spend? Explain step by step."),
    ("code", "Write a Python function that returns the list of prime numbers below n using the sieve of "
             "Eratosthenes."),
    ("chat", "What are three good habits for staying healthy while working at a desk all day?"),
]


def idle_cores() -> int:
    """CPU cores other processes leave idle: all cores minus the 1-minute load average, at least one.

    Measured on the development machine (2 cores, SmolLM2-135M, oneDNN linears): on a quiet machine 2 threads
    make a 1-token forward 1.15x and a 17-token verify 1.46x faster than 1 thread; with another job on the cores
    2 threads ran small forwards several times slower, so the demo takes only the idle cores.
    """
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        return cores
    return max(1, min(cores, round(cores - load)))


def repo_root() -> Path:
    """The repository holding ``examples/`` and ``checkpoints/`` (this package is installed editable)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "examples" / "smollm2").is_dir():
            return parent
    return Path.cwd()


@dataclass
class MethodRun:
    label: str
    results: list[GenerationResult] = field(default_factory=list)
    loads: list[MachineLoad] = field(default_factory=list)  # one per request
    note: str = ""  # how it ran (the generate() reference's kernels)

    @property
    def machine_load(self) -> MachineLoad | None:
        return MachineLoad.merge(self.loads)

    @property
    def tokens(self) -> int:
        return sum(len(r.tokens) for r in self.results)

    @property
    def seconds(self) -> float:
        return sum(r.total_ns for r in self.results) / 1e9

    @property
    def tau(self) -> float:
        rounds = sum(r.num_rounds for r in self.results)
        return sum(sum(r.accept_lengths()) for r in self.results) / rounds if rounds else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def budget_summary(self) -> str:
        """The verified tree size: a fixed budget's mean, or auto's mean choice and its share of plain rounds."""
        rounds = [r for res in self.results for r in res.rounds]
        if not rounds:
            return "-"
        drafted = [r for r in rounds if r.drafted]
        mean = sum(r.nodes for r in drafted) / len(drafted) if drafted else 0.0
        if all(r.budget is None and r.drafted for r in rounds):
            return f"{mean:.1f}"
        return f"auto {mean:.1f}, {100 * (len(rounds) - len(drafted)) / len(rounds):.0f}% plain"

    def stage_shares(self) -> dict[str, float]:
        totals = {s: 0 for s in STAGES}
        for r in self.results:
            for k, v in r.stage_totals().items():
                totals[k] = totals.get(k, 0) + v
        whole = sum(totals.values()) or 1
        return {k: v / whole for k, v in totals.items()}


def _check_checkpoints(root: Path) -> None:
    ckpts = Path(os.environ.get("SPECFRAME_CHECKPOINTS", root / "checkpoints" / "smollm2-135m"))
    missing = [d for d in ("drafter", "ar-head", "markov-head", "path-selector")
               if not (ckpts / d / "config.json").is_file()]
    if missing:
        raise CheckpointError(f"the shipped drafter checkpoints {', '.join(missing)} are missing under {ckpts}",
                              hint="run the demo from a clone of the repository, or set SPECFRAME_CHECKPOINTS")
    os.environ.setdefault("SPECFRAME_CHECKPOINTS", str(ckpts))


def run_methods(methods: list[tuple[str, str]], prompts: list[tuple[str, str]], *, max_new_tokens: int,
                stream_label: str | None, console: Console) -> dict[str, MethodRun]:
    """Run every method on every prompt with one shared target (plain decoding must come first)."""
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    root = repo_root()
    host = PluginHost()
    plain = Pipeline.from_yaml(root / "examples" / "smollm2" / methods[0][1], host=host)
    target = plain.target
    plain.generate(prompts[0][1], 4)  # warm-up (first-call allocations)
    runs: dict[str, MethodRun] = {}
    for label, file in methods:
        pipe = plain if file == methods[0][1] else Pipeline.from_yaml(root / "examples" / "smollm2" / file,
                                                                       target=target, host=host)
        run = MethodRun(label)
        streaming = label == stream_label
        if streaming:
            console.rule(f"[bold]{label}[/bold] ({file}), streaming")
        for kind, text in prompts:
            if streaming:
                console.print(f"\n[bold]{kind}>[/bold] {text}\n", highlight=False)
            stream = (lambda piece: console.print(piece, end="", markup=False, highlight=False)) if streaming \
                else None
            with LoadWindow() as window:
                run.results.append(pipe.generate(text, max_new_tokens, stream=stream))
            if window.load is not None:
                run.loads.append(window.load)
            if streaming:
                console.print()
        if not streaming:
            console.print(f"  {label:<24} τ {run.tau:5.2f}  {run.tokens_per_s:6.2f} tok/s", highlight=False)
        runs[label] = run
        if pipe is plain and supports_reference(plain):
            runs[GENERATE_LABEL] = run_generate(plain, prompts, run)
            console.print(f"  {GENERATE_LABEL:<24} τ  1.00  {runs[GENERATE_LABEL].tokens_per_s:6.2f} tok/s",
                          highlight=False)
    return runs


def bf16_pays(prompt: str, console: Console, *, tokens: int = 24) -> bool:
    """Whether plain decoding in bf16 is faster than in float32 here: bf16 must be native on the device the
    pipelines run on (CPU flags, or the GPU), then the two are timed on ``prompt`` (best of two runs each, one
    shared process). Says what it found."""
    from specframe.config.validate import load_pipeline_config
    from specframe.metrics.machine_info import cpu_model, native_bf16
    from specframe.pipeline import Pipeline
    from specframe.placement import resolve_device
    from specframe.plugins import PluginHost

    root, host = repo_root() / "examples" / "smollm2", PluginHost()
    config, _ = load_pipeline_config(str(root / "plain.yaml"), host=host)  # no model is loaded to learn the device
    device = resolve_device(config.target.device, field="target.device")
    if not native_bf16(device):
        where = f"this CPU ({cpu_model()})" if device.type == "cpu" else f"the device {device}"
        console.print(f"bf16: not native on {where}: the demo runs in float32 only", style="dim", highlight=False)
        return False
    speeds = {}
    for name in ("plain.yaml", "plain-bf16.yaml"):
        pipe = Pipeline.from_yaml(root / name, host=host)
        pipe.generate(prompt, 4)
        speeds[name] = max(pipe.generate(prompt, tokens).tokens_per_s for _ in range(2))
    pays = speeds["plain-bf16.yaml"] > 1.05 * speeds["plain.yaml"]
    console.print(f"bf16 is native on {device}: plain decoding {speeds['plain-bf16.yaml']:.1f} tok/s in bf16 "
                  f"against {speeds['plain.yaml']:.1f} in float32: {'running' if pays else 'skipping'} the bf16 "
                  "rows", style="dim", highlight=False)
    return pays


def run_generate(plain: Any, prompts: list[tuple[str, str]], plain_run: MethodRun) -> MethodRun:
    """transformers' ``generate()`` on each prompt for as many tokens as plain decoding produced."""
    from specframe.reference import reference_result

    run = MethodRun(GENERATE_LABEL)
    for (_, text), done in zip(prompts, plain_run.results, strict=True):
        with LoadWindow() as window:
            result, run.note = reference_result(plain, plain.encode(text), new_tokens=len(done.tokens),
                                                seed=done.seed or 0)  # plain decoding's own seed
        run.results.append(result)
        if window.load is not None:
            run.loads.append(window.load)
    return run


def results_table(runs: dict[str, MethodRun], baseline: str,
                  title: str = "SmolLM2-135M-Instruct, greedy, same prompts and process") -> tuple[Table, list[dict]]:
    """The table and its JSON rows. Every method's speedup is over the plain loop (``speedup``, with its interval
    over the prompts); only the plain loop's row is compared with ``generate()`` (``speedup_vs_generate``), so no
    cell multiplies the two gains (:mod:`specframe.metrics.gains`)."""
    base = runs[baseline]
    generate = runs.get(GENERATE_LABEL)
    table = Table(title=title, title_justify="left")
    for col in ("method", "τ", "tok/s", "vs plain loop [95% CI]", "plain loop vs generate()", "greedy = plain",
                "verified nodes", *STAGES):
        table.add_column(col, justify="right" if col != "method" else "left")
    rows = []
    for label, run in runs.items():
        exact = all(a.tokens == b.tokens for a, b in zip(run.results, base.results, strict=True))
        versus_plain = paired_gain(run.results, base.results)
        versus_generate = paired_gain(run.results, generate.results) \
            if generate is not None and label in (baseline, GENERATE_LABEL) else None
        shares = run.stage_shares()
        rows.append({"method": label, "tau": round(run.tau, 3), "tokens_per_s": round(run.tokens_per_s, 3),
                     "speedup": round(versus_plain.value, 3), "speedup_interval": estimate_to_json(versus_plain),
                     "speedup_vs_generate": None if versus_generate is None else round(versus_generate.value, 3),
                     "vs_generate_interval": None if versus_generate is None else estimate_to_json(versus_generate),
                     "exact": exact, "verified_nodes": run.budget_summary(),
                     "stage_share": {k: round(v, 4) for k, v in shares.items()},
                     "per_prompt_tau": [round(r.tau, 3) for r in run.results],
                     "machine_load": None if run.machine_load is None else run.machine_load.to_dict()})
        table.add_row(label, f"{run.tau:.2f}", f"{run.tokens_per_s:.2f}",
                      "-" if label == GENERATE_LABEL else versus_plain.format(suffix="x"),
                      "-" if versus_generate is None else f"{versus_generate.value:.2f}x",
                      "yes" if exact else "[red]NO[/red]", run.budget_summary(),
                      *(f"{100 * shares[s]:.0f}%" for s in STAGES))
    return table, rows


def gains_footnote(runs: dict[str, MethodRun], baseline: str) -> list[str]:
    """The two gains of this run, apart: the plain loop against ``generate()`` and each method against the plain
    loop, with their intervals and prompt counts."""
    base = runs[baseline]
    prompts = len(base.results)
    lines = [f"Where the speed comes from (this run, {prompts} prompts, 95% bootstrap intervals over prompts; "
             "the two gains multiply, so they are quoted apart):"]
    generate = runs.get(GENERATE_LABEL)
    if generate is not None:
        lines.append(f"  {KERNEL_HEADING}: {paired_gain(base.results, generate.results).format(suffix='x')} "
                     f"(same model, prompts and token counts; the loop and its linear kernels; {generate.note})")
    else:
        lines.append(f"  {KERNEL_HEADING}: not measured (this target has no generate())")
    methods = [label for label in runs if label not in (baseline, GENERATE_LABEL)]
    lines.append(f"  {SPECULATION_HEADING}: " + "; ".join(
        f"{label} {paired_gain(runs[label].results, base.results).format(suffix='x')}" for label in methods))
    return lines


def contention_warning(runs: dict[str, MethodRun]) -> str | None:
    """A warning naming the methods measured while other processes loaded the machine, or None."""
    hit = {label: load for label, run in runs.items()
           if (load := run.machine_load) is not None and load.contended}
    if not hit:
        return None
    detail = ", ".join(f"{label} ({load.other_cpus:.2f} cores)" if load.other_cpus is not None else label
                       for label, load in hit.items())
    return (f"warning: other processes kept more than {CONTENDED_OTHER_CPUS:g} of a core busy while these methods "
            f"ran: {detail}; their tokens/s and speedups are not reliable. Rerun on a quiet machine "
            "(check `uptime` first).")


def run_demo(*, max_new_tokens: int | None = None, quick: bool = False, json_out: Path | None = None) -> list[dict]:
    from specframe_smollm2.convert import convert_target

    console = Console(width=None if sys.stdout.isatty() else 160, emoji=False)
    convert_target(log=lambda m: console.print(m, style="dim", markup=False, highlight=False))
    _check_checkpoints(repo_root())
    methods = [m for m in METHODS if not quick or m[0] in QUICK_METHODS]
    # The default pipeline runs last, so the demo ends with its streamed text and then the table.
    methods = [m for m in methods if m[0] != DEFAULT_METHOD] + [m for m in methods if m[0] == DEFAULT_METHOD]
    prompts = PROMPTS[:2] if quick else PROMPTS
    console.print(f"[bold]specframe demo[/bold]: {len(methods)} methods x {len(prompts)} prompts "
                  f"({', '.join(k for k, _ in prompts)}), {max_new_tokens or 64} new tokens each")
    runs = run_methods(methods, prompts, max_new_tokens=max_new_tokens or 64, stream_label=DEFAULT_METHOD,
                       console=console)
    table, rows = results_table(runs, METHODS[0][0])
    console.print()
    console.print(table)
    inexact = [r["method"] for r in rows if not r["exact"]]
    if inexact:
        console.print(f"[red]outputs differ from plain decoding for: {', '.join(inexact)}[/red]")
    else:
        console.print("every greedy output equals plain decoding's, token for token")
    warning = contention_warning(runs)
    if warning:
        console.print(warning, style="bold yellow", highlight=False)
    for line in gains_footnote(runs, METHODS[0][0]):
        console.print(line, highlight=False, markup=False)
    console.print("on CPUs a q-token verify costs far more "
                  "than one decode step, so passing 1.0x needs a high τ. DARTree pruned uses budget: auto: each "
                  "round it verifies the subtree that pays on this machine's measured verify cost (verified "
                  "nodes: mean per drafted round, and the share of rounds decoded plainly because drafting did "
                  "not pay); `specframe profile` prints that cost", style="dim")
    if not quick and bf16_pays(prompts[0][1], console):
        bf16_runs = run_methods(BF16_METHODS, prompts, max_new_tokens=max_new_tokens or 64, stream_label=None,
                                console=console)
        bf16_table, bf16_rows = results_table(bf16_runs, BF16_METHODS[0][0], title="the same in bfloat16 (speedups "
                                              "and equality against plain bf16 decoding and bf16 generate())")
        console.print(bf16_table)
        console.print("in bf16 a many-token verify and a one-token forward round differently, so greedy outputs "
                      "equal plain bf16 decoding's almost always, not always (docs/pipelines.md)", style="dim")
        rows += [{**row, "precision": "bfloat16"} for row in bf16_rows]
    if json_out is not None:
        from specframe.metrics.machine_info import machine_summary

        report = {"machine": machine_summary(), "max_new_tokens": max_new_tokens or 64, "quick": quick,
                  "prompts": [kind for kind, _ in prompts], "rows": rows}
        write_text(json_out, json.dumps(report, indent=2) + "\n", what="--json-out file")
    return rows
