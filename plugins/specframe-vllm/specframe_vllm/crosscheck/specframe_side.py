"""The specframe side of the cross-check (main environment): outputs, per-depth acceptance and the target's exact law.

Writes one JSON file (``--out``) that the vLLM side reads for its inputs and the comparer for its reference:

* ``prompts``: the held-out prompts (report split of GSM8K, HumanEval and MT-Bench, chat template applied) as
  token ids, each with specframe's DFlash-chain output (greedy, float32), the target's plain greedy output through
  the same loop (both must agree: losslessness), its per-prompt ``acceptance`` (below) and its ``rounds``: per
  verification round ``start`` (output tokens committed before the round; its drafts predict
  ``output_ids[start:]``), ``accepted`` and ``top`` (per depth, the drafter's ``TOP`` best tokens and their
  log-probabilities over the draft vocabulary, as the drafter proposed them: :class:`ProposalRecorder`);
* ``acceptance``: per-depth counts over all rounds, in vLLM's vocabulary: ``num_drafts`` (rounds that drafted),
  ``num_draft_tokens``, ``num_accepted_tokens`` and ``accepted_per_pos[d]`` = rounds that accepted more than ``d``
  drafts (the draft at depth ``d + 1`` was accepted);
* ``law``: for one prompt, the exact law of the first ``length`` sampled tokens under the target at
  ``temperature`` (the test) and at ``wrong_temperature`` (the negative control), computed with transformers:
  every continuation whose probability at ``temperature`` is at least ``min_prob`` is a category, the rest of the
  mass is the category "other". Worked example: length 2, two first tokens of probability 0.7 and 0.3, each with
  two continuations of 0.5 -> categories ``[a,x] .35, [a,y] .35, [b,x] .15, [b,y] .15``, other 0.

Usage (``make vllm-check`` runs it)::

    .venv/bin/python -m specframe_vllm.crosscheck.specframe_side --out runs/vllm-check/specframe.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import torch
from specframe_smollm2.cache import target_dir

from specframe.bench.splits import REPORT, select_split
from specframe.datasets import load_dataset
from specframe.files import write_text
from specframe.interfaces import DecodeState, Drafter, DrafterRows
from specframe.metrics.records import GenerationResult
from specframe.pipeline import Pipeline
from specframe.types import DraftProposal

#: The pipeline cross-checked: the shipped DFlash chain, drafting one block of 8 -> 7 drafts (see layout.py).
PIPELINE = "examples/smollm2/dflash-chain.yaml"
CHAIN_DEPTH = 7
SETS = ("gsm8k", "humaneval", "mt_bench")
#: A prompt whose first sampled tokens have a spread-out law (many categories above min_prob at T = 1).
LAW_PROMPT = "Write one sentence about a cat."
#: Candidates per depth whose log-probabilities both sides record (vllm_side.TOP: the same number).
TOP = 4
#: Decimals of the recorded log-probabilities (1e-7: far below the engines' measured 5e-5 difference).
DIGITS = 7


class ProposalRecorder:
    """Stands in for the pipeline's drafter and records what it proposes, changing nothing.

    Every attribute is the drafter's; :meth:`rows` wraps the drafter's rows so that each ``propose`` call
    (one request at a time: one row) appends ``{"start", "top"}`` to :attr:`proposals`: ``start`` the output
    tokens committed so far (``tokens`` minus the prompt), ``top`` per depth (the first ``depth``) the ``TOP``
    best candidates (the proposal's ``tokens`` / ``logprobs`` are sorted best first).
    """

    def __init__(self, drafter: Drafter, depth: int) -> None:
        self.drafter = drafter
        self.depth = depth
        self.proposals: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.drafter, name)

    def rows(self) -> DrafterRows:
        return cast(DrafterRows, _RecordingRows(self.drafter.rows(), self))


class _RecordingRows:
    """The drafter's rows, with ``propose`` recorded (:class:`ProposalRecorder`)."""

    def __init__(self, rows: DrafterRows, recorder: ProposalRecorder) -> None:
        self.rows = rows
        self.recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rows, name)

    def propose(self, rows: Sequence[int], states: Sequence[DecodeState]) -> DraftProposal:
        proposal = self.rows.propose(rows, states)
        if len(states) != 1:
            raise RuntimeError("the cross-check decodes one request at a time")
        ids = proposal.tokens[0, : self.recorder.depth, :TOP]  # [depth, TOP]
        logprobs = proposal.logprobs[0, : self.recorder.depth, :TOP].double()  # [depth, TOP]
        self.recorder.proposals.append({
            "start": int(states[0].tokens.shape[1]) - states[0].prompt_len,
            "top": [{"ids": i.tolist(), "logprobs": [round(x, DIGITS) for x in v.tolist()]}
                    for i, v in zip(ids, logprobs, strict=True)]})
        return proposal


def held_out_prompts(data_dirs: list[str], per_set: int) -> list[dict[str, Any]]:
    """The first ``per_set`` report-split (held-out) prompts of each set, first turns."""
    out = []
    for name in SETS:
        samples = select_split(load_dataset(name, None, data_dirs=data_dirs).samples, REPORT, per_set)
        out += [{"set": name, "question_id": s.question_id, "text": s.turns[0]} for s in samples]
    return out


