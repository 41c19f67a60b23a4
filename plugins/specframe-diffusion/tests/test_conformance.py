"""The conformance kit on every component of specframe-diffusion: the dflash / domino / dspark drafters and the
ar / markov / path_selector / lilicorr correctors, each loaded from a tiny checkpoint in its published layout next to
a tiny Qwen3 target."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from diffusion_testkit import TARGET_LAYERS, VOCAB, write_published_checkpoint

from specframe.draft_vocab import DraftVocab, save_draft_vocab
from specframe.testing.conformance import ConformanceCase, ConformanceSuite, ProposalShape


@cache
def tiny_qwen3() -> Any:
    from specframe_hf.testing import tiny_causal_lm

    return tiny_causal_lm("qwen3", seed=7, num_layers=TARGET_LAYERS)


def hf_target() -> Any:
    from specframe_hf import HFTarget

    return HFTarget.from_model(tiny_qwen3())


def checkpoint(kind: str, **config: Any) -> Callable[[Path], dict[str, Any]]:
    """Config fields pointing at a tiny ``kind`` checkpoint, written once into the case's scratch directory."""

    def fields(workdir: Path) -> dict[str, Any]:
        if not (workdir / "config.json").is_file():
            write_published_checkpoint(workdir, kind, seed=0, target=tiny_qwen3(), **config)
        return {"checkpoint": str(workdir)}

    return fields


def with_draft_vocab(kind: str, size: int, **config: Any) -> Callable[[Path], dict[str, Any]]:
    """``checkpoint(kind)`` plus a reduced draft vocabulary of ``size`` tokens (every third id, then the rest)."""

    def fields(workdir: Path) -> dict[str, Any]:
        mapping = workdir / "draft-vocab.safetensors"
        if not mapping.is_file():
            ids = [*range(0, VOCAB, 3), *range(1, VOCAB, 3)][:size]
            save_draft_vocab(DraftVocab.from_target_ids(ids, VOCAB), mapping)
        return checkpoint(kind, **config)(workdir) | {"draft_vocab": str(mapping)}

    return fields


SHAPE = ProposalShape(depth=4, candidates=4, hidden_size=64)


class TestDiffusionConformance(ConformanceSuite):
    plugin = "diffusion"
    cases = (
        ConformanceCase("drafter", "dflash", config=checkpoint("dflash", block_size=6), target=hf_target),
        ConformanceCase("drafter", "dflash", config=checkpoint("dflash_deepseek", block_size=5), target=hf_target,
                        variant="deepseek"),
        ConformanceCase("drafter", "domino", config=checkpoint("domino", block_size=6), target=hf_target),
        ConformanceCase("drafter", "domino", config=with_draft_vocab("domino", 200, block_size=6), target=hf_target,
                        variant="draft-vocab"),
        ConformanceCase("drafter", "dspark", config=checkpoint("dspark_deepseek", block_size=5), target=hf_target),
        ConformanceCase("drafter", "dspark", config=checkpoint("dspark_zlab", block_size=5, head_type="rnn"),
                        target=hf_target, variant="zlab-rnn"),
        ConformanceCase("corrector", "ar", config=checkpoint("domino", block_size=6), target=hf_target,
                        proposal=SHAPE),
        ConformanceCase("corrector", "markov", config=checkpoint("dspark_deepseek", block_size=5),
                        target=hf_target, proposal=SHAPE),
        ConformanceCase("corrector", "markov", config=checkpoint("dspark_zlab", block_size=5, head_type="gated"),
                        target=hf_target, proposal=SHAPE, variant="zlab-gated"),
        ConformanceCase("corrector", "markov", config=checkpoint("dspark_zlab", block_size=5, head_type="rnn"),
                        target=hf_target, proposal=SHAPE, variant="zlab-rnn"),
        ConformanceCase("corrector", "path_selector", config=checkpoint("dflash_selector", block_size=6),
                        target=hf_target, proposal=SHAPE),
        ConformanceCase("corrector", "path_selector", config=lambda w: checkpoint("dflash_selector", block_size=6)(w)
                        | {"top_k": 2}, target=hf_target, proposal=SHAPE, variant="top2"),
        # The kit's random proposals carry no drafter context row, which LiLiCorr's own anchor reads: the kit checks
        # the root-embedding variant; test_lilicorr_published_anchor.py serves the published anchor end to end.
        ConformanceCase("corrector", "lilicorr", config=checkpoint("dflash_lilicorr", block_size=6,
                                                                   lilicorr_anchor="root_embedding"),
                        target=hf_target, proposal=SHAPE),
    )
