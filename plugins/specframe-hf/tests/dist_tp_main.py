"""Tensor-parallel target under ``torchrun`` (the 2-rank TP test): MODEL_DIR OUT_DIR; each rank saves its results."""

import sys
from pathlib import Path

import torch
from specframe_hf.device_map import DeviceMap
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_rounds

from specframe.pipeline import Pipeline

NGRAM = {"sampling": {"temperature": 0.0}, "budget": 4, "drafter": {"type": "ngram", "num_speculative_tokens": 4},
         "corrector": {"type": "identity"}, "tree_builder": {"type": "chain"}, "pruner": {"type": "none"},
         "verifier": {"type": "auto"}}
PROMPT = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 9]

if __name__ == "__main__":
    model_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    target = HFTarget.from_pretrained(str(model_dir), device="cpu", placement=DeviceMap(tensor_parallel=True))
    logits = random_rounds(target, PROMPT, seed=3)
    target.reset()
    pipe = Pipeline.from_dict({**NGRAM, "target": {"type": "hf", "model": str(model_dir), "device": "cpu",
                                                   "tensor_parallel": True}})
    tokens = pipe.generate(PROMPT, 16).tokens
    rank = torch.distributed.get_rank()
    weight = target.model.model.layers[0].self_attn.q_proj.weight
    local = tuple(getattr(weight, "_local_tensor", weight).shape)  # this rank's shard of the query projection
    torch.save({"logits": logits, "tokens": tokens, "q_proj_local": local}, out / f"rank-{rank}.pt")
