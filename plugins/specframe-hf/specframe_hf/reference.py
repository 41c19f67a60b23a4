"""transformers' own ``model.generate()`` on the target's model, timed: the ``hf_generate`` reference.

What :class:`specframe.reference.NativeGenerate` asks for, on the model inside an :class:`HFTarget`:

* **the unmodified model**: linear layers prepacked by ``cpu_linear`` run on ``nn.Linear``'s own path for the
  call (:func:`specframe.cpu_linear.default_kernels`) and a float32 LM head (``logits_dtype``) is swapped back
  (:func:`specframe_hf.head_precision.original_head`): what a user's ``generate()`` runs;
* **the same law**: a fresh ``GenerationConfig`` (nothing from the model's generation defaults, such as a
  repetition penalty, applies): greedy, or sampling with the pipeline's temperature, top-k and top-p, seeded
  from the request seed inside a forked global RNG (specframe never moves the global RNG);
* **exactly** ``new_tokens`` tokens: the model's generation config is swapped, for the call, for one without an
  end-of-sequence id (a ``GenerationConfig`` passed to ``generate()`` would be filled from the model's), so
  nothing stops early and no ``min_new_tokens`` processor changes a logit;
* **timed** like the decode loop: from the call to its return, the device synchronised at both ends; the
  prefill time is when the first new token reaches a streamer (a Python call per token, microseconds).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from transformers import GenerationConfig
from transformers.generation.streamers import BaseStreamer

from specframe.cpu_linear import default_kernels
from specframe.device_sync import synchronize
from specframe.reference import NativeRun
from specframe.types import SamplingParams
from specframe_hf.head_precision import original_head


class _FirstToken(BaseStreamer):
    """Records when ``generate()`` hands over its first new token (its second ``put``; the first is the prompt)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.puts = 0
        self.start_ns = 0
        self.first_ns: int | None = None

    def put(self, value: torch.Tensor) -> None:
        self.puts += 1
        if self.puts == 2:
            synchronize(self.device)
            self.first_ns = time.perf_counter_ns()

    def end(self) -> None:
        pass


def generation_config(model: Any, new_tokens: int, sampling: SamplingParams) -> GenerationConfig:
    """A config holding only what the reference needs: length, the law, and ids the model's config names."""
    pad = getattr(model.generation_config, "pad_token_id", None)
    if pad is None:
        pad = getattr(model.config, "pad_token_id", None)
    law: dict[str, Any] = {"do_sample": False}
    if not sampling.greedy:
        law = {"do_sample": True, "temperature": sampling.temperature, "top_k": sampling.top_k,
               "top_p": sampling.top_p}
    return GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=0, pad_token_id=0 if pad is None else pad,
                            bos_token_id=getattr(model.generation_config, "bos_token_id", None), use_cache=True,
                            **law)


def native_generate(model: Any, device: torch.device, input_ids: torch.Tensor, new_tokens: int, *,
                    sampling: SamplingParams, seed: int) -> NativeRun:
    """Run and time the reference (see the module docstring); ``input_ids`` ``[1, P]``."""
    ids = input_ids.view(1, -1).to(device)  # [1, P]
    streamer = _FirstToken(device)
    out, total, kernels = _timed_generate(model, device, ids, torch.ones_like(ids), new_tokens, sampling, seed,
                                          streamer)
    first = streamer.first_ns - streamer.start_ns if streamer.first_ns is not None else total
    return NativeRun(tokens=out[0, ids.shape[1]:].tolist(), prefill_ns=min(first, total), total_ns=total,
                     kernels=kernels)


def native_generate_batch(model: Any, device: torch.device, rows: list[torch.Tensor], new_tokens: int, *,
                          sampling: SamplingParams, seed: int, pad_id: int = 0) -> tuple[list[list[int]], int, str]:
    """Static batching as a transformers user writes it: the prompts ``rows`` (each ``[P_i]``) left-padded into one
    ``[B, max P]`` batch and one ``generate()`` call of ``new_tokens`` tokens per row.

    Returns each row's new tokens, the call's nanoseconds and how it ran. The batch pads with ``pad_id`` under an
    attention mask; padded fp32 forwards round differently from unpadded ones, so greedy rows may differ from
    ``native_generate`` of the same prompt after a near tie (the caller compares).
    """
    if not rows:
        raise ValueError("native_generate_batch needs at least one prompt")
    width = max(int(r.numel()) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)  # [B, max P]
    mask = torch.zeros_like(ids)  # [B, max P]
    for i, r in enumerate(rows):
        n = int(r.numel())
        ids[i, width - n:] = r.view(-1).to(device)
        mask[i, width - n:] = 1
    out, total, kernels = _timed_generate(model, device, ids, mask, new_tokens, sampling, seed, None)
    return out[:, width:].tolist(), total, kernels


def _timed_generate(model: Any, device: torch.device, ids: torch.Tensor, mask: torch.Tensor, new_tokens: int,
                    sampling: SamplingParams, seed: int,
                    streamer: _FirstToken | None) -> tuple[torch.Tensor, int, str]:
    """One ``generate()`` call on ``ids`` ``[B, P]`` under the reference's rules: output ``[B, P + new]``,
    nanoseconds, kernels."""
    config = generation_config(model, new_tokens, sampling)
    saved = model.generation_config
    devices = [device] if device.type == "cuda" else []
    with default_kernels(model) as switched, original_head(model) as swapped, \
            torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        model.generation_config = GenerationConfig(pad_token_id=config.pad_token_id,
                                                   bos_token_id=config.bos_token_id)
        try:
            synchronize(device)
            start = time.perf_counter_ns()
            if streamer is not None:
                streamer.start_ns = start
            out = model.generate(ids, generation_config=config, streamer=streamer, attention_mask=mask)
            synchronize(device)
            total = time.perf_counter_ns() - start
        finally:
            model.generation_config = saved
    kernels = "transformers generate(), default nn.Linear kernels"
    if switched:
        kernels += f" ({switched} oneDNN-prepacked linear layers switched back to nn.Linear's path for it)"
    if swapped:
        kernels += ", the model's own LM head (not the float32 one of logits_dtype)"
    return out, total, kernels
