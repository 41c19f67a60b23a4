"""`ModelRunner`: one transformers causal LM's forward on a KV cache, and the facts every caller of it needs.

`HFTarget` (the single-sequence `TargetModel` API) and `HFRows` (the decode loop's rows) both run the model
through one runner, so neither reads the other's fields: the cache argument's name (``cache`` in transformers
5.24, ``past_key_values`` before), whether ``logits_to_keep`` is accepted, the execution device and dtype, the
context window, the vocabulary and the layer taps.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from specframe.errors import GenerationError
from specframe_hf.compat import accepts_logits_to_keep, cache_kwarg
from specframe_hf.device_map import compute_devices, execution_device, parameter_dtype
from specframe_hf.taps import LayerTaps


class ModelRunner:
    """See the module docstring."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.model_type: str = model.config.model_type
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])  # PackedLinear keeps .weight
        self.max_length: int | None = getattr(model.config, "max_position_embeddings", None)
        self.device = execution_device(model)  # where ids, the tree mask and the random keys go
        self.devices = compute_devices(model)  # accelerators of a split model (the stage clocks wait for them)
        self.dtype = parameter_dtype(model)
        self.taps = LayerTaps(model.model.layers, self.model_type)
        self._cache_kwarg = cache_kwarg(model)
        self._logits_to_keep = accepts_logits_to_keep(model)

    @property
    def cache_kwarg(self) -> str:
        return self._cache_kwarg

    def check_prompt_ids(self, input_ids: torch.Tensor) -> int:
        """The length ``P`` of prompt ids ``[R, P]`` for a prefill, after refusing a bad shape, a prompt longer than
        the context and ids outside the vocabulary (each a one-line `GenerationError` with its fix)."""
        if input_ids.dim() != 2 or input_ids.shape[1] == 0:
            raise GenerationError(f"prefill expects token ids [R, P] with P >= 1, got shape {tuple(input_ids.shape)}",
                                  hint="pass a batch-first 2-D tensor, e.g. ids.view(1, -1)")
        length = int(input_ids.shape[1])
        if self.max_length is not None and length > self.max_length:
            raise GenerationError(
                f"the prompt has {length} tokens but the {self.model_type} target's context is {self.max_length}",
                hint="shorten the prompt (max_position_embeddings bounds every position)")
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= self.vocab_size:
            raise GenerationError(f"prompt token ids must lie in [0, {self.vocab_size}), found {low}..{high}",
                                  hint="encode the prompt with this model's tokenizer")
        return length

    def new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.model.config)

    def forward(self, input_ids: torch.Tensor, cache: DynamicCache, keep: int,
                **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:  # ([B, keep, V] float32, taps)
        """One forward of ``input_ids`` ``[B, Q]`` on ``cache``: float32 logits of the last ``keep`` positions and
        the tapped hidden states ``[B, Q, n_taps * H]`` (None without taps)."""
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = keep
        out = self.model(input_ids=input_ids, use_cache=True, **{self._cache_kwarg: cache}, **kwargs)
        hidden = self.taps.collect()
        return out.logits[:, -keep:].float(), None if hidden is None else hidden.to(self.device)
