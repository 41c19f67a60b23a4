"""The ``data:`` section of a training recipe: which prompts, how the target answers them, where shards go."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from specframe.seeds import MAX_SEED
from specframe_smollm2.training.prompt_files import PromptFile

KINDS = ("math", "code", "stub", "chat", "word_problem", "instruct", "multi", "self_chat")


class DataConfig(BaseModel):
    """Target-generated training data (see :mod:`specframe_smollm2.training.generate_data`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dir: str = Field("data-cache/smollm2-v1", description="directory of the shards (gitignored; reused if present)")
    num_prompts: int = Field(3000, ge=1, description="templated prompts to generate")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of the prompt templates")
    mix: dict[str, float] = Field({"math": 0.4, "code": 0.35, "chat": 0.25},
                                  description="relative weight of each templated prompt kind (math, code, "
                                              "stub, chat, word_problem, instruct, multi, self_chat)")
    prompt_files: tuple[PromptFile, ...] = Field((), description="prompts read from files (added to the "
                                                                  "templated ones, then shuffled with the seed)")
    decontaminate: tuple[PromptFile, ...] = Field((), description="evaluation sets: prompts sharing a word "
                                                                   "n-gram with them are dropped")
    decontaminate_ngram: int = Field(10, ge=3, description="n of the decontamination n-grams")
    include: tuple[DataConfig, ...] = Field((), description="further data sections (each with its own dir, "
                                                            "prompts and split) generated and trained on too")
    batch_size: int = Field(32, ge=1, description="prompts per generate() call (left padded)")
    max_new_tokens: int = Field(128, ge=1, description="response length cap")
    taps: tuple[int, ...] = Field((1, 7, 14, 20, 27), description="target decoder layers recorded")
    topk: int = Field(8, ge=1, description="target top-k log-probs stored per response position")
    threads: int = Field(1, ge=1, description="torch threads while generating (1 avoids OpenMP oversubscription "
                                               "on a shared 2-core machine)")
    heldout_every: int = Field(20, ge=2, description="prompt index % heldout_every == 0 -> held-out split")
    max_shards: int | None = Field(None, ge=1, description="use only the first N shards (None: all that exist)")

    @field_validator("mix")
    @classmethod
    def _known_kinds(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown prompt kind(s) {unknown}; use {', '.join(KINDS)}")
        if not any(w > 0 for w in v.values()):
            raise ValueError("at least one prompt kind needs a positive weight")
        return v

    def generation_meta(self) -> dict:
        """The fields that determine the shards' content (a directory is reused only if they match)."""
        meta = self.model_dump(mode="json", exclude={"dir", "heldout_every", "max_shards", "threads", "include"})
        if not self.prompt_files and not self.decontaminate:  # data made before these fields existed still matches
            for name in ("prompt_files", "decontaminate", "decontaminate_ngram"):
                del meta[name]
        return meta


DataConfig.model_rebuild()