def per_depth(results: list[GenerationResult], depth: int) -> dict[str, Any]:
    """vLLM's spec-decode counters computed from specframe's rounds (module docstring)."""
    rounds = [r for res in results for r in res.rounds if r.drafted]
    return {
        "num_drafts": len(rounds),
        "num_draft_tokens": sum(r.nodes for r in rounds),
        "num_accepted_tokens": sum(r.accepted for r in rounds),
        "accepted_per_pos": [sum(1 for r in rounds if r.accepted > d) for d in range(depth)],
    }


@torch.no_grad()
def exact_law(model: Any, prompt_ids: list[int], length: int, temperature: float, wrong_temperature: float,
              min_prob: float) -> dict[str, Any]:
    """The target's law of the first ``length`` sampled tokens (module docstring), at both temperatures."""
    frontier: list[tuple[list[int], float, float]] = [([], 1.0, 1.0)]  # (continuation, p at T, p at wrong T)
    for _ in range(length):
        batch = torch.tensor([prompt_ids + seq for seq, _, _ in frontier], dtype=torch.long)  # [F, P + d]
        logits = model(input_ids=batch).logits[:, -1].double()  # [F, V]
        p_t = torch.softmax(logits / temperature, dim=-1)
        p_w = torch.softmax(logits / wrong_temperature, dim=-1)
        grown = []
        for row, (seq, pt, pw) in enumerate(frontier):
            joint = pt * p_t[row]  # [V]
            for tok in torch.nonzero(joint >= min_prob).flatten().tolist():
                grown.append((seq + [tok], float(joint[tok]), pw * float(p_w[row, tok])))
        frontier = grown
    cats = sorted(frontier, key=lambda c: -c[1])
    return {
        "prompt_ids": prompt_ids, "length": length, "min_prob": min_prob,
        "categories": [c[0] for c in cats],
        "temperature": temperature, "probs": [c[1] for c in cats],
        "wrong_temperature": wrong_temperature, "wrong_probs": [c[2] for c in cats],
    }


def round_records(recorder: ProposalRecorder, result: GenerationResult) -> list[dict[str, Any]]:
    """The request's drafted rounds, each with the proposal that drafted it (one proposal per drafted round)."""
    drafted = [r for r in result.rounds if r.drafted]
    if len(drafted) != len(recorder.proposals):
        raise RuntimeError(f"{len(recorder.proposals)} proposals recorded for {len(drafted)} drafted rounds")
    return [{"start": p["start"], "accepted": r.accepted, "top": p["top"]}
            for p, r in zip(recorder.proposals, drafted, strict=True)]


def run(out: Path, *, data_dirs: list[str], per_set: int, max_new_tokens: int, law_length: int,
        temperature: float, wrong_temperature: float, min_prob: float) -> dict[str, Any]:
    chain = Pipeline.from_yaml(PIPELINE, overrides=[f"budget={CHAIN_DEPTH}"])
    plain = chain.with_stage("drafter", {"type": "none"}, name="plain")
    recorder = ProposalRecorder(chain.stages.drafter, CHAIN_DEPTH)
    chain.stages = dataclasses.replace(chain.stages, drafter=cast(Drafter, recorder))
    prompts = held_out_prompts(data_dirs, per_set)
    results = []
    for p in prompts:
        ids = chain.encode(p["text"])  # [1, P] chat template applied
        recorder.proposals.clear()
        res = chain.generate(ids, max_new_tokens)
        ref = plain.generate(ids, max_new_tokens)
        results.append(res)
        p.update(prompt_ids=ids[0].tolist(), output_ids=res.tokens, plain_ids=ref.tokens,
                 acceptance=per_depth([res], CHAIN_DEPTH), rounds=round_records(recorder, res),
                 stop_reason=res.stop_reason)
        print(f"  {p['set']}#{p['question_id']}: {len(res.tokens)} tokens, tau {res.tau:.2f}", file=sys.stderr,
              flush=True)
    target = chain.config.target.path or str(target_dir())
    law_ids = chain.encode(LAW_PROMPT)[0].tolist()
    model = cast(Any, chain.target).model  # the transformers model (HFTarget.model), float32
    report = {
        "schema": 2, "top": TOP,
        "pipeline": PIPELINE, "overrides": [f"budget={CHAIN_DEPTH}"], "num_speculative_tokens": CHAIN_DEPTH,
        "dtype": "float32", "max_new_tokens": max_new_tokens, "target": target,
        "prompts": prompts,
        "acceptance": per_depth(results, CHAIN_DEPTH),
        "law": exact_law(model, law_ids, law_length, temperature, wrong_temperature, min_prob),
    }
    write_text(out, json.dumps(report) + "\n", what="cross-check report")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", action="append", default=[], help="benchmark data directory (repeatable)")
    ap.add_argument("--per-set", type=int, default=2, help="held-out prompts per set (GSM8K, HumanEval, MT-Bench)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--law-length", type=int, default=3, help="sampled tokens whose joint law is tested")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--wrong-temperature", type=float, default=0.8, help="the negative control's temperature")
    ap.add_argument("--min-prob", type=float, default=0.01, help="smallest probability of a law category")
    args = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    report = run(args.out, data_dirs=args.data_dir or ["../shared/data"], per_set=args.per_set,
                 max_new_tokens=args.max_new_tokens, law_length=args.law_length, temperature=args.temperature,
                 wrong_temperature=args.wrong_temperature, min_prob=args.min_prob)
    acc = report["acceptance"]
    print(f"specframe: {len(report['prompts'])} prompts, {acc['num_drafts']} rounds, accepted per depth "
          f"{acc['accepted_per_pos']}; law: {len(report['law']['categories'])} categories -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
