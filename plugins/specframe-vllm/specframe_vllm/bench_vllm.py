"""The vLLM half of the peer benchmark (vLLM environment: imports vLLM and the standard library only).

Reads a JSON of prompts (token ids) and settings written by ``benchmarks/vllm_peer.py``, times plain vLLM and vLLM
with the exported drafter at each batch size, and writes a JSON of timings. A batch of ``b`` is ``b`` requests
handed to ``LLM.generate`` together (the engine runs them as one batch; the prompts are cut into consecutive
groups of ``b``); each configuration decodes every prompt ``repeats`` times after one untimed warm-up group, and
reports per repeat the generated tokens, the wall time and the 1-minute load average before and after.

Usage (the driver runs it)::

    OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=1 VLLM_CPU_KVCACHE_SPACE=2 \\
        .venv-vllm/bin/python -m specframe_vllm.bench_vllm runs/vllm-peer/inputs.json --out runs/vllm-peer/vllm.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from pathlib import Path
from typing import Any

from specframe_vllm.crosscheck.vllm_side import make_engine, spec_counters


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def time_config(llm: Any, prompts: list[list[int]], batch: int, max_new_tokens: int, repeats: int,
                depth: int) -> dict[str, Any]:
    from vllm import SamplingParams, TokensPrompt

    params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
    groups = [prompts[i : i + batch] for i in range(0, len(prompts), batch)]
    llm.generate([TokensPrompt(prompt_token_ids=p) for p in groups[0]], params, use_tqdm=False)  # warm-up
    runs = []
    for _ in range(repeats):
        load0, before, tokens = loadavg(), spec_counters(llm, depth), 0
        t0 = time.perf_counter()
        for group in groups:
            outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in group], params, use_tqdm=False)
            tokens += sum(len(o.outputs[0].token_ids) for o in outs)
        wall = time.perf_counter() - t0
        after = spec_counters(llm, depth)
        drafts = after["num_drafts"] - before["num_drafts"]
        accepted = after["num_accepted_tokens"] - before["num_accepted_tokens"]
        runs.append({"tokens": tokens, "seconds": wall, "load_before": load0, "load_after": loadavg(),
                     "tau": 1 + accepted / drafts if drafts else None})
    return {"batch": batch, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    spec = json.loads(args.inputs.read_text())
    prompts = [p["prompt_ids"] for p in spec["prompts"]]
    results = []
    for name, drafter in (("vllm-plain", None), ("vllm-dflash", spec["drafter"])):
        t0 = time.perf_counter()
        llm = make_engine(spec["target"], drafter, spec["num_speculative_tokens"], dtype=spec["dtype"])
        startup = time.perf_counter() - t0
        for batch in spec["batch_sizes"]:
            row = time_config(llm, prompts, batch, spec["max_new_tokens"], spec["repeats"],
                              spec["num_speculative_tokens"])
            results.append({"method": name, "startup_s": startup, **row})
            print(f"{name} batch {batch}: {[round(r['tokens'] / r['seconds'], 1) for r in row['runs']]} tok/s",
                  flush=True)
        del llm
        gc.collect()
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps({"schema": 1, "results": results}, indent=1) + "\n")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
