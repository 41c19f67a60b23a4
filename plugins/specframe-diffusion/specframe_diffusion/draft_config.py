"""`DraftModelConfig`: the fields of a published block-diffusion drafter's ``config.json``, read as published.

Three families share one backbone (docs/concepts/block-drafters.md, docs/concepts/correction-heads.md) and two file
layouts:

* **z-lab layout** (``z-lab/Qwen3-*-DFlash-b16``, ``Huang2020/Qwen3-*-Domino-b16``, SpecForge / Model-Optimizer
  DSpark exports): a Qwen3 config plus a ``dflash_config`` dict. ``dflash_config.projector_type`` selects the
  family: absent -> DFlash, ``"domino"`` (older ``"causal_v5"``) -> Domino, ``"dspark"`` -> DSpark.
  Two optional heads ride on a DFlash backbone and keep the family DFlash (the ``dflash`` drafter loads the
  backbone, a corrector the head): DFlash2's path selector (``dflash_config.selector_rank`` and
  ``selector_top_k``, as SGLang and vLLM switch it on) and LiLiCorr's lattice reranker
  (``projector_type: "lilicorr"`` with the ``lilicorr_*`` geometry, Model-Optimizer's export). A checkpoint of
  such a head may leave the backbone out (``dflash_config.head_only: true``, specframe's exports): the drafter then
  loads its base drafter's directory and the corrector this one.
* **DeepSeek layout** (``deepseek-ai/dspark_qwen3_*_block7``, ``architectures: ["Qwen3DSparkModel"]``): every
  DSpark field at the top level, and the checkpoint carries its own ``embed_tokens`` / ``lm_head`` copies. The
  same model class with ``markov_rank: 0`` is DeepSpec's retrained DFlash (``deepseek-ai/dflash_qwen3_*_block7``):
  family DFlash, but anchor-as-prediction (shift) like every DeepSeek-layout drafter.

Where a field lives (worked example, z-lab Qwen3-4B-DFlash-b16)::

    {"block_size": 16, "num_hidden_layers": 5, "hidden_size": 2560, "num_target_layers": 36,
     "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]}, ...}
    -> family "dflash", layout "zlab", shift_label False, num_slots 15

``block_size`` is read at the top level or inside ``dflash_config``; ``target_layer_ids`` missing -> the default
taps of :func:`build_target_layer_ids`.

The model (:mod:`specframe_diffusion.models`), the checkpoint files (:mod:`specframe_diffusion.checkpoint`, which
re-exports both names), the drafters and the correctors all read it, so it sits below them and imports none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from specframe.errors import CheckpointError
from specframe.files import path_problem
from specframe.tensor_files import read_json_object

DraftFamily = Literal["dflash", "domino", "dspark"]
DraftLayout = Literal["zlab", "deepseek"]
MarkovHeadType = Literal["vanilla", "gated", "rnn"]

#: ``dflash_config.projector_type`` values and the family each one means ("causal_v5" is Domino's old name).
PROJECTOR_FAMILIES: dict[str | None, DraftFamily] = {
    None: "dflash",
    "dflash": "dflash",
    "domino": "domino",
    "causal_v5": "domino",
    "dspark": "dspark",
    "lilicorr": "dflash",
}

#: LiLiCorr geometry fields of ``dflash_config`` (all required together) and their types.
LILICORR_FIELDS: dict[str, type] = {
    "lilicorr_num_layers": int, "lilicorr_num_heads": int, "lilicorr_mlp_ratio": float,
    "lilicorr_candidate_topk": int, "lilicorr_factor_dim": int, "lilicorr_vector_eps": float,
    "lilicorr_logit_scale": float,
}
#: The anchors a LiLiCorr head can be trained with: ``target_row``, LiLiCorr's projected target row before the block
#: (what a checkpoint without ``lilicorr_anchor`` holds: a published export), or ``root_embedding``, specframe's
#: root-token embedding (its exports name it); both are served (:mod:`specframe_trees.correctors.lattice`).
LILICORR_ANCHORS = ("target_row", "root_embedding")
#: Largest sensible value of the float ``lilicorr_*`` fields: the logit scale multiplies cosine factors in [-1, 1]
#: (shipped: 10; 1e3 already makes every factor a hard choice, 1e308 overflows to inf and NaN), the vector epsilon
#: guards a norm (shipped: 1e-6), the MLP ratio widens a layer (shipped: 2).
LILICORR_MAX = {"lilicorr_logit_scale": 1e3, "lilicorr_vector_eps": 1e-1, "lilicorr_mlp_ratio": 64.0}
#: Top-level ``config.json`` key where specframe's training export records the taps, in the order the drafter was
#: trained with: a config whose ``target_layer_ids`` were reordered afterwards (same layers) would silently feed
#: the ``fc`` layer its blocks in the wrong order (every draft rejected).
TRAINED_TAPS_KEY = "specframe_trained_taps"


@dataclass(frozen=True)
class LiLiCorrGeometry:
    """The ``lilicorr_*`` fields of a LiLiCorr checkpoint (``hidden_size`` defaults to the drafter's)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    mlp_ratio: float
    candidate_topk: int
    factor_dim: int
    vector_eps: float
    logit_scale: float
    anchor: str = "target_row"  # lilicorr_anchor; absent: LiLiCorr's own (a published export)
    unary: bool = False  # lilicorr_unary: the drafter's log-prob added to every factor (specframe's option)


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> tuple[int, ...]:
    """Default taps when a config has no ``target_layer_ids`` (docs/concepts/block-drafters.md).

    One draft layer taps the middle target layer; otherwise ``num_draft_layers`` evenly spaced points from 1 to
    ``num_target_layers - 3``, rounded. Example: 36 target layers, 5 draft layers -> ``(1, 9, 17, 25, 33)``.
    """
    if num_draft_layers == 1:
        return (num_target_layers // 2,)
    first, last = 1, num_target_layers - 3
    span = last - first
    return tuple(round(first + i * span / (num_draft_layers - 1)) for i in range(num_draft_layers))


@dataclass(frozen=True)
class DraftModelConfig:
    """Everything the loader, the backbone and the heads need from ``config.json``.

    ``raw`` keeps the file's dict unchanged so that saving writes back exactly what was read.
    """

    family: DraftFamily
    layout: DraftLayout
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    vocab_size: int
    attention_bias: bool
    block_size: int
    mask_token_id: int
    target_layer_ids: tuple[int, ...]
    shift_label: bool
    num_target_layers: int | None = None
    # Domino head (family "domino")
    emb_dim: int | None = None
    gru_hidden_dim: int | None = None
    pure_draft_prefix_len: int = 0
    # DSpark head (family "dspark")
    markov_rank: int | None = None
    markov_head_type: MarkovHeadType | None = None
    confidence_head: bool = False
    confidence_with_markov: bool = False
    # DFlash2 path selector (optional on a DFlash backbone)
    selector_rank: int | None = None
    selector_top_k: int | None = None
    # LiLiCorr lattice reranker (projector_type "lilicorr")
    lilicorr: LiLiCorrGeometry | None = None
    head_only: bool = False  # dflash_config.head_only: the file holds a head, the backbone is the base drafter's
    draft_vocab_size: int | None = None  # EAGLE-3 reduced vocabulary (d2t / t2d) stored with the weights
    torch_dtype: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_slots(self) -> int:
        """Draft depths per round: ``block_size`` with ``shift_label`` (DSpark 7, Domino 16), else one fewer."""
        return self.block_size if self.shift_label else self.block_size - 1

    @property
    def num_taps(self) -> int:
        return len(self.target_layer_ids)

    @classmethod
    def from_file(cls, path: str | Path) -> DraftModelConfig:
        path = Path(path)
        problem = path_problem(path)
        if problem is not None:
            raise CheckpointError(
                f"checkpoint config file {path} {problem}",
                hint="point `checkpoint:` at the directory holding the drafter's config.json and *.safetensors",
            )
        return cls.from_dict(read_json_object(path, what="checkpoint config"), source=str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config.json") -> DraftModelConfig:
        """Parse a published config dict; every problem names ``source`` and the field."""
        reader = _FieldReader(data, source)
        dflash = reader.sub_dict("dflash_config")
        deepseek = "Qwen3DSparkModel" in (data.get("architectures") or []) or (
            "markov_rank" in data and "dflash_config" not in data
        )
        layout: DraftLayout = "deepseek" if deepseek else "zlab"

        if layout == "deepseek":  # DeepSpec's DFlash baselines are the same model with markov_rank 0
            family: DraftFamily = "dspark" if data.get("markov_rank", 0) != 0 else "dflash"
        else:
            projector = dflash.get("projector_type")
            if projector not in PROJECTOR_FAMILIES:
                raise CheckpointError(
                    f"{source}: dflash_config.projector_type is {projector!r}, which specframe does not know",
                    hint=f"known projector types: {', '.join(repr(p) for p in PROJECTOR_FAMILIES if p)}",
                )
            family = PROJECTOR_FAMILIES[projector]

        hidden = reader.integer("hidden_size")
        heads = reader.integer("num_attention_heads")
        layers = reader.integer("num_hidden_layers")
        head_dim = reader.integer("head_dim", default=hidden // heads if heads else 0)
        reader.check_supported_architecture()

        block_size = reader.int_in(("block_size",), dflash, "block_size")
        mask_token_id = reader.int_in(("mask_token_id",), dflash, "mask_token_id")
        num_target_layers = reader.optional_int("num_target_layers")
        taps_raw = data.get("target_layer_ids") if layout == "deepseek" else dflash.get("target_layer_ids")
        if taps_raw is None:
            if num_target_layers is None:
                raise CheckpointError(
                    f"{source}: neither dflash_config.target_layer_ids nor num_target_layers is set",
                    hint="add the tapped target layers, e.g. \"target_layer_ids\": [1, 9, 17, 25, 33]",
                )
            taps = build_target_layer_ids(num_target_layers, layers)
        else:
            if not isinstance(taps_raw, list) or not taps_raw or not all(isinstance(t, int) for t in taps_raw):
                raise CheckpointError(f"{source}: target_layer_ids must be a non-empty list of integers, "
                                      f"found {taps_raw!r}")
            taps = tuple(taps_raw)
        trained = data.get(TRAINED_TAPS_KEY)
        if isinstance(trained, list) and trained != list(taps):
            raise CheckpointError(
                f"{source}: target_layer_ids lists {list(taps)}, but the drafter was trained tapping {trained} in "
                f"that order ({TRAINED_TAPS_KEY}); its fc layer reads the taps in the trained order",
                hint=f"restore target_layer_ids to {trained}")

        if block_size < 2:
            raise CheckpointError(f"{source}: block_size is {block_size}; a block drafter needs at least 2")

        kwargs: dict[str, Any] = {}
        if family == "domino":
            kwargs["emb_dim"] = reader.int_in(("emb_dim",), dflash, "emb_dim")
            kwargs["gru_hidden_dim"] = reader.int_in((), dflash, "gru_hidden_dim")
            kwargs["pure_draft_prefix_len"] = int(dflash.get("pure_draft_prefix_len", 0))
            shift = bool(dflash.get("shift_label", False))
        elif family == "dspark":
            holder = data if layout == "deepseek" else dflash
            rank = holder.get("markov_rank")
            if not isinstance(rank, int) or rank <= 0:
                raise CheckpointError(
                    f"{source}: DSpark needs a positive integer markov_rank, found {rank!r}",
                    hint="DSpark checkpoints ship a Markov head; markov_rank is its low-rank width (256)",
                )
            head_type = str(holder.get("markov_head_type", "vanilla")).lower()
            if head_type not in ("vanilla", "gated", "rnn"):
                raise CheckpointError(f"{source}: markov_head_type is {head_type!r}",
                                      hint="expected 'vanilla', 'gated' or 'rnn'")
            kwargs["markov_rank"] = rank
            kwargs["markov_head_type"] = head_type
            if layout == "zlab":
                kwargs["confidence_head"] = bool(dflash.get("use_confidence_head", False))
                kwargs["confidence_with_markov"] = kwargs["confidence_head"]
            shift = True  # DSpark predicts from the anchor on (both layouts)
        else:
            shift = bool(dflash.get("shift_label", False))
            kwargs.update(_optional_heads(reader, dflash, hidden, projector=dflash.get("projector_type")))
            head_only = dflash.get("head_only", False)
            if not isinstance(head_only, bool) or (head_only and "selector_rank" not in kwargs
                                                    and "lilicorr" not in kwargs):
                raise CheckpointError(f"{source}: dflash_config.head_only is {head_only!r}",
                                      hint="head_only: true marks a path-selector or LiLiCorr head stored without "
                                           "its drafter's backbone; other checkpoints hold the backbone")
            kwargs["head_only"] = head_only
        if layout == "deepseek":  # anchor-as-prediction, with or without a Markov head
            shift = True
            kwargs["confidence_head"] = bool(data.get("enable_confidence_head", False))
            kwargs["confidence_with_markov"] = bool(data.get("confidence_head_with_markov", False)) and (
                family == "dspark")

        return cls(
            family=family,
            layout=layout,
            hidden_size=hidden,
            intermediate_size=reader.integer("intermediate_size"),
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=reader.integer("num_key_value_heads", default=heads),
            head_dim=head_dim,
            rms_norm_eps=reader.number("rms_norm_eps", default=1e-6),
            rope_theta=reader.rope_theta(),
            vocab_size=reader.integer("vocab_size"),
            attention_bias=bool(data.get("attention_bias", False)),
            block_size=block_size,
            mask_token_id=mask_token_id,
            target_layer_ids=taps,
            shift_label=shift,
            num_target_layers=num_target_layers,
            torch_dtype=data.get("torch_dtype") or data.get("dtype"),
            draft_vocab_size=reader.optional_int("draft_vocab_size"),
            raw=dict(data),
            **kwargs,
        )


def _optional_heads(reader: _FieldReader, dflash: dict[str, Any], hidden: int, *,
                    projector: str | None) -> dict[str, Any]:
    """The path selector's and LiLiCorr's fields of a DFlash-family ``dflash_config`` (each all-or-nothing)."""
    out: dict[str, Any] = {}
    selector = [n for n in ("selector_rank", "selector_top_k") if dflash.get(n) is not None]
    if len(selector) == 1:
        raise CheckpointError(f"{reader.source}: dflash_config.{selector[0]} is set without "
                              f"{'selector_top_k' if selector[0] == 'selector_rank' else 'selector_rank'}",
                              hint="DFlash2's path selector needs both selector_rank and selector_top_k")
    if selector:
        for name in ("selector_rank", "selector_top_k"):
            value = reader.int_in((), dflash, name)
            if value <= 0:
                raise CheckpointError(f"{reader.source}: dflash_config.{name} must be positive, found {value}")
            out[name] = value
    if projector != "lilicorr":
        return out
    missing = [n for n in LILICORR_FIELDS if dflash.get(n) is None]
    if missing:
        raise CheckpointError(f"{reader.source}: a LiLiCorr checkpoint (projector_type lilicorr) lacks "
                              f"dflash_config.{', '.join(missing)}",
                              hint="the lilicorr_* geometry fields are required together (Model-Optimizer exports "
                                   "write them all)")
    values: dict[str, Any] = {}
    for name, kind in LILICORR_FIELDS.items():
        raw = dflash[name]
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (kind is int and not isinstance(raw, int)) \
                or raw <= 0:
            raise CheckpointError(f"{reader.source}: dflash_config.{name} must be a positive "
                                  f"{'integer' if kind is int else 'number'}, found {raw!r}")
        if name in LILICORR_MAX and not raw <= LILICORR_MAX[name]:  # also refuses inf and NaN
            raise CheckpointError(f"{reader.source}: dflash_config.{name} is {raw!r}, above the largest sensible "
                                  f"value {LILICORR_MAX[name]:g}", hint="the head's logits would overflow or saturate; "
                                                                       "use the value the head was trained with")
        values[name.removeprefix("lilicorr_")] = kind(raw)
    anchor = dflash.get("lilicorr_anchor", "target_row")  # a published export names none: LiLiCorr's own
    if anchor not in LILICORR_ANCHORS:
        raise CheckpointError(f"{reader.source}: dflash_config.lilicorr_anchor is {anchor!r}",
                              hint=f"known anchors: {', '.join(LILICORR_ANCHORS)}")
    width = dflash.get("lilicorr_hidden_size") or hidden
    if isinstance(width, bool) or not isinstance(width, int) or width <= 0 or width % values["num_heads"]:
        raise CheckpointError(f"{reader.source}: dflash_config.lilicorr_hidden_size {width!r} must be a positive "
                              f"multiple of lilicorr_num_heads ({values['num_heads']})")
    unary = dflash.get("lilicorr_unary", False)
    if not isinstance(unary, bool):
        raise CheckpointError(f"{reader.source}: dflash_config.lilicorr_unary must be true or false, found {unary!r}")
    out["lilicorr"] = LiLiCorrGeometry(hidden_size=width, anchor=anchor, unary=unary, **values)
    return out


class _FieldReader:
    """Typed access to config fields with errors that name the file and the field."""

    def __init__(self, data: dict[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def sub_dict(self, name: str) -> dict[str, Any]:
        value = self.data.get(name) or {}
        if not isinstance(value, dict):
            raise CheckpointError(f"{self.source}: {name} must be a JSON object, found {type(value).__name__}")
        return value

    def _as_int(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise CheckpointError(f"{self.source}: {name} must be an integer, found {value!r}")
        return value

    def integer(self, name: str, default: int | None = None) -> int:
        if name not in self.data or self.data[name] is None:
            if default is not None:
                return default
            raise CheckpointError(f"{self.source}: required field {name} is missing",
                                  hint="is this a DFlash/Domino/DSpark drafter config.json?")
        return self._as_int(name, self.data[name])

    def optional_int(self, name: str) -> int | None:
        value = self.data.get(name)
        return None if value is None else self._as_int(name, value)

    def int_in(self, top_names: tuple[str, ...], nested: dict[str, Any], nested_name: str) -> int:
        """An integer read from ``dflash_config`` first, then from the top level."""
        if nested.get(nested_name) is not None:
            return self._as_int(f"dflash_config.{nested_name}", nested[nested_name])
        for name in top_names:
            if self.data.get(name) is not None:
                return self._as_int(name, self.data[name])
        where = " or ".join([f"dflash_config.{nested_name}", *top_names])
        raise CheckpointError(f"{self.source}: required field {where} is missing",
                              hint="the published configs set it; copy the checkpoint's config.json unchanged")

    def number(self, name: str, default: float) -> float:
        value = self.data.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CheckpointError(f"{self.source}: {name} must be a number, found {value!r}")
        return float(value)

    def rope_theta(self) -> float:
        """RoPE base from ``rope_theta`` or the transformers-5 ``rope_parameters``; only plain RoPE is supported."""
        for name in ("rope_parameters", "rope_scaling"):
            params = self.data.get(name)
            if isinstance(params, dict):
                rope_type = params.get("rope_type", params.get("type", "default"))
                if rope_type not in ("default", None):
                    raise CheckpointError(
                        f"{self.source}: {name}.rope_type is {rope_type!r}; only plain RoPE ('default') is supported",
                        hint="the published DFlash/Domino/DSpark Qwen3 drafters use plain RoPE (rope_scaling: null)",
                    )
                if params.get("rope_theta") is not None:
                    return float(params["rope_theta"])
        return self.number("rope_theta", default=10000.0)

    def check_supported_architecture(self) -> None:
        act = self.data.get("hidden_act", "silu")
        if act != "silu":
            raise CheckpointError(f"{self.source}: hidden_act is {act!r}; the drafter MLP is SiLU-gated",
                                  hint="only Qwen3-style drafters (hidden_act: silu) are supported")
        layer_types = self.data.get("layer_types") or []
        if any(t != "full_attention" for t in layer_types) or self.data.get("use_sliding_window"):
            raise CheckpointError(f"{self.source}: sliding-window draft layers are not supported",
                                  hint="published drafters use layer_types: full_attention everywhere")
