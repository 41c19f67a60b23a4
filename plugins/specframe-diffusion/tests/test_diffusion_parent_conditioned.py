"""DFlash2's path selector, LiLiCorr's lattice reranker and PCTree on published-layout checkpoints: loading,
refusals, and greedy output equal to plain decoding through every builder they are meant for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusion_testkit import TARGET_LAYERS, plain_greedy, published_config, write_published_checkpoint
from specframe_diffusion.checkpoint import load_checkpoint, open_checkpoint, save_checkpoint

from specframe.errors import CheckpointError, SpecframeError
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost

PROMPT = torch.tensor([[5, 6, 7, 8, 9, 10]])
NEW_TOKENS = 16
PLUGINS = ["diffusion", "hf", "trees", "verifiers"]

# name -> (checkpoint kind, overrides, drafter, corrector, tree builder, pruner)
PIPELINES: dict[str, tuple[str, dict, str, dict, dict, dict | None]] = {
    "selector-chain": ("dflash_selector", {"block_size": 6}, "dflash", {"type": "path_selector"}, {"type": "chain"},
                       None),
    "selector-dartree": ("dflash_selector", {"block_size": 6}, "dflash", {"type": "path_selector"},
                         {"type": "dartree", "mode": "pruned", "width": 3}, {"type": "deferred_topb"}),
    "selector-pctree": ("dflash_selector", {"block_size": 6}, "dflash", {"type": "path_selector"},
                        {"type": "pctree", "children": [2, 1]}, None),
    "lilicorr-chain": ("dflash_lilicorr", {"block_size": 6}, "dflash", {"type": "lilicorr"}, {"type": "chain"}, None),
    "lilicorr-dartree": ("dflash_lilicorr", {"block_size": 6}, "dflash", {"type": "lilicorr"},
                         {"type": "dartree", "mode": "fixed"}, None),
    "markov-pctree": ("dspark_zlab", {"block_size": 5, "head_type": "gated"}, "dspark", {"type": "markov"},
                      {"type": "pctree"}, None),
}


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return PluginHost(allowlist=PLUGINS)


@pytest.fixture(scope="module")
def targets() -> dict[str, Any]:
    from specframe_hf.testing import tiny_causal_lm, two_way_lm

    two_way = two_way_lm(tiny_causal_lm("qwen3", seed=7, num_layers=TARGET_LAYERS))
    random = tiny_causal_lm("qwen3", seed=8, num_layers=TARGET_LAYERS)
    return {name: (m, plain_greedy(m, PROMPT, NEW_TOKENS)) for name, m in (("two_way", two_way), ("random", random))}


def _run(host: PluginHost, model: Any, directory: Path, name: str, budget: int) -> Any:
    from specframe_hf import HFTarget

    _, _, drafter, corrector, builder, pruner = PIPELINES[name]
    config = {"name": name, "budget": budget,
              "drafter": {"type": drafter, "checkpoint": str(directory), "top_k": 4},
              "corrector": corrector, "tree_builder": builder, "pruner": pruner or {"type": "none"},
              "verifier": {"type": "auto"}, "generation": {"stop_at_eos": False},
              "metrics": {"check_trees": True, "stage_timing": False}}
    pipe = Pipeline.from_dict(config, target=HFTarget.from_model(model), host=host)
    return pipe.generate(PROMPT, max_new_tokens=NEW_TOKENS)


@pytest.mark.slow
@pytest.mark.parametrize("target_name", ["two_way", "random"])
@pytest.mark.parametrize("name", list(PIPELINES))
def test_greedy_output_equals_plain_decoding(host, targets, tmp_path: Path, name: str, target_name: str) -> None:
    kind, overrides, *_ = PIPELINES[name]
    model, expected = targets[target_name]
    write_published_checkpoint(tmp_path, kind, seed=21, target=model, **overrides)
    result = _run(host, model, tmp_path, name, budget=10)
    assert result.tokens == expected
    if target_name == "two_way" and "chain" not in name:
        assert max(r.accepted for r in result.rounds) >= 1  # trees hit on the two-way target


# -------------------------------------------------------------------------------------------- loading
@pytest.mark.parametrize("kind", ["dflash_selector", "dflash_lilicorr"])
def test_checkpoints_round_trip_with_their_head(tmp_path: Path, kind: str) -> None:
    write_published_checkpoint(tmp_path / "a", kind, block_size=6)
    files = open_checkpoint(tmp_path / "a")
    assert files.config.family == "dflash"  # the dflash drafter loads the backbone of the same directory
    group = "path_selector" if kind == "dflash_selector" else "lilicorr_head"
    assert files.has_group(group)
    save_checkpoint(load_checkpoint(tmp_path / "a"), tmp_path / "b")
    again = open_checkpoint(tmp_path / "b")
    assert again.weights.shapes() == files.weights.shapes()
    assert torch.equal(again.group_state(group)[next(iter(files.group_state(group)))],
                       files.group_state(group)[next(iter(files.group_state(group)))])


@pytest.mark.parametrize(("kind", "edit", "message"), [
    ("dflash_selector", lambda d: d.pop("selector_top_k"), "selector_rank is set without selector_top_k"),
    ("dflash_lilicorr", lambda d: d.pop("lilicorr_factor_dim"), "lacks dflash_config.lilicorr_factor_dim"),
    ("dflash_lilicorr", lambda d: d.update(lilicorr_num_heads=1.5), "lilicorr_num_heads must be a positive integer"),
    ("dflash_lilicorr", lambda d: d.update(lilicorr_anchor="hidden"), "lilicorr_anchor is 'hidden'"),
    ("dflash_lilicorr", lambda d: d.update(lilicorr_hidden_size=33), "multiple of lilicorr_num_heads"),
])
def test_bad_head_configs_name_the_field(tmp_path: Path, kind: str, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    write_published_checkpoint(tmp_path, kind, block_size=6)
    cfg = json.loads((tmp_path / "config.json").read_text())
    edit(cfg["dflash_config"])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=message):
        open_checkpoint(tmp_path)


def test_a_head_missing_from_the_checkpoint_is_refused(host, targets, tmp_path: Path) -> None:
    from specframe_hf import HFTarget

    model, _ = targets["random"]
    write_published_checkpoint(tmp_path, "dflash", block_size=6, target=model)
    for corrector in ("path_selector", "lilicorr"):
        config = {"budget": 4, "drafter": {"type": "dflash", "checkpoint": str(tmp_path), "top_k": 4},
                  "corrector": {"type": corrector}, "tree_builder": {"type": "chain"}}
        with pytest.raises(SpecframeError, match=f"without the {corrector} head"):
            Pipeline.from_dict(config, target=HFTarget.from_model(model), host=host)


def test_the_geometry_is_read_from_dflash_config() -> None:
    from specframe_diffusion.draft_config import DraftModelConfig

    cfg = DraftModelConfig.from_dict(published_config("dflash_lilicorr", block_size=6))
    assert cfg.lilicorr is not None and cfg.lilicorr.hidden_size == 32 and cfg.lilicorr.candidate_topk == 4
    assert cfg.num_slots == 6 and cfg.selector_rank is None


# ------------------------------------------------------------------------------------------- head-only exports
def _head_only(source: Path, out: Path, *, vocab: list[int] | None = None) -> Path:
    """``source``'s selector written as specframe exports it: no backbone, optionally codebooks over a vocabulary."""
    from safetensors.torch import load_file, save_file

    from specframe.draft_vocab import DraftVocab

    cfg = json.loads((source / "config.json").read_text())
    cfg["dflash_config"]["head_only"] = True
    tensors = {k: v for k, v in load_file(str(source / "model.safetensors")).items()
               if k.startswith("candidate_selector.")}
    if vocab is not None:
        cfg["draft_vocab_size"] = len(vocab)
        for key in ("candidate_selector.predecessor_codebook", "candidate_selector.successor_codebook"):
            rows = tensors[key][vocab]
            tensors[key] = torch.cat([rows, rows.mean(0, keepdim=True)]).contiguous()
        tensors |= DraftVocab.from_target_ids(vocab, cfg["vocab_size"]).tensors()
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(cfg))
    save_file(tensors, str(out / "model.safetensors"))
    return out


