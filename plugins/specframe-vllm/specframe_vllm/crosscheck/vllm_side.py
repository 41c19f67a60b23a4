"""The vLLM side of the cross-check (vLLM environment: imports vLLM and the standard library only).

Reads the specframe side's JSON for its inputs (the prompts' token ids, the token limit, the draft length, the law
prompt) and writes its own:

* ``prompts[i].output_ids``: vLLM's greedy output of prompt ``i`` with the exported drafter (float32);
* ``prompts[i].rounds``: one record per verification round of that prompt, read while the engine steps one
  request at a time (one engine step = one round): ``start`` (output tokens committed before the round; its drafts
  predict ``output_ids[start:]``), ``accepted`` (the step's increase of ``vllm:spec_decode_num_accepted_tokens``,
  vLLM's own count) and ``top`` (per depth, the drafter's ``TOP`` best tokens and their log-probabilities, read
  from the drafter model's ``compute_logits`` at the proposal that made this round's drafts);
* ``prompts[i].acceptance`` and ``acceptance``: vLLM's spec-decode counters (``vllm:spec_decode_num_drafts``,
  ``..._num_draft_tokens``, ``..._num_accepted_tokens``, ``..._num_accepted_tokens_per_pos``), per prompt (the
  difference of the cumulative counters around its request) and summed;
* ``samples``: ``--samples`` continuations of the law prompt, sampled with the drafter at the law's temperature
  (one request each, drawn from the engine's seeded generator).

How the drafter's log-probabilities are read: the engine runs in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the same model runner and kernels, without the engine-core subprocess), so
the drafter model (``model_runner.drafter.model``) is reachable and its ``compute_logits`` is wrapped by a recorder
that keeps a copy of what it returns (``[k, V]`` logits per proposal: ``-inf`` outside the draft vocabulary; the
log-softmax over them is normalised over the draft vocabulary, as specframe's). The recorder changes no value.
The proposal at the end of engine step ``s`` drafts the round verified in step ``s + 1``; the last one is never
verified.

``--keep-context-key-defect`` undoes the plugin's fix of vLLM's CPU context-key norm in this process
(:mod:`specframe_vllm.cpu_fixes`), to record what the comparer says about the defect.

Engine settings: ``dtype=float32``, ``enforce_eager=True``, ``max_model_len=2048``, prefix caching on (the samples
share their prompt). Run it with ``OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=1 VLLM_CPU_KVCACHE_SPACE=2`` on a
small machine; ``make vllm-check`` does.

Usage::

    .venv-vllm/bin/python -m specframe_vllm.crosscheck.vllm_side runs/vllm-check/specframe.json \\
        --drafter runs/vllm-check/drafter --target ~/.cache/specframe/smollm2-135m-instruct \\
        --out runs/vllm-check/vllm.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

COUNTERS = {
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens",
}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
#: Candidates per depth whose log-probabilities both sides record (the comparer bounds their differences).
TOP = 4
#: Decimals of the recorded log-probabilities (specframe_side.DIGITS: the same).
DIGITS = 7


def make_engine(target: str, drafter: str | None, num_speculative_tokens: int, *, dtype: str = "float32",
                seed: int = 0) -> Any:
    """A vLLM engine on ``target``, with the exported ``drafter`` (``method: dflash``) unless None."""
    from vllm import LLM

    spec = None if drafter is None else {"method": "dflash", "model": drafter,
                                         "num_speculative_tokens": num_speculative_tokens}
    return LLM(model=target, tokenizer=target, dtype=dtype, max_model_len=2048, enforce_eager=True, seed=seed,
               speculative_config=spec, disable_log_stats=False, enable_prefix_caching=True)


def spec_counters(llm: Any, depth: int) -> dict[str, Any]:
    """The engine's cumulative spec-decode counters, under the specframe side's names."""
    out: dict[str, Any] = {name: 0 for name in COUNTERS.values()}
    out["accepted_per_pos"] = [0] * depth
    for metric in llm.get_metrics():
        if metric.name in COUNTERS:
            out[COUNTERS[metric.name]] += int(metric.value)
        elif metric.name == PER_POS:
            for d, v in enumerate(metric.values[:depth]):
                out["accepted_per_pos"][d] += int(v)
    return out


def counter_delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """``after - before`` field by field (the counters of the requests in between)."""
    return {k: [a - b for a, b in zip(v, before[k], strict=True)] if isinstance(v, list) else v - before[k]
            for k, v in after.items()}


class DraftRecorder:
    """Wraps the drafter model's ``compute_logits``: while ``on``, keeps each proposal's top ``TOP`` tokens and
    log-probabilities per depth (module docstring); returns the logits unchanged."""

    def __init__(self, llm: Any) -> None:
        runner = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner
        self.model = runner.drafter.model
        self.inner = self.model.compute_logits
        self.on = False
        self.proposals: list[list[dict[str, list[Any]]]] = []  # per proposal, per depth {"ids", "logprobs"}
        self.model.compute_logits = self

    def __call__(self, hidden_states: Any) -> Any:
        import torch

        logits = self.inner(hidden_states)  # [k, V] one request: one row per depth
        if self.on:
            logprobs = torch.log_softmax(logits.double(), dim=-1)  # [k, V] over the draft vocabulary
            top = logprobs.topk(TOP, dim=-1)
            self.proposals.append([{"ids": i.tolist(), "logprobs": [round(x, DIGITS) for x in v.tolist()]}
                                   for i, v in zip(top.indices, top.values, strict=True)])
        return logits


def decode_one(llm: Any, recorder: DraftRecorder, request_id: str, prompt_ids: list[int], max_new_tokens: int,
               depth: int) -> dict[str, Any]:
    """One prompt alone, one engine step at a time: output ids, per-round records and counter deltas."""
    from vllm import SamplingParams, TokensPrompt

    engine = llm.llm_engine
    params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
    before = spec_counters(llm, depth)
    recorder.proposals.clear()
    recorder.on = True
    engine.add_request(request_id, TokensPrompt(prompt_token_ids=prompt_ids), params)
    rounds: list[dict[str, Any]] = []
    committed = 0  # output tokens before this step
    last = before
    final: Any = None
    while engine.has_unfinished_requests():
        proposed = len(recorder.proposals)  # proposals made before this step: the last drafted this step's round
        for out in engine.step():
            final = out
        now = spec_counters(llm, depth)
        step = counter_delta(now, last)
        if step["num_drafts"]:
            rounds.append({"start": committed, "accepted": step["num_accepted_tokens"],
                           "top": recorder.proposals[proposed - 1]})
        last = now
        committed = len(final.outputs[0].token_ids) if final is not None else committed
    recorder.on = False
    return {"output_ids": list(final.outputs[0].token_ids), "finish_reason": final.outputs[0].finish_reason,
            "rounds": rounds, "acceptance": counter_delta(last, before)}


def sampled_continuations(llm: Any, law: dict[str, Any], samples: int) -> list[list[int]]:
    """``samples`` continuations of the law prompt, ``law['length']`` tokens each, one request each.

    The requests carry no seed of their own: with speculative decoding, vLLM 0.32 on CPU fails on a per-request
    seed ("CPU Generator does not use offset": its bookkeeping rewinds the generator's Philox offset, which only
    CUDA generators have), so the draws come from the engine's seeded generator."""
    from vllm import SamplingParams, TokensPrompt

    prompt = TokensPrompt(prompt_token_ids=law["prompt_ids"])
    params = SamplingParams(temperature=law["temperature"], max_tokens=law["length"], min_tokens=law["length"],
                            ignore_eos=True)
    outs = llm.generate([prompt] * samples, params, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def run(reference: Path, drafter: str, target: str, out: Path, *, samples: int, seed: int,
        keep_context_key_defect: bool = False) -> dict[str, Any]:
    ref = json.loads(reference.read_text())
    depth = int(ref["num_speculative_tokens"])
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: the recorder reaches it
    t0 = time.perf_counter()
    if keep_context_key_defect:  # vLLM's own method, saved before the plugin's fix replaces it (cpu_fixes.py)
        from vllm.model_executor.models.qwen3_dflash import DFlashQwen3Model

        defective = DFlashQwen3Model._normalize_context_k
    llm = make_engine(target, drafter, depth, dtype=ref["dtype"], seed=seed)
    if keep_context_key_defect:
        DFlashQwen3Model._normalize_context_k = defective
    recorder = DraftRecorder(llm)
    startup_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    rows = [decode_one(llm, recorder, f"greedy-{i}", p["prompt_ids"], int(ref["max_new_tokens"]), depth)
            for i, p in enumerate(ref["prompts"])]
    greedy_s = time.perf_counter() - t1
    total = spec_counters(llm, depth)
    t2 = time.perf_counter()
    drawn = sampled_continuations(llm, ref["law"], samples) if samples else []
    report = {"schema": 2, "drafter": drafter, "target": target, "num_speculative_tokens": depth, "top": TOP,
              "context_key_fix": not keep_context_key_defect,
              "prompts": rows, "acceptance": total, "samples": drawn,
              "seconds": {"startup": startup_s, "greedy": greedy_s, "samples": time.perf_counter() - t2}}
    tmp = out.with_name(out.name + ".tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(report) + "\n")
    os.replace(tmp, out)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reference", type=Path, help="the specframe side's JSON")
    ap.add_argument("--drafter", required=True, help="the exported drafter directory (specframe vllm-export)")
    ap.add_argument("--target", required=True, help="the target model directory")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--samples", type=int, default=600, help="sampled continuations for the law test (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep-context-key-defect", action="store_true",
                    help="run vLLM's CPU drafter context-key norm unfixed (to record the defect; cpu_fixes.py)")
    args = ap.parse_args(argv)
    report = run(args.reference, args.drafter, args.target, args.out, samples=args.samples, seed=args.seed,
                 keep_context_key_defect=args.keep_context_key_defect)
    sec = report["seconds"]
    print(f"vllm: {len(report['prompts'])} prompts, accepted per position {report['acceptance']['accepted_per_pos']},"
          f" {len(report['samples'])} samples; engine start {sec['startup']:.0f}s, greedy {sec['greedy']:.0f}s, "
          f"samples {sec['samples']:.0f}s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
