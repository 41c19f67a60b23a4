"""The ``lm_draft`` drafter's pipeline config.

Example ``drafter:`` section::

    drafter: {type: lm_draft, model: ~/models/smollm2-135m-instruct, num_speculative_tokens: 4, num_candidates: 4}
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_CANDIDATES, StageShape


class LMDraftConfig(ComponentConfig):
    """Draft with a small causal LM that shares the target's tokenizer: K candidates per depth along its
    greedy rollout."""

    type: Literal["lm_draft"] = "lm_draft"
    model: str = Field(description="local directory of the draft causal LM (config.json + weights, as written by "
                                   "save_pretrained); it must use the target's tokenizer")
    num_speculative_tokens: int = Field(4, ge=1, le=64, description="L: depths drafted per round, one draft-model "
                                                                    "forward each")
    num_candidates: int = Field(4, ge=1, le=MAX_CANDIDATES,
                                description="K: candidates per depth, the draft distribution's top K")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="draft model dtype; auto = the target's (float32 if the target does not say)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="draft model device; auto = the target's")
    check_tokenizer: bool = Field(True, description="when both model directories ship a tokenizer, require "
                                                    "identical vocabularies")

    def output_shape(self, upstream: StageShape) -> StageShape:
        return StageShape(depth=self.num_speculative_tokens, candidates=self.num_candidates)

    @field_validator("model")
    @classmethod
    def _model_given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("model is empty: set it to the local directory of the draft model")
        return value
