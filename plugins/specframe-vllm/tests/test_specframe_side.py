"""The cross-check's specframe side records what the drafter proposes without changing the decode
(specframe_vllm/crosscheck/specframe_side.py: ProposalRecorder, round_records), on a tiny DFlash chain."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import torch
from diffusion_testkit import TARGET_LAYERS, write_published_checkpoint
from specframe_vllm.crosscheck.rounds import per_position
from specframe_vllm.crosscheck.specframe_side import TOP, ProposalRecorder, per_depth, round_records

from specframe.interfaces import Drafter
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost

PROMPT = torch.tensor([[5, 6, 7, 8, 9, 10]])
DEPTH = 5  # block_size 6


def chain(tmp_path: Path, model: Any) -> Pipeline:
    from specframe_hf import HFTarget

    config = {"name": "chain", "budget": DEPTH, "drafter": {"type": "dflash", "checkpoint": str(tmp_path), "top_k": 8},
              "tree_builder": {"type": "chain"}, "generation": {"stop_at_eos": False}}
    return Pipeline.from_dict(config, target=HFTarget.from_model(model),
                              host=PluginHost(allowlist=["diffusion", "hf", "trees", "verifiers"]))


def test_recorded_rounds_match_the_decode(tmp_path: Path) -> None:
    from specframe_hf.testing import tiny_causal_lm, two_way_lm

    model = two_way_lm(tiny_causal_lm("qwen3", seed=7, num_layers=TARGET_LAYERS))  # drafts get accepted
    write_published_checkpoint(tmp_path, "dflash", seed=21, target=model, block_size=DEPTH + 1)
    plain = chain(tmp_path, model).generate(PROMPT, max_new_tokens=20)
    pipe = chain(tmp_path, model)
    recorder = ProposalRecorder(pipe.stages.drafter, DEPTH)
    pipe.stages = dataclasses.replace(pipe.stages, drafter=cast(Drafter, recorder))
    result = pipe.generate(PROMPT, max_new_tokens=20)
    assert result.tokens == plain.tokens  # recording changes nothing
    rounds = round_records(recorder, result)
    assert sum(r["accepted"] for r in rounds) > 0
    start = 1  # the prefill token, then each round commits its accepted drafts and a bonus token
    for r, record in zip(rounds, [r for r in result.rounds if r.drafted], strict=True):
        assert r["start"] == start
        assert len(r["top"]) == DEPTH and all(len(t["ids"]) == TOP for t in r["top"])
        accepted = r["top"][: r["accepted"]]  # the accepted drafts are the best candidates and the output's tokens
        assert [t["ids"][0] for t in accepted] == result.tokens[start: start + r["accepted"]]
        assert all(t["logprobs"] == sorted(t["logprobs"], reverse=True) for t in r["top"])
        start += record.committed
    assert per_position(rounds, DEPTH) == per_depth([result], DEPTH)["accepted_per_pos"]
