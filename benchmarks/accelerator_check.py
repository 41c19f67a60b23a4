"""The accelerator check: specframe's device path on one GPU in under ten minutes, summarised as one JSON object.

specframe is developed and tested on CPUs; this script is what checks the accelerator path. It runs, on
``--device`` (default ``cuda``), these steps in this order (``--steps`` picks some, so a lent machine's time can be
split between calls):

1. ``tiny_overhead``: the loop-overhead benchmark on the device (``benchmarks/loop_overhead.py --device``) with the
   tiny random pair at batch 1, 8 and 32: a round's target forward, drafter forward and everything else. It needs no
   checkpoint, so it runs first: a GPU's round is where the framework's cost matters most;
2. ``demo``: greedy exactness in float32: every SmolLM2 method of the demo (``examples/smollm2``; ``--methods``
   picks some) against plain decoding through the same loop, and plain decoding against the target's own
   ``generate()``, with the demo table: τ, tokens/s, speedup over plain decoding, per-stage share of round time
   (stage clocks synchronise the device), and the host synchronisations per round, counted twice: by specframe's
   ``HostSyncCounter`` (the same count on every device) and, on CUDA, by ``torch.cuda.set_sync_debug_mode``;
3. ``split``: the drafter and its head on the CPU with the target on the device (greedy output unchanged);
4. ``sampled``: a sampled run at T = 1 (DARTree, fixed budget): the same seed twice gives the same tokens, another
   seed not necessarily (reported);
5. ``shipped_overhead``: the loop-overhead benchmark with the shipped pair at batch 1 and 4;
6. ``captured``: the captured verify step (``target: {capture: reduce-overhead}``, :mod:`specframe_hf.captured`):
   64 requests through 8 rows of a tiny random Llama (16 in a smoke run), verify rounds at bucketed shapes compiled
   with ``torch.compile(fullgraph=True, dynamic=False, mode="reduce-overhead")`` (CUDA graphs) on CUDA; on a CPU
   dynamo's capture only (``backend="eager"``: inductor's code generation takes minutes there). Reported: greedy
   outputs equal to the per-row forward's, graphs compiled against buckets met (at most one each), seconds of
   both runs;
7. ``trees``: the tree-construction benchmark on the device (``benchmarks/tree_construction.py --device``; the paper
   reports about 70 ms for the sequential heap vs 28 ms depth-wise for its Qwen3 head).

Each step is written to ``--out`` as soon as it ends and a step that fails is recorded with its error while the
others still run, so a run cut short, or broken by one device-only bug, still returns what it measured. It prints
the JSON summary at the end; the exit status is 1 if any step failed or any output differs. ``--smoke`` (alias
``--quick``) is a smoke run (two methods, one prompt, few tokens, the benchmarks' own smoke sizes) that also works
on a CPU; ``make test`` runs ``--device cpu --smoke`` end to end, so every step's code runs on each change.

Usage::

    python benchmarks/accelerator_check.py --out docs/benchmarks/accelerator/h100.json
    .venv/bin/python benchmarks/accelerator_check.py --device cpu --smoke --out /tmp/check.json   # smoke
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import loop_overhead
import torch
import tree_construction
from _frame import BenchParser, count, name_list, run_script
from specframe_smollm2.demo import METHODS, PROMPTS, _check_checkpoints, repo_root

from specframe.device_sync import HostSyncCounter
from specframe.files import write_text
from specframe.metrics.records import STAGES, GenerationResult
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost

QUICK_METHODS = ("plain decoding", "DARTree pruned B=16")
#: The steps, in the order they run: the tiny pair's loop overhead first (it needs no checkpoint), then the shipped
#: pair's demo methods, the split devices and the seeded sample, its loop overhead, the captured verify step (a tiny
#: random model), and the tree construction.
STEPS = ("tiny_overhead", "demo", "split", "sampled", "shipped_overhead", "captured", "trees")
SAMPLED_METHOD = "DARTree pruned B=16"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (the check) or cpu (a smoke run of the script)")
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_smoke("two methods, one prompt, 12 tokens, the tree benchmark's smoke run")
    ap.add_argument("--methods", type=name_list([label for label, _ in METHODS]), default=None,
                    help="comma-separated demo methods to run (default: all; plain decoding always runs first)")
    ap.add_argument("--steps", type=name_list(STEPS), default=list(STEPS),
                    help="comma-separated steps to run, in the fixed order: " + ", ".join(STEPS)
                    + " (default: all; a lent GPU's time can be split between calls)")
    ap.add_argument("--tree-rounds", type=count(), default=30, help="timed rounds of the tree-construction benchmark")
    ap.add_output("runs/accelerator_check.json")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error(f"argument --device: {args.device}: no CUDA device here; run on a GPU machine, or --device cpu "
                 "--smoke for a smoke run")
    return args


def load_target(device: str) -> Any:
    """SmolLM2-135M-Instruct in float32 on ``device`` (converted into the cache once)."""
    from specframe_hf.target import HFTarget
    from specframe_smollm2.convert import convert_target

    directory = convert_target(log=lambda m: print(m, file=sys.stderr))
    return HFTarget.from_pretrained(str(directory), dtype="float32", device=device, attn="sdpa")


def count_syncs(pipe: Pipeline, prompt: str, max_new: int, device: str) -> dict[str, float]:
    """Host synchronisations per round of one request (specframe's counter; CUDA's own where it runs)."""
    counted: dict[str, float] = {}
    with HostSyncCounter() as counter:
        result = pipe.generate(prompt, max_new)
    rounds = max(result.num_rounds, 1)
    counted["host_syncs_per_round"] = round(counter.total / rounds, 2)
    counted["host_syncs_by_op"] = dict(counter.by_op)  # type: ignore[assignment]
    if device.startswith("cuda"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                result = pipe.generate(prompt, max_new)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        cuda_syncs = sum("synchronizing" in str(w.message).lower() for w in caught)
        counted["cuda_syncs_per_round"] = round(cuda_syncs / max(result.num_rounds, 1), 2)
    return counted


def summarize_method(label: str, results: list[GenerationResult], plain: list[GenerationResult] | None
                     ) -> dict[str, Any]:
    tokens = sum(len(r.tokens) for r in results)
    seconds = sum(r.total_ns for r in results) / 1e9
    rounds = [x for r in results for x in r.rounds]
    totals = {s: sum(x.stage_ns.get(s, 0) for x in rounds) for s in STAGES}
    whole = sum(totals.values()) or 1
    row: dict[str, Any] = {
        "method": label,
        "tau": round(sum(x.committed for x in rounds) / max(len(rounds), 1), 3),
        "tokens_per_s": round(tokens / seconds, 2) if seconds else 0.0,
        "round_ms": round(sum(totals.values()) / max(len(rounds), 1) / 1e6, 3),
        "stage_share": {s: round(v / whole, 4) for s, v in totals.items()},
        "stage_ms_per_round": {s: round(v / max(len(rounds), 1) / 1e6, 3) for s, v in totals.items()},
    }
    if plain is not None:
        row["exact"] = all(a.tokens == b.tokens for a, b in zip(results, plain, strict=True))
    return row


def run_methods(args: argparse.Namespace, target: Any, host: PluginHost
                ) -> tuple[list[dict[str, Any]], bool, list[int]]:
    """The demo's methods on the prompts: rows of the table, whether all are exact, plain decoding's first output."""
    root = repo_root() / "examples" / "smollm2"
    chosen = args.methods or (QUICK_METHODS if args.smoke else [label for label, _ in METHODS])
    methods = [m for m in METHODS if m[0] == METHODS[0][0] or m[0] in chosen]
    prompts = PROMPTS[:1] if args.smoke else PROMPTS
    timing = ["metrics.stage_timing=true"]
    plain_pipe = Pipeline.from_yaml(root / methods[0][1], target=target, host=host, overrides=timing)
    plain_pipe.generate(prompts[0][1], 4)  # warm-up (allocations, kernel selection)
    plain = [plain_pipe.generate(text, args.max_new_tokens) for _, text in prompts]
    # Plain decoding through the loop equals the target's own generate() (greedy, float32).
    own = []
    for _, text in prompts:
        ids = plain_pipe.encode(text).to(target.device)
        out = target.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.max_new_tokens,
                                    do_sample=False, pad_token_id=target.eos_token_ids[0] if target.eos_token_ids
                                    else None)
        own.append(out[0, ids.shape[1]:].tolist())
    rows = [{**summarize_method(methods[0][0], plain, plain),
             "equals_hf_generate": all(r.tokens == o[: len(r.tokens)] for r, o in zip(plain, own, strict=True)),
             **count_syncs(plain_pipe, prompts[0][1], args.max_new_tokens, args.device)}]
    for label, file in methods[1:]:
        try:
            pipe = Pipeline.from_yaml(root / file, target=target, host=host, overrides=timing)
            pipe.generate(prompts[0][1], 4)  # warm-up (and `budget: auto`'s cost profile on this device)
            results = [pipe.generate(text, args.max_new_tokens) for _, text in prompts]
        except Exception as error:  # one method failing is reported; the others still run
            rows.append({"method": label, "exact": False, "tokens_per_s": 0.0,
                         "error": f"{type(error).__name__}: {error}",
                         "traceback": traceback.format_exc().splitlines()[-12:]})
            print(f"{label:<24} FAILED: {type(error).__name__}: {error}", file=sys.stderr)
            continue
        rows.append({**summarize_method(label, results, plain),
                     **count_syncs(pipe, prompts[0][1], args.max_new_tokens, args.device)})
        print(f"{label:<24} τ {rows[-1]['tau']:5.2f}  {rows[-1]['tokens_per_s']:7.2f} tok/s  "
              f"exact {rows[-1]['exact']}  syncs/round {rows[-1]['host_syncs_per_round']}", file=sys.stderr)
    base = rows[0]["tokens_per_s"] or 1.0
    for row in rows:
        row["speedup"] = round(row["tokens_per_s"] / base, 3)
    ok = all(r["exact"] for r in rows) and rows[0]["equals_hf_generate"]
    return rows, ok, plain[0].tokens


def split_devices(args: argparse.Namespace, target: Any, host: PluginHost, plain: list[int]) -> dict[str, Any]:
    """The drafter and its correction head on the CPU, the target on the accelerator: greedy output unchanged."""
    file = dict(METHODS)[SAMPLED_METHOD]
    pipe = Pipeline.from_yaml(repo_root() / "examples" / "smollm2" / file, target=target, host=host,
                              overrides=["drafter.device=cpu", "corrector.device=cpu"])
    tokens = pipe.generate(PROMPTS[0][1], args.max_new_tokens).tokens
    return {"method": SAMPLED_METHOD, "drafter_device": "cpu", "target_device": str(target.device),
            "exact": tokens == plain}


def sampled_determinism(args: argparse.Namespace, target: Any, host: PluginHost) -> dict[str, Any]:
    """T = 1 with the random streams on the device: a seed fixes the output."""
    file = dict(METHODS)[SAMPLED_METHOD]
    pipe = Pipeline.from_yaml(repo_root() / "examples" / "smollm2" / file, target=target, host=host,
                              overrides=["sampling.temperature=1.0"])
    prompt, n = PROMPTS[0][1], min(args.max_new_tokens, 32)
    first, again, other = (pipe.generate(prompt, n, seed=s).tokens for s in (1, 1, 2))
    return {"method": SAMPLED_METHOD, "temperature": 1.0, "same_seed_same_tokens": first == again,
            "other_seed_differs": first != other, "tokens_seed_1": first}


def tree_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """``benchmarks/tree_construction.py`` on the device, in this process (its ``--smoke`` in a smoke run)."""
    size = ["--smoke"] if args.smoke else ["--rounds", str(args.tree_rounds)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tree.json"
        tree_args = tree_construction.parse_args(["--device", args.device, "--threads", "0", *size, "--out", str(out)])
        stdout, sys.stdout = sys.stdout, sys.stderr  # its table goes to stderr: stdout carries the summary
        try:
            tree_construction.run(tree_args)
        finally:
            sys.stdout = stdout
        data = json.loads(out.read_text())
    return {"config": data["config"], "median_ms": {m: round(v["median_ms"], 3) for m, v in data["methods"].items()},
            "ratios": data["ratios"], "paper_qwen3_ms": {"heap_sequential": 70, "dartree": 28}}


def overhead_benchmark(args: argparse.Namespace, models: Sequence[str]) -> dict[str, Any]:
    """``benchmarks/loop_overhead.py`` on the device, tiny pair then shipped pair, in this process: per pipeline and
    batch size, the median round, target, draft and everything-else milliseconds."""
    runs = {"tiny": ["--models", "tiny", "--batch-sizes", "1,2" if args.smoke else "1,8,32"],
            "smollm2": ["--models", "smollm2", "--batch-sizes", "1" if args.smoke else "1,4",
                        "--pipelines", "dflash-chain,ddtree,dartree-auto"]}
    size = ["--smoke"] if args.smoke else ["--repeats", "2"]
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            out = Path(tmp) / f"{name}.json"
            stdout, sys.stdout = sys.stdout, sys.stderr  # its tables go to stderr: stdout carries the summary
            try:
                status = loop_overhead.main([*runs[name], "--device", args.device, "--threads", "0", "--force",
                                             *size, "--out", str(out)])
            finally:
                sys.stdout = stdout
            data = json.loads(out.read_text())
            found[name] = {"status": status, "rows": [
                {"pipeline": r["pipeline"], "batch": r["batch"], "exact": r["exact"],
                 **{k: round(r[k]["median_ms"], 3) for k in ("round", "target", "draft", "else")}}
                for r in data["rows"]]}
    return found


#: The captured step's pipeline: greedy speculative decoding with the prompt-lookup drafter (chains of up to 5 nodes).
CAPTURED_PIPELINE: dict[str, Any] = {
    "drafter": {"type": "ngram", "num_speculative_tokens": 4}, "corrector": {"type": "identity"},
    "tree_builder": {"type": "chain"}, "pruner": {"type": "none"}, "verifier": {"type": "greedy"}, "budget": 4,
    "sampling": {"temperature": 0.0}, "generation": {"stop_at_eos": False}}


def captured_verify(device: str, smoke: bool) -> dict[str, Any]:
    """The captured verify step against the per-row forward on a tiny random Llama: continuous batching of many
    requests of different lengths (rows leave and join, the batch shrinks at the end)."""
    from specframe_hf.target import HFTarget
    from specframe_hf.testing import random_ids, tiny_causal_lm
    from torch._dynamo.utils import counters

    from specframe.decode.request import Request

    model = tiny_causal_lm("llama", seed=0, num_layers=4, max_position_embeddings=512).to(device)
    cuda = device.startswith("cuda")
    mode = "reduce-overhead" if cuda else "compile"
    n = 16 if smoke else 64
    prompts = [Request(random_ids(4 + i % 7, seed=100 + i), max_new_tokens=4 + (5 * i) % 23) for i in range(n)]
    host = PluginHost(allowlist=["hf", "trees", "verifiers"])
    timed: dict[str, float] = {}
    outputs: dict[str, list[list[int]]] = {}
    graphs_before = counters["stats"]["unique_graphs"]
    captured = HFTarget.from_model(model, capture=mode, capture_backend=None if cuda else "eager")
    for name, target in (("per_row", HFTarget.from_model(model)), ("captured", captured)):
        pipe = Pipeline.from_dict(CAPTURED_PIPELINE, target=target, host=host)
        start = time.perf_counter()
        results = pipe.generate_batch(prompts, batch_size=8)
        timed[name] = round(time.perf_counter() - start, 3)
        outputs[name] = [r.tokens for r in results if isinstance(r, GenerationResult)]
    buckets = sorted(captured.bucket_shapes)
    graphs = counters["stats"]["unique_graphs"] - graphs_before
    return {"mode": mode, "backend": "inductor" if cuda else "eager", "requests": n, "batch_size": 8,
            "exact": outputs["captured"] == outputs["per_row"] and len(outputs["captured"]) == n,
            "buckets": [list(b) for b in buckets], "graphs_compiled": graphs, "at_most_once_per_bucket":
            graphs <= len(buckets), "seconds": timed, "note": "the captured run's seconds include compilation"}


def environment(device: str) -> dict[str, Any]:
    env: dict[str, Any] = {"device": device, "torch": torch.__version__, "python": platform.python_version(),
                           "machine": platform.machine()}
    if device.startswith("cuda"):
        env.update(gpu=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                   capability=".".join(map(str, torch.cuda.get_device_capability(device))))
    return env


def run_step(summary: dict[str, Any], name: str, step: Callable[[], Any], out: Path, *, record: bool = True) -> Any:
    """Run one step, record its result (or its error, so the later steps still run) and rewrite the summary file.

    A lent GPU is held for minutes: every step is written as soon as it ends, so a run cut short at its time limit
    still returns what it measured, and one step's failure (a CUDA-only bug, say) does not hide the others.
    """
    start = time.perf_counter()
    try:
        result = step()
    except Exception as error:  # every step is reported, and the next runs
        result = None
        summary.setdefault("errors", {})[name] = {
            "error": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc().splitlines()[-12:]}
        print(f"step {name} FAILED: {type(error).__name__}: {error}", file=sys.stderr)
    summary.setdefault("step_seconds", {})[name] = round(time.perf_counter() - start, 1)
    if result is not None and record:
        summary[name] = result
    write_text(out, json.dumps(summary, indent=2) + "\n", what="accelerator check summary")
    return result


def passed(summary: dict[str, Any]) -> bool:
    """Every step ran and every output is exact (greedy, split devices, the seeded sample, the overhead runs)."""
    if summary.get("errors"):
        return False
    split = summary.get("draft_on_cpu_target_on_device")
    overhead = summary.get("loop_overhead", {})
    greedy = summary.get("greedy_exact_all", "demo" not in summary)
    sampled = summary.get("sampled", {"same_seed_same_tokens": True})
    captured = summary.get("captured_verify", {"exact": True, "at_most_once_per_bucket": True})
    return bool(greedy) and sampled["same_seed_same_tokens"] and (split is None or split["exact"]) \
        and all(run["status"] == 0 for run in overhead.values()) and captured["exact"] \
        and captured["at_most_once_per_bucket"]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        args.max_new_tokens = min(args.max_new_tokens, 12)
    start = time.perf_counter()
    out = Path(args.out)
    summary: dict[str, Any] = {"check": "accelerator", "smoke": args.smoke, "environment": environment(args.device),
                               "max_new_tokens": args.max_new_tokens}
    steps = set(args.steps)
    if "tiny_overhead" in steps:
        run_step(summary, "loop_overhead", lambda: overhead_benchmark(args, ("tiny",)), out)
    host = PluginHost()

    def checked_target() -> Any:
        _check_checkpoints(repo_root())
        return load_target(args.device)

    target = None
    if steps & {"demo", "split", "sampled"}:
        target = run_step(summary, "target", checked_target, out, record=False)
    if target is not None:
        summary["target"] = str(target.device)
        found = None
        if steps & {"demo", "split"}:
            found = run_step(summary, "demo", lambda: run_methods(args, target, host), out, record=False)
        if found is not None:
            summary["demo"], summary["greedy_exact_all"], plain = found
            if args.device != "cpu" and "split" in steps:
                run_step(summary, "draft_on_cpu_target_on_device", lambda: split_devices(args, target, host, plain),
                         out)
        if "sampled" in steps:
            run_step(summary, "sampled", lambda: sampled_determinism(args, target, host), out)
        del target
    if "shipped_overhead" in steps:
        shipped = run_step(summary, "loop_overhead_shipped", lambda: overhead_benchmark(args, ("smollm2",)), out)
        if shipped is not None:
            summary["loop_overhead"] = {**summary.get("loop_overhead", {}), **shipped}
            del summary["loop_overhead_shipped"]
    if "captured" in steps:
        run_step(summary, "captured_verify", lambda: captured_verify(args.device, args.smoke), out)
    if "trees" in steps:
        run_step(summary, "tree_construction", lambda: tree_benchmark(args), out)
    summary["elapsed_s"] = round(time.perf_counter() - start, 1)
    ok = passed(summary)
    summary["passed"] = ok
    text = json.dumps(summary, indent=2)
    print(text)
    write_text(out, text + "\n", what="accelerator check summary")
    print(f"wrote {out}" + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""), file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_script(main))
