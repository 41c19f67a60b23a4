"""Training recipes: a pydantic model of ``RECIPE.yaml`` for ``specframe train``.

Five kinds share one file format (``path_selector`` and ``lattice_head`` are heads too: DFlash2's path selector
and LiLiCorr's lattice reranker over the frozen drafter's top-K candidates, :mod:`.candidate_objectives`)::

    kind: drafter            # a DFlash-style block drafter (shift layout) for the target
    name: smollm2-drafter
    output: checkpoints/smollm2-135m/drafter     # published layout, written at every checkpoint and at the end
    work_dir: runs/smollm2-drafter               # resumable training state and the metrics log
    data: {num_prompts: 3000, seed: 0}
    drafter: {block_size: 8, num_layers: 2, init_layers: [28, 29]}
    optim: {steps: 2000, lr: 8.0e-4}

    kind: ar_head            # Domino's GRU head on a frozen drafter
    base: checkpoints/smollm2-135m/drafter
    head: {gru_hidden_dim: 256, emb_dim: 128}

``extends: other.yaml`` starts from another recipe (path relative to this file) and deep-updates it, so head
recipes share their drafter's data section. Unknown fields anywhere are errors that name the field
(:func:`load_recipe`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specframe.errors import ConfigError
from specframe.files import MiB, parse_yaml, read_text
from specframe.seeds import MAX_SEED
from specframe_smollm2.training.data_config import DataConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DrafterModelConfig(_Strict):
    """Shape and initialisation of the draft backbone."""

    block_size: int = Field(8, ge=2, le=32, description="block length; shift layout -> block_size draft slots")
    num_layers: int = Field(2, ge=1, le=8, description="draft decoder layers")
    init_layers: tuple[int, ...] | None = Field(
        (28, 29), description="target layers copied into the draft layers (None: random initialisation)")
    mask_token_id: int = Field(16, ge=0, description="token fed at masked block positions (an unused special)")
    normalize_taps: bool = Field(True, description="divide each tap dimension by its RMS (folded into fc on export)")
    fc_init: Literal["last_tap", "random"] = Field(
        "last_tap", description="'last_tap': context = the last tapped layer's output (as the next target layer "
                                "sees it); 'random': small random weights")

    @model_validator(mode="after")
    def _init_count(self) -> DrafterModelConfig:
        if self.init_layers is not None and len(self.init_layers) != self.num_layers:
            raise ValueError(f"init_layers lists {len(self.init_layers)} layers but num_layers is "
                             f"{self.num_layers}; give one target layer per draft layer, or null")
        return self


class LatticeConfig(_Strict):
    """LiLiCorr's lattice reranker: geometry (exported as ``lilicorr_*``) and its three-term objective."""

    hidden_size: int = Field(128, ge=8, description="width of the lattice transformer")
    num_layers: int = Field(2, ge=1, le=8, description="lattice transformer layers (LiLiCorr: 2)")
    num_heads: int = Field(4, ge=1, description="attention heads (divide hidden_size)")
    mlp_ratio: float = Field(2.0, gt=0, le=8, description="MLP width / hidden_size")
    factor_dim: int = Field(64, ge=2, description="width of the out / in factor vectors")
    logit_scale: float = Field(10.0, gt=0, le=1e3, description="factors are logit_scale x cosine (fixed)")
    vector_eps: float = Field(1e-6, gt=0, lt=0.5, description="epsilon of the factor vectors' L2 normalisation")
    anchor: Literal["root_embedding", "target_row"] = Field(
        "root_embedding", description="root_embedding: the root token's target embedding (what specframe serves); "
                                      "target_row: the target's projected tap row before the block (LiLiCorr's "
                                      "own anchor; the block drafters hand it to the corrector)")
    unary: bool = Field(False, description="add the drafter's log-prob of the later candidate to every factor (a "
                                           "residual on the frozen drafter's law; LiLiCorr: off)")
    w_ce: float = Field(0.25, ge=0, description="weight of the K-way cross-entropy along the true path")
    w_margin: float = Field(0.0, ge=0, description="weight of the hinge pushing the true candidate above the best "
                                                   "other one by `margin`")
    margin: float = Field(2.0, gt=0, description="hinge width")
    w_pen: float = Field(0.25, ge=0, description="weight of the head's expected target-logit gap to the true token")

    @model_validator(mode="after")
    def _consistent(self) -> LatticeConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}")
        if self.w_ce + self.w_margin + self.w_pen <= 0:
            raise ValueError("w_ce, w_margin and w_pen are all 0: the reranker would get no gradient")
        return self


class HeadConfig(_Strict):
    """Sizes of a correction head trained on a frozen drafter."""

    gru_hidden_dim: int = Field(256, ge=8, description="Domino GRU width G")
    emb_dim: int = Field(128, ge=8, description="Domino projection width E")
    markov_rank: int = Field(128, ge=8, description="DSpark Markov rank r")
    markov_head_type: Literal["vanilla", "gated"] = Field("vanilla", description="DSpark head variant")
    selector_rank: int = Field(256, ge=1, description="DFlash2 path selector rank r")
    top_k: int = Field(16, ge=1, description="candidates per slot of the path selector / lattice (DFlash2: 16)")
    draft_vocab: str | None = Field(None, description="candidates from this reduced draft vocabulary (a d2t/t2d "
                                                      "safetensors file), as the pipelines serve the drafter; "
                                                      "None: the whole vocabulary")
    lattice: LatticeConfig = LatticeConfig()


