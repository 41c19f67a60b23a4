"""Deterministic parameter initialisation for the correction heads, from an explicit `torch.Generator`.

PyTorch's module constructors initialise parameters from the global RNG, which specframe never touches.
Heads therefore build their submodules on the ``meta`` device (no memory, no RNG), allocate them with
``to_empty`` and fill them here. The bounds follow PyTorch's defaults, so a randomly initialised head
behaves like a freshly constructed PyTorch module:

* ``nn.Linear``: weight and bias uniform in ``±1/sqrt(in_features)``;
* ``nn.GRU``: every weight uniform in ``±1/sqrt(hidden_size)``;
* ``nn.Embedding``: standard normal.

Example::

    g = torch.Generator().manual_seed(0)
    head = DominoGRUHead(sizes, generator=g)   # same weights for the same seed, global RNG untouched
"""

from __future__ import annotations

import math

import torch
from torch import nn


@torch.no_grad()
def init_module_(module: nn.Module, generator: torch.Generator) -> None:
    """Fill every ``Linear``, ``GRU`` and ``Embedding`` parameter of ``module`` from ``generator``.

    Parameters are drawn on the CPU (the generator's device) in a fixed order (``named_modules`` order),
    then copied to the parameter's device and dtype.
    """
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            bound = 1.0 / math.sqrt(sub.in_features)
            _uniform_(sub.weight, bound, generator)
            if sub.bias is not None:
                _uniform_(sub.bias, bound, generator)
        elif isinstance(sub, nn.GRU):
            bound = 1.0 / math.sqrt(sub.hidden_size)
            for param in sub.parameters(recurse=False):
                _uniform_(param, bound, generator)
        elif isinstance(sub, nn.Embedding):
            values = torch.empty(sub.weight.shape, dtype=torch.float32).normal_(generator=generator)
            sub.weight.copy_(values)


def _uniform_(param: torch.Tensor, bound: float, generator: torch.Generator) -> None:
    values = torch.empty(param.shape, dtype=torch.float32).uniform_(-bound, bound, generator=generator)
    param.copy_(values)


def materialize(module: nn.Module, *, generator: torch.Generator | None, device: torch.device | str | None,
                dtype: torch.dtype | None) -> None:
    """Allocate a module built on ``meta`` and initialise it, unless ``device`` is ``"meta"``.

    ``generator=None`` uses a fresh generator seeded with 0, so construction is always deterministic.
    A head meant for a checkpoint can be built with ``device="meta"`` and loaded with
    ``load_state_dict(state, assign=True)``.
    """
    if device is not None and torch.device(device).type == "meta":
        if dtype is not None:
            module.to(dtype=dtype)
        return
    module.to_empty(device=device or "cpu")
    if dtype is not None:
        module.to(dtype=dtype)
    init_module_(module, generator if generator is not None else torch.Generator().manual_seed(0))
