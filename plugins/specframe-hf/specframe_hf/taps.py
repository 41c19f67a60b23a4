"""`LayerTaps`: capture the outputs of chosen decoder layers with forward hooks.

A tap on layer ``i`` records the output of ``model.model.layers[i]``, the same tensor as
``output_hidden_states=True`` returns at ``hidden_states[i + 1]`` (index 0 is the embeddings), but without
keeping every layer's states. One exception: for the **last** layer, ``output_hidden_states`` holds the
state after the model's final norm, whereas a tap always holds the raw layer output (before that norm).

Taps are concatenated along the feature axis in the order they were requested: taps ``(1, 3)`` on a model
with hidden size H give ``[B, N, 2 * H]`` with layer 1 first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from specframe.errors import ConfigError


class LayerTaps:
    """Forward hooks on decoder layers; :meth:`collect` returns and clears what the last forward produced."""

    def __init__(self, layers: Sequence[nn.Module], model_type: str) -> None:
        self._layers = layers
        self._model_type = model_type
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._captured: dict[int, torch.Tensor] = {}
        self.layer_ids: tuple[int, ...] = ()

    def set(self, layer_ids: Sequence[int]) -> None:
        """Tap exactly these layers (an empty sequence removes every tap)."""
        ids = self.check(layer_ids)
        for handle in self._handles:
            handle.remove()
        self._handles = [self._layers[i].register_forward_hook(self._hook(i)) for i in ids]
        self._captured = {}
        self.layer_ids = ids

    def check(self, layer_ids: Sequence[int]) -> tuple[int, ...]:
        """The layer ids as a tuple; a ConfigError names a layer that does not exist or is listed twice."""
        ids = tuple(int(i) for i in layer_ids)
        n = len(self._layers)
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            raise ConfigError(
                f"tap layer(s) {bad} do not exist: the {self._model_type} target has {n} decoder layers",
                hint=f"use layer indices in 0..{n - 1}",
            )
        if len(set(ids)) != len(ids):
            raise ConfigError(f"taps repeat a layer: {list(ids)}", hint="list each layer once")
        return ids

    def _hook(self, layer_id: int) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            hidden = output[0] if isinstance(output, (tuple, list)) else output
            self._captured[layer_id] = hidden  # [B, Q, H]

        return hook

    def collect(self) -> torch.Tensor | None:  # [B, Q, n_taps * H] or None without taps
        """Concatenate the captured layer outputs of the last forward and clear them."""
        if not self.layer_ids:
            return None
        missing = [i for i in self.layer_ids if i not in self._captured]
        if missing:
            raise RuntimeError(f"decoder layer(s) {missing} did not run in the last forward")
        first = self._captured[self.layer_ids[0]].device  # layers of a split model may sit on other devices
        hidden = torch.cat([self._captured[i].to(first) for i in self.layer_ids], dim=-1)
        self._captured = {}
        return hidden

    def clear(self) -> None:
        self._captured = {}