class OptimConfig(_Strict):
    steps: int = Field(2000, ge=1, description="optimizer steps in total (resuming continues to this count)")
    lr: float = Field(8e-4, gt=0)
    warmup: int = Field(100, ge=0, description="linear warm-up steps, then cosine decay to lr_min_ratio * lr")
    lr_min_ratio: float = Field(0.1, ge=0, le=1)
    weight_decay: float = Field(0.0, ge=0)
    grad_clip: float = Field(1.0, gt=0)
    batch_seqs: int = Field(8, ge=1, description="sequences per step")
    anchors: int = Field(32, ge=1, description="random anchor blocks per sequence")
    max_minutes: float | None = Field(None, gt=0, description="stop (with a checkpoint) after this much wall time")


class LossConfig(_Strict):
    gamma: float = Field(5.0, gt=0, description="slot k (0-based) weighted by exp(-k / gamma)")
    soft_weight: float = Field(0.5, ge=0, le=1, description="weight of the target top-k soft CE vs hard CE")
    soft_topk: int = Field(4, ge=1, description="target top-k ids used as soft labels (at most data.topk)")
    soft: Literal["renormalised_topk", "forward_kl"] = Field(
        "renormalised_topk", description="renormalised_topk: cross-entropy against the target's top-k renormalised "
                                         "over its k ids; forward_kl: KL(target || drafter) over the top-k tokens "
                                         "and the rest of the vocabulary as one bucket, with the target's exact "
                                         "probabilities (losses.py)")
    sampled_vocab: int = Field(2048, ge=0, description="random extra vocabulary ids in the sampled softmax "
                                                       "(0: full-vocabulary softmax)")


class EvalConfig(_Strict):
    every: int = Field(200, ge=1, description="held-out evaluation every N steps")
    seqs: int = Field(64, ge=1, description="held-out sequences evaluated")
    anchors: int = Field(16, ge=1, description="anchors per held-out sequence")
    seed: int = Field(1234, ge=0, le=MAX_SEED, description="seed of the held-out anchors (fixed across evaluations)")


class Recipe(_Strict):
    """A complete training recipe (see the module docstring)."""

    kind: Literal["drafter", "ar_head", "markov_head", "path_selector", "lattice_head"]
    name: str
    output: str = Field(description="directory of the published-layout checkpoint")
    work_dir: str = Field(description="directory of the resumable state and metrics log")
    target: str | None = Field(None, description="converted target directory (default: the setup-target cache)")
    base: str | None = Field(None, description="drafter checkpoint the head is trained on (heads only)")
    init_from: str | None = Field(None, description="published-layout checkpoint to start from (warm start: the "
                                                    "drafter's weights, or a head checkpoint's head); used only "
                                                    "when work_dir holds no state yet")
    seed: int = Field(0, ge=0, le=MAX_SEED - 1, description="seed of the initial weights (and, plus one, of the "
                                                            "batch order)")
    threads: int = Field(2, ge=1, description="torch CPU threads")
    checkpoint_every: int = Field(100, ge=1, description="write the resumable state every N steps")
    data: DataConfig = DataConfig()
    drafter: DrafterModelConfig = DrafterModelConfig()
    head: HeadConfig = HeadConfig()
    optim: OptimConfig = OptimConfig()
    loss: LossConfig = LossConfig()
    eval: EvalConfig = EvalConfig()

    @model_validator(mode="after")
    def _base_for_heads(self) -> Recipe:
        if self.kind != "drafter" and not self.base:
            raise ValueError(f"a {self.kind} recipe needs `base:` (the drafter checkpoint directory)")
        return self


def _field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def _deep_update(base: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_update(base[key], value)
        else:
            base[key] = value


def _read_mapping(path: Path) -> object:
    """The YAML document of a recipe file, read with the project's one text reader (size, encoding, duplicate
    keys and alias expansion checked)."""
    text = read_text(path, what="recipe file", max_bytes=MiB, hint="give the path of a RECIPE.yaml")
    return parse_yaml(text, source=str(path))[0]


def _resolve_extends(path: Path, data: dict, seen: tuple[Path, ...]) -> dict:
    """``extends: other.yaml`` (relative to ``path``): the other recipe's fields, deep-updated with this one's."""
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent.strip():
        raise ConfigError(f"{path}: `extends:` must be one recipe path, found {parent!r}",
                          hint="e.g. extends: drafter.yaml (relative to this file)")
    base_path = (path.parent / str(parent)).resolve()
    if base_path in seen:
        raise ConfigError(f"{path}: `extends: {parent}` makes a cycle", hint="remove one of the extends lines")
    if not base_path.is_file():
        raise ConfigError(f"{path}: `extends: {parent}` names no file ({base_path})",
                          hint="give a recipe path relative to this file")
    base = _read_mapping(base_path)
    if not isinstance(base, dict):
        raise ConfigError(f"{base_path} must hold a mapping of recipe fields", hint="start with `kind: drafter`")
    merged = _resolve_extends(base_path, base, (*seen, base_path))
    _deep_update(merged, data)
    return merged


def load_recipe(path: str | Path, overrides: dict | None = None) -> Recipe:
    """Read and validate ``path``; every problem becomes a :class:`ConfigError` naming the field."""
    path = Path(path)
    data = _read_mapping(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of recipe fields", hint="start with `kind: drafter`")
    data = _resolve_extends(path, data, seen=(path.resolve(),))
    _deep_update(data, overrides or {})
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = _field_path(err["loc"])
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown field '{where}'")
            else:
                problems.append(f"{where}: {err['msg']}")
        raise ConfigError(f"{path}: invalid recipe: " + "; ".join(problems),
                          hint="fields are listed in specframe_smollm2.training.recipe (kind, name, output, "
                               "work_dir, data, drafter, head, optim, loss, eval)") from None
