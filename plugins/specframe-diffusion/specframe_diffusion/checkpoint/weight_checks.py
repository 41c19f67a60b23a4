"""Checks every checkpoint tensor passes at load: floating point, and finite.

A head or drafter whose weights are NaN or ±inf loads without complaint into ``load_state_dict`` and then
rejects every draft (τ falls to 1 while each round still pays for the drafter and the head); a tensor relabelled
as an integer type (``int16``) failed deep inside ``load_state_dict`` with a bare ``RuntimeError``. Both are named
here, in one screen, before any module sees them. The check runs once per load (one ``isfinite`` pass over the
weights: milliseconds for the shipped drafters), never in the decode loop.

Example::

    state = files.group_state("path_selector")  # calls check_weights(state, ...) itself
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from specframe.errors import CheckpointError

#: Tensors named in one error before the rest are counted.
_SHOWN = 4


def check_weights(tensors: Mapping[str, torch.Tensor], *, source: str, group: str) -> None:
    """Refuse tensors that are not floating point, or hold NaN or ±inf (``tensors``: stored key -> tensor as it
    will be loaded, i.e. after any dtype conversion, so an overflow of the conversion is caught as well)."""
    not_float = [f"{key} ({str(t.dtype).removeprefix('torch.')})" for key, t in tensors.items()
                 if not t.is_floating_point()]
    if not_float:
        raise CheckpointError(f"{source}: {group} weights must be floating point (bfloat16, float16 or float32), "
                              f"but {_listed(not_float)} {'is' if len(not_float) == 1 else 'are'} not",
                              hint="the file was altered or written by another tool; re-export or re-download "
                                   "the checkpoint")
    bad = []
    for key, t in tensors.items():
        finite = torch.isfinite(t)
        if not bool(finite.all()):
            nan = int(torch.isnan(t).sum())
            bad.append(f"{key} ({nan} NaN, {int((~finite).sum()) - nan} ±inf of {t.numel()})")
    if bad:
        raise CheckpointError(f"{source}: {group} weights hold NaN or ±inf values: {_listed(bad)}; such a model "
                              "rejects every draft", hint="use a checkpoint from a finished, healthy training run "
                                                          "(a diverged run writes non-finite weights)")


def _listed(items: list[str]) -> str:
    return ", ".join(items[:_SHOWN]) + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")
