"""Tiny random target and draft models with one vocabulary, saved the way real models are, and references.

The target is a tiny random Llama (vocab 512, hidden 64, 2 layers, from ``specframe_hf.testing``). Draft
models share its vocabulary:

* ``same``: a copy of the target, so every draft is right (checks that the draft cache follows the commits);
* ``noisy``: the target plus weight noise, so drafts are right at some depths and wrong at others;
* ``other``: an unrelated one-layer Qwen3, so drafts are mostly wrong.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import torch
from specframe_hf.testing import tiny_causal_lm

VOCAB = 512


@cache
def target_model() -> Any:
    model = tiny_causal_lm("llama", seed=0)
    model.generation_config.eos_token_id = None  # greedy references run to the length limit
    return model


def draft_model(kind: str) -> Any:
    """A draft model of ``kind`` in {"same", "noisy", "other"} sharing the target's vocabulary."""
    if kind == "other":
        return tiny_causal_lm("qwen3", seed=5, num_layers=1)
    model = copy.deepcopy(target_model())
    if kind == "noisy":
        gen = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for param in model.parameters():
                if param.dim() >= 2:
                    param.add_(torch.randn(param.shape, generator=gen) * 0.005)
    return model


def save_draft(directory: Path, kind: str) -> Path:
    """Write ``draft_model(kind)`` with save_pretrained (config.json + safetensors) and return the directory."""
    if not (directory / "config.json").is_file():
        draft_model(kind).save_pretrained(directory)
    return directory


def greedy_reference(model: Any, prompt: list[int], n: int) -> list[int]:
    """``n`` new tokens of plain greedy decoding (full forward per step, no cache)."""
    ids = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(n):
            ids = torch.cat([ids, model(input_ids=ids).logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return ids[0, len(prompt):].tolist()


def rollout_reference(model: Any, tokens: list[int], depth: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k ids ``[L, K]`` and log-probs of an uncached greedy rollout after ``tokens`` (the root last)."""
    ids = torch.tensor([tokens])
    top_ids, top_lp = [], []
    with torch.no_grad():
        for _ in range(depth):
            logp = torch.log_softmax(model(input_ids=ids).logits[0, -1, :VOCAB].float(), dim=-1)
            top = torch.topk(logp, k)
            top_ids.append(top.indices)
            top_lp.append(top.values)
            ids = torch.cat([ids, top.indices[:1].view(1, 1)], dim=1)
    return torch.stack(top_ids), torch.stack(top_lp)
