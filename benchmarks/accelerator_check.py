"""The accelerator check: specframe's device path on one GPU in under ten minutes, summarised as one JSON object.

specframe is developed and tested on CPUs; this script is what checks the accelerator path. It runs, on
``--device`` (default ``cuda``):

1. greedy exactness in float32: every SmolLM2 method of the demo (``examples/smollm2``) against plain decoding
   through the same loop, and plain decoding against the target's own ``generate()``;
2. the drafter and its head on the CPU with the target on the device (greedy output unchanged); a sampled run
   at T = 1 (DARTree, fixed budget): the same seed twice gives the same tokens, another seed not
   necessarily (reported);
3. the tree-construction benchmark on the device (``benchmarks/tree_construction.py --device``; the paper reports
   about 70 ms for the sequential heap vs 28 ms depth-wise for its Qwen3 head);
4. the demo table: τ, tokens/s, speedup over plain decoding, per-stage share of round time (stage clocks
   synchronise the device), and the host synchronisations per round, counted twice: by specframe's
   ``HostSyncCounter`` (the same count on every device) and, on CUDA, by ``torch.cuda.set_sync_debug_mode``;
5. the loop-overhead benchmark on the device (``benchmarks/loop_overhead.py --device``): a round's target forward,
   drafter forward and everything else, on the tiny pair at batch 1, 8 and 32 and on the shipped pair at batch 1
   and 4, which is where a round's framework cost matters most.

It prints one JSON summary and writes it to ``--out``; the exit status is 1 if any output differs. ``--smoke``
(alias ``--quick``) is a smoke run (two methods, one prompt, few tokens, the tree benchmark's own ``--smoke``) that
also works on a CPU; ``make test`` runs ``--device cpu --smoke`` end to end, so every step's code runs on each change.

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
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import loop_overhead
import torch
import tree_construction
from _frame import BenchParser, count, run_script
from specframe_smollm2.demo import METHODS, PROMPTS, _check_checkpoints, repo_root

from specframe.device_sync import HostSyncCounter
from specframe.files import write_text
from specframe.metrics.records import STAGES, GenerationResult
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost

QUICK_METHODS = ("plain decoding", "DARTree pruned B=16")
SAMPLED_METHOD = "DARTree pruned B=16"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (the check) or cpu (a smoke run of the script)")
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_smoke("two methods, one prompt, 12 tokens, the tree benchmark's smoke run")
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
    methods = [m for m in METHODS if not args.smoke or m[0] in QUICK_METHODS]
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
        pipe = Pipeline.from_yaml(root / file, target=target, host=host, overrides=timing)
        pipe.generate(prompts[0][1], 4)  # warm-up (and `budget: auto`'s cost profile on this device)
        results = [pipe.generate(text, args.max_new_tokens) for _, text in prompts]
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


def overhead_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """``benchmarks/loop_overhead.py`` on the device, tiny pair then shipped pair, in this process: per pipeline and
    batch size, the median round, target, draft and everything-else milliseconds."""
    runs = {"tiny": ["--models", "tiny", "--batch-sizes", "1,2" if args.smoke else "1,8,32"],
            "smollm2": ["--models", "smollm2", "--batch-sizes", "1" if args.smoke else "1,4",
                        "--pipelines", "dflash-chain,ddtree,dartree-auto"]}
    size = ["--smoke"] if args.smoke else ["--repeats", "2"]
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, models in runs.items():
            out = Path(tmp) / f"{name}.json"
            stdout, sys.stdout = sys.stdout, sys.stderr  # its tables go to stderr: stdout carries the summary
            try:
                status = loop_overhead.main([*models, "--device", args.device, "--threads", "0", "--max-load",
                                             "1e9", *size, "--out", str(out)])
            finally:
                sys.stdout = stdout
            data = json.loads(out.read_text())
            found[name] = {"status": status, "rows": [
                {"pipeline": r["pipeline"], "batch": r["batch"], "exact": r["exact"],
                 **{k: round(r[k]["median_ms"], 3) for k in ("round", "target", "draft", "else")}}
                for r in data["rows"]]}
    return found


def environment(device: str) -> dict[str, Any]:
    env: dict[str, Any] = {"device": device, "torch": torch.__version__, "python": platform.python_version(),
                           "machine": platform.machine()}
    if device.startswith("cuda"):
        env.update(gpu=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                   capability=".".join(map(str, torch.cuda.get_device_capability(device))))
    return env


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        args.max_new_tokens = min(args.max_new_tokens, 12)
    start = time.perf_counter()
    _check_checkpoints(repo_root())
    host = PluginHost()
    target = load_target(args.device)
    rows, exact, plain = run_methods(args, target, host)
    split = split_devices(args, target, host, plain) if args.device != "cpu" else None
    sampled = sampled_determinism(args, target, host)
    tree = tree_benchmark(args)
    overhead = overhead_benchmark(args)
    summary = {
        "check": "accelerator", "smoke": args.smoke, "environment": environment(args.device),
        "greedy_exact_all": exact, "draft_on_cpu_target_on_device": split, "sampled": sampled,
        "tree_construction": tree, "loop_overhead": overhead, "demo": rows,
        "max_new_tokens": args.max_new_tokens, "elapsed_s": round(time.perf_counter() - start, 1),
    }
    text = json.dumps(summary, indent=2)
    print(text)
    write_text(args.out, text + "\n", what="accelerator check summary")
    print(f"wrote {args.out}" + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""), file=sys.stderr)
    overhead_ok = all(run["status"] == 0 for run in overhead.values())
    if not exact or not sampled["same_seed_same_tokens"] or (split is not None and not split["exact"]) \
            or not overhead_ok:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
