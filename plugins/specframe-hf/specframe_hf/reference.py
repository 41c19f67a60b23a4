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
    config = generation_config(model, new_tokens, sampling)
    ids = input_ids.view(1, -1).to(device)
    streamer = _FirstToken(device)
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
            out = model.generate(ids, generation_config=config, streamer=streamer,
                                 attention_mask=torch.ones_like(ids))
            synchronize(device)
            total = time.perf_counter_ns() - start
        finally:
            model.generation_config = saved
    tokens = out[0, ids.shape[1]:].tolist()
    kernels = "transformers generate(), default nn.Linear kernels"
    if switched:
        kernels += f" ({switched} oneDNN-prepacked linear layers switched back to nn.Linear's path for it)"
    if swapped:
        kernels += ", the model's own LM head (not the float32 one of logits_dtype)"
    first = streamer.first_ns - start if streamer.first_ns is not None else total
    return NativeRun(tokens=tokens, prefill_ns=min(first, total), total_ns=total, kernels=kernels)
