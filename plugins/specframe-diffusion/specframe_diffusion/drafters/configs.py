"""Pipeline configs of the diffusion drafters: ``dflash``, ``domino`` and ``dspark``.

Example (``drafter:`` section of a pipeline file)::

    drafter: {type: domino, checkpoint: "${DOMINO_4B_DIR}", top_k: 64}

The checkpoint is a local directory holding the published ``config.json`` and ``*.safetensors`` unchanged; block
size, mask token, taps and the shift layout are read from it, never repeated in the pipeline file.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_CANDIDATES, StageShape

DtypeName = Literal["auto", "float32", "bfloat16", "float16"]


class DiffusionDrafterConfig(ComponentConfig):
    """Fields shared by every block-diffusion drafter."""

    checkpoint: str = Field(description="local directory with the drafter's config.json and *.safetensors")
    top_k: int = Field(64, ge=1, le=MAX_CANDIDATES,
                       description="candidates kept per depth (top-K of the full-vocabulary log-softmax; capped by "
                                   "the vocabulary size)")
    dtype: DtypeName = Field("auto", description="compute dtype of the draft backbone; auto = the target's")
    device: str = Field("auto", description="device of the draft backbone (cpu, cuda, cuda:1, ...); "
                                            "auto = the target's")

    def output_shape(self, upstream: StageShape) -> StageShape:
        """``top_k`` candidates per depth; the depth comes from the checkpoint (unknown before loading)."""
        return StageShape(candidates=self.top_k)

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint_given(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("checkpoint is empty: set it to the local directory of the downloaded drafter")
        return v


class DFlashDrafterConfig(DiffusionDrafterConfig):
    """DFlash (z-lab ``*-DFlash-b16``): non-shift, ``block_size - 1`` depths per round."""

    type: Literal["dflash"] = "dflash"


class DominoDrafterConfig(DiffusionDrafterConfig):
    """Domino backbone (``Huang2020/Qwen3-*-Domino-b16``): shift layout, ``block_size`` depths per round.

    The GRU correction head in the same checkpoint is loaded by the ``ar`` corrector.
    """

    type: Literal["domino"] = "domino"


class DSparkDrafterConfig(DiffusionDrafterConfig):
    """DSpark backbone, DeepSeek (``deepseek-ai/dspark_qwen3_*_block7``) or z-lab-compatible layout.

    The Markov head in the same checkpoint is loaded by the ``markov`` corrector.
    """

    type: Literal["dspark"] = "dspark"
