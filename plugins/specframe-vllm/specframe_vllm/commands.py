"""``specframe vllm-export DRAFTER -o OUT``: write a block drafter as a checkpoint vLLM's ``method: dflash`` loads.

Errors are :class:`~specframe.errors.SpecframeError` subclasses; the core CLI prints them without a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


def register(cli: click.Group) -> None:
    @cli.command("vllm-export")
    @click.argument("drafter", type=click.Path(path_type=Path))
    @click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
                  help="Destination directory (written atomically).")
    @click.option("--draft-vocab", type=click.Path(path_type=Path), default=None,
                  help="A reduced draft vocabulary (d2t/t2d safetensors, e.g. draft-vocab/fr8k.safetensors); "
                       "default: the checkpoint's own, if any.")
    @click.option("--target", type=click.Path(path_type=Path), default=None,
                  help="The target model directory (needed with a reduced draft vocabulary: its LM-head rows).")
    def vllm_export_cmd(drafter: Path, output: Path, draft_vocab: Path | None, target: Path | None) -> None:
        """Export a DFlash block drafter for vLLM 0.32 (docs/serving-vllm.md)."""
        from specframe_vllm.export import export_for_vllm

        result = export_for_vllm(drafter, output, draft_vocab=draft_vocab, target=target)
        spec = {"method": "dflash", "model": str(result.directory),
                "num_speculative_tokens": result.num_speculative_tokens}
        click.echo(f"{result.directory}  ({result.architecture}"
                   f"{'' if result.draft_vocab_size is None else f', draft vocabulary {result.draft_vocab_size}'})")
        click.echo(f"vLLM: speculative_config={json.dumps(spec)}")
