"""Where the two engines' drafter log-probabilities differ with a correct export: the target's taps or the drafter.

The cross-check bounds the difference (``compare --logprob-tol``); this traces it, on the first round of the first
``--prompts`` prompts of a specframe-side report, by running specframe's drafter on vLLM's taps:

* ``vllm`` (vLLM environment): decodes each prompt for a few tokens with the exported drafter and writes the taps
  vLLM's drafter received at the prefill (the input of ``combine_hidden_states``, ``[P, n_taps * H]``, to
  ``taps.safetensors``) and its first round's candidates (``rounds.json``);
* ``specframe`` (main environment): loads the shipped DFlash chain, drafts the first round from vLLM's taps, and
  prints, per prompt, the largest log-probability difference over shared candidates between (a) specframe and vLLM
  (what the cross-check measures), (b) specframe's drafter on vLLM's taps and vLLM (the drafter's kernels alone),
  (c) specframe and specframe's drafter on vLLM's taps (the target's taps alone), and the taps' own difference.

Usage::

    .venv-vllm/bin/python -m specframe_vllm.crosscheck.trace vllm runs/vllm-check/specframe.json \\
        --drafter runs/vllm-check/drafter --target ~/.cache/specframe/smollm2-135m-instruct --out runs/trace
    .venv/bin/python -m specframe_vllm.crosscheck.trace specframe runs/vllm-check/specframe.json --out runs/trace
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any


def trace_vllm(reference: Path, drafter: str, target: str, out: Path, prompts: int) -> None:
    """The vLLM half (module docstring); imports vLLM and torch only."""
    from safetensors.torch import save_file

    from specframe_vllm.crosscheck.vllm_side import DraftRecorder, decode_one, make_engine

    ref = json.loads(reference.read_text())
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    llm = make_engine(target, drafter, int(ref["num_speculative_tokens"]), dtype=ref["dtype"])
    recorder = DraftRecorder(llm)
    inner = recorder.model.combine_hidden_states
    seen: list[Any] = []

    def keep(hidden: Any) -> Any:  # [N, n_taps * H] the taps of the tokens the target just ran
        seen.append(hidden.detach().clone())
        return inner(hidden)

    recorder.model.combine_hidden_states = keep
    taps, rounds = {}, []
    for i, p in enumerate(ref["prompts"][:prompts]):
        seen.clear()
        row = decode_one(llm, recorder, f"trace-{i}", p["prompt_ids"], 4, int(ref["num_speculative_tokens"]))
        taps[f"prompt{i}"] = seen[0][: len(p["prompt_ids"])].contiguous()  # the prefill's taps
        rounds.append(row["rounds"][0])
    out.mkdir(parents=True, exist_ok=True)
    save_file(taps, str(out / "taps.safetensors"))
    (out / "rounds.json").write_text(json.dumps(rounds) + "\n")


def shared_diff(a: list[dict[str, list[Any]]], b: list[dict[str, list[Any]]]) -> float:
    """Largest log-probability difference over the candidates both lists hold, over every depth."""
    from specframe_vllm.crosscheck.rounds import logprob_diff

    return max(logprob_diff(x, y) for x, y in zip(a, b, strict=True))


def trace_specframe(reference: Path, out: Path) -> list[dict[str, Any]]:
    """The specframe half (module docstring): the differences per prompt, printed and written to trace.json."""
    import torch
    from safetensors.torch import load_file

    from specframe.interfaces import DecodeState
    from specframe.pipeline import Pipeline
    from specframe.types import TargetOutput
    from specframe_vllm.crosscheck.specframe_side import CHAIN_DEPTH, DIGITS, PIPELINE, TOP

    ref = json.loads(reference.read_text())
    taps = load_file(str(out / "taps.safetensors"))
    vllm_rounds = json.loads((out / "rounds.json").read_text())
    chain = Pipeline.from_yaml(PIPELINE, overrides=[f"budget={CHAIN_DEPTH}"])
    drafter: Any = chain.stages.drafter
    model: Any = chain.target
    rows_out = []
    for i, (p, vr) in enumerate(zip(ref["prompts"], vllm_rounds, strict=False)):
        n = len(p["prompt_ids"])
        vllm_taps = taps[f"prompt{i}"].unsqueeze(0).float()  # [1, P, n_taps * H]
        state = DecodeState(torch.tensor([p["prompt_ids"] + p["output_ids"][:1]]), prompt_len=n,
                            sampling=chain.sampling)
        rows = drafter.rows()
        rows.add_row(state, TargetOutput(logits=torch.zeros(1, n, 1), hidden=vllm_taps))
        proposal = rows.propose([0], [state])
        on_vllm_taps = [{"ids": t.tolist(), "logprobs": [round(x, DIGITS) for x in lp.double().tolist()]}
                        for t, lp in zip(proposal.tokens[0, :CHAIN_DEPTH, :TOP],
                                         proposal.logprobs[0, :CHAIN_DEPTH, :TOP], strict=True)]
        with torch.no_grad():
            hidden = model.model(input_ids=torch.tensor([p["prompt_ids"]]), output_hidden_states=True).hidden_states
        own_taps = torch.cat([hidden[layer + 1] for layer in drafter.target_layers], dim=-1)  # [1, P, n_taps * H]
        sf_top = p["rounds"][0]["top"]
        row = {"prompt": f"{p['set']}#{p['question_id']}",
               "taps_max_abs_diff": float((own_taps - vllm_taps).abs().max()),
               "taps_max_abs": float(own_taps.abs().max()),
               "specframe_vs_vllm": shared_diff(sf_top, vr["top"]),
               "drafter_kernels": shared_diff(on_vllm_taps, vr["top"]),
               "target_taps": shared_diff(sf_top, on_vllm_taps)}
        rows_out.append(row)
        print(f"{row['prompt']}: taps differ by {row['taps_max_abs_diff']:.3g} (largest tap {row['taps_max_abs']:.3g});"
              f" round-1 log-probs: specframe vs vLLM {row['specframe_vs_vllm']:.3g}, drafter kernels alone "
              f"{row['drafter_kernels']:.3g}, target taps alone {row['target_taps']:.3g}")
    (out / "trace.json").write_text(json.dumps(rows_out, indent=1) + "\n")
    return rows_out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("side", choices=("vllm", "specframe"))
    ap.add_argument("reference", type=Path, help="the specframe side's JSON")
    ap.add_argument("--out", type=Path, required=True, help="directory for taps.safetensors, rounds.json, trace.json")
    ap.add_argument("--drafter", help="(vllm) the exported drafter directory")
    ap.add_argument("--target", help="(vllm) the target model directory")
    ap.add_argument("--prompts", type=int, default=3)
    args = ap.parse_args(argv)
    if args.side == "vllm":
        if not args.drafter or not args.target:
            ap.error("the vllm side needs --drafter and --target")
        trace_vllm(args.reference, args.drafter, args.target, args.out, args.prompts)
    else:
        trace_specframe(args.reference, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
