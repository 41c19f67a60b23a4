"""Pipeline configs of the diffusion drafters: ``dflash``, ``domino`` and ``dspark``.

Example (``drafter:`` section of a pipeline file)::

    drafter: {type: domino, checkpoint: "${DOMINO_4B_DIR}", top_k: 64}

The checkpoint is a local directory holding the published ``config.json`` and ``*.safetensors`` unchanged; block
size, mask token, taps and the shift layout are read from it, never repeated in the pipeline file.

``draft_vocab`` selects a reduced draft vocabulary (an EAGLE-3 ``d2t`` / ``t2d`` safetensors file, e.g. made by
``specframe vocab-subset``): candidates come only from it, the target still verifies over the full vocabulary::

    drafter: {type: dflash, checkpoint: checkpoints/smollm2-135m/drafter,
              draft_vocab: checkpoints/smollm2-135m/draft-vocab/fr16k.safetensors}
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
                       description="candidates kept per depth (top-K of the draft-vocabulary log-softmax; capped "
                                   "by the vocabulary size)")
    draft_vocab: str | None = Field(
        None, description="reduced draft vocabulary: a safetensors file with the EAGLE-3 d2t/t2d mapping; "
                          "`full` = the whole vocabulary even if the checkpoint carries a mapping; default: the "
                          "checkpoint's own d2t/t2d when present, else the whole vocabulary")
    dtype: DtypeName = Field("auto", description="compute dtype of the draft backbone; auto = the target's")
    device: str = Field("auto", description="device of the draft backbone (cpu, cuda, cuda:1, ...); "
                                            "auto = the target's")
    cpu_linear: Literal["auto", "default", "onednn"] = Field(
        "auto", description="onednn: prepack the draft backbone's linear layers for oneDNN (float32 CPU); "
                            "auto = the target's measured rule where it applies (an LM head shared with the "
                            "target is packed with it)")

    def output_shape(self, upstream: StageShape) -> StageShape:
        """``top_k`` candidates per depth; the depth comes from the checkpoint (unknown before loading)."""
        return StageShape(candidates=self.top_k)

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint_given(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("checkpoint is empty: set it to the local directory of the downloaded drafter")
        return v

    @field_validator("draft_vocab")
    @classmethod
    def _draft_vocab_given(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("draft_vocab is empty: give a d2t/t2d safetensors file, `full`, or leave it out")
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