@pytest.mark.parametrize("vocab", [None, "half"])
def test_a_head_only_selector_rides_on_the_base_drafter(host, targets, tmp_path: Path, vocab: str | None) -> None:
    from specframe_hf import HFTarget

    model, expected = targets["two_way"]
    write_published_checkpoint(tmp_path / "full", "dflash_selector", seed=21, target=model, block_size=6)
    ids = None if vocab is None else [*range(0, 512, 2), 301]  # both two-way tokens (300, 301) inside
    head = _head_only(tmp_path / "full", tmp_path / "head", vocab=ids)
    files = open_checkpoint(head)
    assert files.config.head_only and not files.has_group("backbone") and files.has_group("path_selector")
    config = {"budget": 10, "drafter": {"type": "dflash", "checkpoint": str(tmp_path / "full"), "top_k": 4},
              "corrector": {"type": "path_selector", "checkpoint": str(head)},
              "tree_builder": {"type": "dartree", "mode": "pruned", "width": 3}, "pruner": {"type": "deferred_topb"},
              "generation": {"stop_at_eos": False}, "metrics": {"check_trees": True}}
    pipe = Pipeline.from_dict(config, target=HFTarget.from_model(model), host=host)
    assert (pipe.stages.corrector.head.row_of is None) == (vocab is None)
    assert pipe.generate(PROMPT, max_new_tokens=NEW_TOKENS).tokens == expected
    bad = dict(config, drafter={"type": "dflash", "checkpoint": str(head), "top_k": 4})
    with pytest.raises(SpecframeError, match="no backbone weights") as info:
        Pipeline.from_dict(bad, target=HFTarget.from_model(model), host=host)
    assert "base drafter" in str(info.value.hint)
