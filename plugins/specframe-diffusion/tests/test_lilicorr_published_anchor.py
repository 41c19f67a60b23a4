"""LiLiCorr's own anchor served: a head in the published key layout (``lilicorr.*``, ``projector_type: lilicorr``,
no ``lilicorr_anchor``: LiLiCorr's projected target row), random weights, loaded through the real loader.

LiLiCorr reads its start factors against the target's *projected hidden row just before the block*: the context
row ``hidden_norm(fc(taps))`` of the last committed position, the vector the block drafter builds that position's
keys and values from. The block drafter hands it over in ``proposal.extras["context_row"]``; the ``lilicorr``
corrector of a checkpoint without ``lilicorr_anchor`` (or with ``target_row``) anchors on it, one with
``root_embedding`` (specframe's exports) on the root token's embedding.

The checks: the drafter's row equals a float64 re-derivation from the checkpoint's own ``fc`` and ``hidden_norm``
over the committed taps, round after round; the loaded corrector's root law is the head's start law at that row
(and moves with the row, not with the root); a round decodes losslessly in a pipeline; a drafter that hands no row
is a clear error.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from diffusion_testkit import HIDDEN, TAPS, _rms, plain_greedy, write_published_checkpoint
from safetensors import safe_open
from specframe_diffusion.correctors.selector_heads import LiLiCorrCorrectorConfig, build_lilicorr_corrector
from specframe_diffusion.drafters import DFlashDrafterConfig, build_block_drafter

from specframe.errors import GenerationError
from specframe.interfaces import BuildContext, DecodeState
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost
from specframe.tree import DraftTree
from specframe.types import DraftProposal, SamplingParams, TargetOutput, VerifyResult

WIDTH = len(TAPS) * HIDDEN
BLOCK = 6


def _weights(directory: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(directory / "model.safetensors"), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def _published(directory: Path, model: Any, **kwargs: Any) -> dict[str, Any]:
    cfg, _ = write_published_checkpoint(directory, "dflash_lilicorr", seed=5, target=model, block_size=BLOCK,
                                        **kwargs)
    return cfg


def _rounds(drafter: Any, gen: torch.Generator) -> list[tuple[DraftProposal, torch.Tensor]]:
    """Drive the drafter with random taps over three rounds; each proposal with the committed taps before it."""
    prompt = torch.randint(0, 500, (1, 5), generator=gen)
    state = DecodeState(tokens=torch.cat([prompt, torch.tensor([[17]])], dim=1), prompt_len=5,
                        sampling=SamplingParams(), seed=0)
    context = torch.randn(1, 5, WIDTH, generator=gen)
    drafter.begin(state, TargetOutput(logits=torch.zeros(1, 1, 512), hidden=context))
    context = context[0]
    out = []
    for accepted, bonus in (([0, 1, 2], 40), ([0], 41), ([0, 1, 2, 3], 42)):
        out.append((drafter.propose(state), context))
        tree = DraftTree.from_lists([int(state.root[0]), 5, 6, 7, 8], [-1, 0, 1, 2, 3])
        node_taps = torch.randn(1, tree.capacity, WIDTH, generator=gen)
        result = VerifyResult(accepted_nodes=torch.tensor([accepted + [-1] * (5 - len(accepted))]),
                              num_accepted=torch.tensor([len(accepted) - 1]), bonus_token=torch.tensor([bonus]))
        emitted = [int(tree.tokens[0, i]) for i in accepted[1:]] + [bonus]
        state.tokens = torch.cat([state.tokens, torch.tensor([emitted])], dim=1)
        drafter.commit(state, tree, result, TargetOutput(logits=torch.zeros(1, 1, 1), hidden=node_taps))
        context = torch.cat([context, node_taps[0, accepted]])
    out.append((drafter.propose(state), context))
    return out


def _drafter(directory: Path, target: Any) -> Any:
    config = DFlashDrafterConfig(checkpoint=str(directory), dtype="float32", top_k=4)
    drafter = build_block_drafter(config, BuildContext(pipeline=None, target=target), "dflash")
    target.set_taps(drafter.target_layers)
    return drafter


def _corrector(directory: Path, target: Any) -> Any:
    return build_lilicorr_corrector(LiLiCorrCorrectorConfig(checkpoint=str(directory), dtype="float32"),
                                    BuildContext(pipeline=None, target=target))


def test_the_block_drafter_hands_over_the_projected_row_before_the_block(tmp_path: Path, tiny_qwen3: Any,
                                                                         hf_target: Any) -> None:
    _published(tmp_path, tiny_qwen3)
    w = {k: t.double() for k, t in _weights(tmp_path).items()}
    for proposal, context in _rounds(_drafter(tmp_path, hf_target), torch.Generator().manual_seed(3)):
        want = _rms(context[-1].double() @ w["fc.weight"].T, w["hidden_norm.weight"])  # [H]
        row = proposal.extras["context_row"]
        assert row.shape == (1, HIDDEN)
        torch.testing.assert_close(row[0].double(), want, atol=1e-5, rtol=1e-5)


def test_a_published_head_loads_and_anchors_on_that_row(tmp_path: Path, tiny_qwen3: Any, hf_target: Any) -> None:
    cfg = _published(tmp_path, tiny_qwen3)
    assert "lilicorr_anchor" not in cfg["dflash_config"]  # the published layout names no anchor
    corrector = _corrector(tmp_path, hf_target)  # the loader refused this anchor before
    proposal, _ = _rounds(_drafter(tmp_path, hf_target), torch.Generator().manual_seed(4))[1]
    k = corrector.head.sizes.candidate_topk
    frontier = proposal.root[:, None]  # [1, 1]: the root is depth 1's only parent
    got = corrector.child_logprobs(proposal, 1, frontier, torch.zeros(1, 1, 0))[0, 0, :k]

    def start_law(anchor: torch.Tensor) -> torch.Tensor:
        cands = proposal.tokens[:, :, :k]
        with torch.inference_mode():
            scores = corrector.head(F.embedding(cands, corrector.embed_weight), proposal.logprobs[:, :, :k],
                                    proposal.features, anchor)
        return torch.log_softmax(scores.start[0].double(), dim=-1).float()

    row = proposal.extras["context_row"]
    torch.testing.assert_close(got, start_law(row), atol=1e-5, rtol=1e-5)
    root = F.embedding(proposal.root.long(), corrector.embed_weight)
    assert not torch.allclose(got, start_law(root), atol=1e-3)  # the root's embedding is not the anchor
    moved = dataclasses.replace(proposal, extras={"context_row": row.flip(-1)})
    assert not torch.allclose(corrector.child_logprobs(moved, 1, frontier, torch.zeros(1, 1, 0))[0, 0, :k], got,
                              atol=1e-3)


def test_specframes_root_embedding_heads_still_anchor_on_the_root(tmp_path: Path, tiny_qwen3: Any,
                                                                  hf_target: Any) -> None:
    _published(tmp_path, tiny_qwen3, lilicorr_anchor="root_embedding")
    corrector = _corrector(tmp_path, hf_target)
    proposal, _ = _rounds(_drafter(tmp_path, hf_target), torch.Generator().manual_seed(4))[1]
    frontier = proposal.root[:, None]
    got = corrector.child_logprobs(proposal, 1, frontier, torch.zeros(1, 1, 0))
    moved = dataclasses.replace(proposal, extras={"context_row": proposal.extras["context_row"].flip(-1)})
    torch.testing.assert_close(corrector.child_logprobs(moved, 1, frontier, torch.zeros(1, 1, 0)), got)


def test_a_drafter_without_the_row_is_a_clear_error(tmp_path: Path, tiny_qwen3: Any, hf_target: Any) -> None:
    _published(tmp_path, tiny_qwen3)
    corrector = _corrector(tmp_path, hf_target)
    proposal, _ = _rounds(_drafter(tmp_path, hf_target), torch.Generator().manual_seed(4))[0]
    bare = dataclasses.replace(proposal, extras={})
    with pytest.raises(GenerationError, match=r"context_row"):
        corrector.child_logprobs(bare, 1, proposal.root[:, None], torch.zeros(1, 1, 0))


@pytest.mark.parametrize("builder", [{"type": "chain"}, {"type": "dartree", "mode": "fixed"}])
def test_a_published_head_decodes_losslessly_in_a_pipeline(tmp_path: Path, tiny_qwen3: Any,
                                                           builder: dict[str, Any]) -> None:
    from specframe_hf import HFTarget

    _published(tmp_path, tiny_qwen3)
    prompt = torch.tensor([[5, 6, 7, 8, 9, 10]])
    config = {"name": "lilicorr-published", "budget": 8,
              "drafter": {"type": "dflash", "checkpoint": str(tmp_path), "top_k": 4},
              "corrector": {"type": "lilicorr"}, "tree_builder": builder, "pruner": {"type": "none"},
              "verifier": {"type": "auto"}, "generation": {"stop_at_eos": False},
              "metrics": {"check_trees": True, "stage_timing": False}}
    pipe = Pipeline.from_dict(config, target=HFTarget.from_model(tiny_qwen3),
                              host=PluginHost(allowlist=["diffusion", "hf", "trees", "verifiers"]))
    assert pipe.stages.corrector.anchor == "target_row"
    result = pipe.generate(prompt, max_new_tokens=12)
    assert result.tokens == plain_greedy(tiny_qwen3, prompt, 12)
    assert result.num_rounds >= 1
