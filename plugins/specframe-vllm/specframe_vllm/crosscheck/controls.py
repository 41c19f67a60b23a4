"""The cross-check's negative controls: exports that are wrong in ways the comparer must catch (main environment).

``make vllm-check`` runs vLLM on each and requires the comparer to report a failure (``compare --control``):

* ``noise``: every floating-point tensor ``w`` of the export replaced by ``w * (1 + sigma * n)``, ``n`` standard
  normal per element (seeded), stored in float32 (bfloat16's 2^-8 rounding would swallow part of it). With the
  default ``sigma`` (3 %, what ``make vllm-check`` runs) the drafter drafts as well as before (τ within 5 %: on
  the 3-prompt development run it did not move at all) while a few rounds accept a different number of drafts,
  so per-prompt, per-position counts move, and its log-probabilities move by far more than float32 rounding;
* ``swap``: the tensors of decoder layers 0 and 1 exchanged (``layers.0.*`` <-> ``layers.1.*``), everything else
  bit for bit: an export that loads, runs and drafts, in the wrong layer order.

Each control directory holds the export's ``config.json`` (unchanged), its ``model.safetensors`` and a
``control.json`` saying what was done. Worked example of ``noise`` at sigma 0.03: a weight 0.5 with ``n = -1.2``
becomes ``0.5 * (1 - 0.036) = 0.482``.

Usage::

    .venv/bin/python -m specframe_vllm.crosscheck.controls noise runs/vllm-check/drafter \\
        runs/vllm-check/control-noise --sigma 0.03
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specframe.errors import CheckpointError

KINDS = ("noise", "swap")
#: The file that marks a directory as a control this module wrote (and so may replace).
MARKER = "control.json"


def load_export(directory: Path) -> dict[str, torch.Tensor]:
    """Every tensor of an exported drafter directory (``*.safetensors``), by key."""
    files = sorted(directory.glob("*.safetensors"))
    if not (directory / "config.json").is_file() or not files:
        raise CheckpointError(f"{directory} is not an exported drafter (no config.json or no *.safetensors)",
                              hint="run `specframe vllm-export` first")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors.update(load_file(f))
    return tensors


def with_noise(tensors: dict[str, torch.Tensor], sigma: float, seed: int) -> dict[str, torch.Tensor]:
    """Floating tensors times ``1 + sigma * n`` (float32), the others (``d2t``) unchanged; keys in sorted order
    draw from one seeded generator, so the result depends only on ``sigma`` and ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key in sorted(tensors):
        t = tensors[key]
        if t.is_floating_point():
            w = t.float()
            out[key] = (w * (1.0 + sigma * torch.randn(w.shape, generator=gen))).contiguous()
        else:
            out[key] = t
    return out


def with_layers_swapped(tensors: dict[str, torch.Tensor], a: int = 0, b: int = 1) -> dict[str, torch.Tensor]:
    """Layer ``a``'s tensors under layer ``b``'s keys and the reverse; needs both layers, with the same keys."""
    pa, pb = f"layers.{a}.", f"layers.{b}."
    keys_a = {k[len(pa):] for k in tensors if k.startswith(pa)}
    keys_b = {k[len(pb):] for k in tensors if k.startswith(pb)}
    if not keys_a or keys_a != keys_b:
        raise CheckpointError(f"the export has no matching layers {a} and {b} to swap",
                              hint="the swap control needs a drafter with at least two decoder layers")
    out = {}
    for key, t in tensors.items():
        if key.startswith(pa):
            out[pb + key[len(pa):]] = t
        elif key.startswith(pb):
            out[pa + key[len(pb):]] = t
        else:
            out[key] = t
    return out


def write_control(kind: str, export: Path, output: Path, *, sigma: float = 0.03, seed: int = 0) -> Path:
    """Write the ``kind`` control of ``export`` to ``output`` (module docstring). ``output`` must be new or a
    control this function wrote before (it holds :data:`MARKER`); it is replaced whole."""
    if kind not in KINDS:
        raise CheckpointError(f"unknown control '{kind}'", hint=f"controls: {', '.join(KINDS)}")
    if output.exists() and not (output / MARKER).is_file():
        raise CheckpointError(f"{output} exists and is not a control directory written by this module",
                              hint="choose a new directory (it is replaced whole)")
    tensors = load_export(export)
    changed = with_noise(tensors, sigma, seed) if kind == "noise" else with_layers_swapped(tensors)
    tmp = output.with_name(output.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copyfile(export / "config.json", tmp / "config.json")
    save_file(changed, str(tmp / "model.safetensors"))
    what: dict[str, object] = {"kind": kind, "export": str(export)}
    what.update({"sigma": sigma, "seed": seed} if kind == "noise" else {"swapped": [0, 1]})
    (tmp / MARKER).write_text(json.dumps(what, indent=1) + "\n")
    shutil.rmtree(output, ignore_errors=True)
    tmp.rename(output)
    return output


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=KINDS)
    ap.add_argument("export", type=Path, help="the exported drafter directory (specframe vllm-export)")
    ap.add_argument("output", type=Path, help="the control's directory (new, or a control written before)")
    ap.add_argument("--sigma", type=float, default=0.03, help="relative noise of the noise control")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        out = write_control(args.kind, args.export, args.output, sigma=args.sigma, seed=args.seed)
    except CheckpointError as exc:
        print(f"error: {exc}")
        return 2
    print(f"control '{args.kind}' of {args.export} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
