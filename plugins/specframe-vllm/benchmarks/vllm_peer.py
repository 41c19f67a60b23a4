"""Peer benchmark: plain vLLM and vLLM with the exported drafter next to specframe's plain loop, DFlash chain and
DARTree (``budget: auto``), on the same prompts, machine and precision (float32), at batch 1 and 4.

What runs where: specframe's three pipelines in this (main) environment, in-process; vLLM's two configurations in
the vLLM environment (``make vllm-setup``), through ``specframe_vllm.bench_vllm`` in a subprocess with
``OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=1 VLLM_CPU_KVCACHE_SPACE=2``. Both sides decode the same prompt token
ids (held-out GSM8K and HumanEval prompts, chat template applied) greedily to the same token limit; vLLM's drafter
is the shipped DFlash drafter exported by ``specframe vllm-export`` (7 drafts per round, like the chain here).
specframe runs with one torch thread, as vLLM does with one OpenMP thread.

Each cell is the median of ``--repeats`` timed passes over all prompts (tokens / wall seconds; a batch of ``b``
decodes consecutive groups of ``b`` prompts together), with the min-max spread, τ where a drafter runs, and the
1-minute load average around it: a cell measured while other processes loaded the machine is marked ``*``.
The CPU is named from ``lscpu``. Output: a Markdown table on stdout and ``--out-dir``/peer.json.

``--smoke`` (what ``make vllm-check`` runs) decodes 4 prompts to 8 tokens once, to prove the script works; its
figures mean nothing. The real table: run it without ``--smoke`` on a quiet machine.

Usage::

    .venv/bin/python plugins/specframe-vllm/benchmarks/vllm_peer.py --drafter runs/vllm-check/drafter \\
        --per-set 10 --max-new-tokens 128 --repeats 3 --out-dir runs/vllm-peer
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from specframe_smollm2.cache import target_dir

from specframe.bench.splits import REPORT, select_split
from specframe.datasets import load_dataset
from specframe.files import write_text
from specframe.pipeline import Pipeline

PIPELINES = {"specframe-plain": "examples/smollm2/plain.yaml",
             "specframe-dflash-chain": "examples/smollm2/dflash-chain.yaml",
             "specframe-dartree-auto": "examples/smollm2/dartree-pruned.yaml"}
CHAIN_OVERRIDES = {"specframe-dflash-chain": ["budget=7"]}  # the drafts vLLM's exported drafter makes per round
SETS = ("gsm8k", "humaneval")  # math and code: where the target (drafter faster than plain) is set
BUSY_LOAD = 0.5  # load average above what this benchmark adds: another process was running
VLLM_ENV = {"OMP_NUM_THREADS": "1", "VLLM_CPU_OMP_THREADS_BIND": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU (lscpu failed)"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    name = fields.get("Model name", "unknown CPU").strip()
    return f"{name}, {fields.get('CPU(s)', '?').strip()} CPUs"


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def prompt_ids(pipe: Pipeline, data_dirs: list[str], per_set: int) -> list[list[int]]:
    out = []
    for name in SETS:
        for s in select_split(load_dataset(name, None, data_dirs=data_dirs).samples, REPORT, per_set):
            out.append(pipe.encode(s.turns[0])[0].tolist())
    return out


def time_specframe(pipe: Pipeline, prompts: list[list[int]], batch: int, max_new: int, repeats: int) -> list[dict]:
    groups = [prompts[i : i + batch] for i in range(0, len(prompts), batch)]
    pipe.generate_batch(groups[0], max_new, batch_size=batch)  # warm-up (and `budget: auto`'s profile)
    runs = []
    for _ in range(repeats):
        load0, tokens, rounds, committed = loadavg(), 0, 0, 0
        t0 = time.perf_counter()
        for group in groups:
            for res in pipe.generate_batch(group, max_new, batch_size=batch):
                tokens += len(res.tokens)
                rounds += sum(1 for r in res.rounds if r.drafted)
                committed += sum(r.committed for r in res.rounds if r.drafted)
        runs.append({"tokens": tokens, "seconds": time.perf_counter() - t0, "load_before": load0,
                     "load_after": loadavg(), "tau": committed / rounds if rounds else None})
    return runs


def summary(method: str, batch: int, runs: list[dict], extra_load: float) -> dict[str, Any]:
    rates = [r["tokens"] / r["seconds"] for r in runs]
    taus = [r["tau"] for r in runs if r["tau"] is not None]
    busy = max(max(r["load_before"], r["load_after"]) for r in runs) > extra_load + BUSY_LOAD
    return {"method": method, "batch": batch, "median_tok_s": statistics.median(rates), "min_tok_s": min(rates),
            "max_tok_s": max(rates), "tau": statistics.median(taus) if taus else None, "busy": busy, "runs": runs}


def run_vllm(out_dir: Path, inputs: dict[str, Any], vllm_python: Path) -> list[dict[str, Any]]:
    (out_dir / "vllm-inputs.json").write_text(json.dumps(inputs))
    env = {**os.environ, **VLLM_ENV}
    subprocess.run([str(vllm_python), "-m", "specframe_vllm.bench_vllm", str(out_dir / "vllm-inputs.json"),
                    "--out", str(out_dir / "vllm.json")], check=True, env=env)
    return json.loads((out_dir / "vllm.json").read_text())["results"]


def table(rows: list[dict[str, Any]], cpu: str) -> str:
    lines = [f"CPU: {cpu}; float32, greedy; tokens/s median [min-max]; * = machine loaded by other processes", "",
             "| method | batch | tokens/s | spread | τ | speedup vs own plain |", "|---|---|---|---|---|---|"]
    plain = {(r["method"].split("-")[0], r["batch"]): r["median_tok_s"] for r in rows if r["method"].endswith("plain")}
    for r in rows:
        base = plain.get((r["method"].split("-")[0], r["batch"]))
        tau = "" if r["tau"] is None else f"{r['tau']:.2f}"
        speedup = f"{r['median_tok_s'] / base:.2f}x" if base else ""
        lines.append(f"| {r['method']} | {r['batch']} | {r['median_tok_s']:.1f}{'*' if r['busy'] else ''} | "
                     f"{r['min_tok_s']:.1f}-{r['max_tok_s']:.1f} | {tau} | {speedup} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drafter", type=Path, required=True, help="the exported drafter (specframe vllm-export)")
    ap.add_argument("--vllm-python", type=Path, default=Path(".venv-vllm/bin/python"))
    ap.add_argument("--data-dir", action="append", default=[])
    ap.add_argument("--per-set", type=int, default=10, help="held-out prompts per set (GSM8K, HumanEval)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="4 prompts, 8 tokens, one repeat (proves it runs)")
    ap.add_argument("--out-dir", type=Path, default=Path("runs/vllm-peer"))
    args = ap.parse_args(argv)
    if args.smoke:
        args.per_set, args.max_new_tokens, args.repeats = 2, 8, 1
    if not args.vllm_python.exists():
        print(f"error: {args.vllm_python} does not exist; build the vLLM environment with `make vllm-setup`",
              file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    cpu, own_load = cpu_name(), 1.0  # this benchmark keeps one core busy
    pipes: dict[str, Pipeline] = {}
    for name, path in PIPELINES.items():  # one target object for the three (the same config in each file)
        shared = next(iter(pipes.values())).target if pipes else None
        pipes[name] = Pipeline.from_yaml(path, overrides=CHAIN_OVERRIDES.get(name, []), target=shared)
    prompts = prompt_ids(pipes["specframe-plain"], args.data_dir or ["../shared/data"], args.per_set)
    rows = []
    for name, pipe in pipes.items():
        for batch in args.batch_sizes:
            runs = time_specframe(pipe, prompts, batch, args.max_new_tokens, args.repeats)
            rows.append(summary(name, batch, runs, own_load))
    inputs = {"prompts": [{"prompt_ids": p} for p in prompts], "target": str(target_dir()),
              "drafter": str(args.drafter), "num_speculative_tokens": 7, "dtype": "float32",
              "max_new_tokens": args.max_new_tokens, "batch_sizes": args.batch_sizes, "repeats": args.repeats}
    for r in run_vllm(args.out_dir, inputs, args.vllm_python):
        rows.append(summary(r["method"], r["batch"], r["runs"], own_load))
    text = table(rows, cpu)
    print(text)
    report = {"cpu": cpu, "smoke": args.smoke, "prompts": len(prompts), "sets": list(SETS),
              "max_new_tokens": args.max_new_tokens, "dtype": "float32", "rows": rows}
    write_text(args.out_dir / "peer.json", json.dumps(report, indent=1) + "\n", what="peer benchmark results")
    write_text(args.out_dir / "peer.md", text + "\n", what="peer benchmark table")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
