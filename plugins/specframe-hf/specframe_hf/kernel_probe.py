"""``cpu_linear`` on a Hugging Face model: ``default``, ``onednn``, or ``auto`` measured on the model itself.

``auto`` on a float32 CPU model packs every linear layer (each keeps its ``nn.Linear`` weight too), times
forwards of 1, 4 and 17 new tokens over a 64-token cache with each kernel, and keeps the rule
:func:`specframe.cost.kernel_choice.decide` derives: oneDNN everywhere, the default BLAS everywhere (the packed
copies are then dropped again), or a dispatch by the product's row count. The choice is cached per CPU model,
thread count, torch version, model config and dtype (:mod:`specframe.cost.kernel_choice`), so only the first
load on a machine measures (about a second for SmolLM2-135M; a notice says what was chosen). Threads are those
in effect when the model loads.

Example::

    kernels = apply_cpu_linear(model, "auto", what="the target 'smollm2'")
    kernels.describe()     # "default BLAS below 4 rows, oneDNN prepacked from 4 rows" (an Intel Xeon with AMX)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from specframe.cost.kernel_choice import MEASURE_ROWS, choice_key, choose_linear_kernels, measure_kernels
from specframe.cpu_linear import (
    ALWAYS,
    NEVER,
    LinearKernels,
    pack_linear_layers,
    resolve_cpu_linear,
    set_linear_kernels,
    unpack_linear_layers,
)
from specframe.notices import notify as print_notice
from specframe_hf.compat import accepts_logits_to_keep, cache_kwarg

#: Cached tokens under the measured forwards (a short prompt).
CONTEXT = 64


def model_config_hash(model: Any) -> str:
    """A hash of the model's architecture config (paths and versions left out), for the choice cache."""
    config = {k: v for k, v in model.config.to_dict().items()
              if not k.startswith("_") and k not in ("transformers_version", "name_or_path")}
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def forward_on_cache(model: Any, *, context: int = CONTEXT, most: int = max(MEASURE_ROWS)) -> Callable[[int], None]:
    """``run(q)``: one forward of ``q`` new tokens over a fixed ``context``-token cache (cropped back after)."""
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None:
        context = max(1, min(context, int(limit) - most - 1))
    vocab = int(model.config.vocab_size)
    ids = (torch.arange(context + most, dtype=torch.long) * 7919 % vocab).view(1, -1)  # [1, context + most]
    cache = DynamicCache(config=model.config)
    kwarg = cache_kwarg(model)
    keep = accepts_logits_to_keep(model)
    with torch.inference_mode():
        model(input_ids=ids[:, :context], use_cache=True, **{kwarg: cache})

    def run(q: int) -> None:
        extra = {"logits_to_keep": q} if keep else {}
        with torch.inference_mode():
            model(input_ids=ids[:, context:context + q], use_cache=True, **{kwarg: cache}, **extra)
        cache.crop(-q)

    return run


def apply_cpu_linear(model: Any, setting: str, *, what: str,
                     notify: Callable[[str], None] = print_notice) -> LinearKernels:
    """Apply ``cpu_linear`` (``default`` / ``onednn`` / ``auto``) to ``model`` in place; return the rule in force."""
    if setting == "onednn":
        pack_linear_layers(model, what=what)
        return ALWAYS
    if resolve_cpu_linear(setting, model) == "default":
        return NEVER
    pack_linear_layers(model, what=what)
    key = choice_key(model=model_config_hash(model), dtype="float32")

    def measure() -> Any:
        return measure_kernels(forward_on_cache(model), lambda rule: set_linear_kernels(model, rule))

    choice = choose_linear_kernels(key, measure, notify)
    if choice.kernels.uses_onednn:
        set_linear_kernels(model, choice.kernels)
    else:
        unpack_linear_layers(model)
    if choice.measured:
        notify(f"cpu_linear: auto for {what} on {key['cpu']} with {key['threads']} thread(s): "
               f"{choice.timings.summary()}; using {choice.kernels.describe()} "
               + (f"(cached in {choice.path})" if choice.cached else "for this run only (not cached)"))
    return choice.kernels
