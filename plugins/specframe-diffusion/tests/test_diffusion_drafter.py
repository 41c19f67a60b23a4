"""The drafters against an independent float64 re-derivation, across rounds with a growing draft cache.

Taps are random tensors fed through ``TargetOutput.hidden`` (the drafter is a function of taps and tokens), so
the check isolates the drafter: backbone maths, RoPE positions, the committed-context cache, the shift layout,
the choice of embedding/LM head and the accepted-node selection in ``commit``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from diffusion_testkit import HIDDEN, MASK_TOKEN, TAPS, reference_block, write_published_checkpoint
from safetensors import safe_open
from specframe_diffusion.drafters import (
    DFlashDrafterConfig,
    DominoDrafterConfig,
    DSparkDrafterConfig,
    build_block_drafter,
)

from specframe.errors import CheckpointError, ConfigError, GenerationError
from specframe.interfaces import BuildContext, DecodeState
from specframe.tree import DraftTree
from specframe.types import SamplingParams, TargetOutput, VerifyResult

CONFIGS = {"dflash": DFlashDrafterConfig, "domino": DominoDrafterConfig, "dspark": DSparkDrafterConfig}
FAMILY = {"dflash": "dflash", "domino": "domino", "dspark_deepseek": "dspark", "dspark_zlab": "dspark",
          "dflash_deepseek": "dflash"}
WIDTH = len(TAPS) * HIDDEN


def _weights(directory: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(directory / "model.safetensors"), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def _build(kind: str, directory: Path, target: Any, **overrides: Any) -> Any:
    family = FAMILY[kind]
    config = CONFIGS[family](checkpoint=str(directory), **({"dtype": "float32"} | overrides))
    return build_block_drafter(config, BuildContext(pipeline=None, target=target), family)


class _Reference:
    """Tracks the committed context taps and recomputes each round from scratch."""

    def __init__(self, kind: str, cfg: dict[str, Any], weights: dict[str, torch.Tensor], target_model: Any) -> None:
        self.cfg, self.weights = cfg, weights
        deepseek = kind.endswith("deepseek")
        self.embed = weights["embed_tokens.weight"] if deepseek else target_model.get_input_embeddings().weight
        self.head = weights["lm_head.weight"] if deepseek else target_model.get_output_embeddings().weight
        self.shift = kind != "dflash"
        self.context = torch.zeros(0, WIDTH)

    def logits(self, root: int) -> tuple[torch.Tensor, torch.Tensor]:  # ([L, V], [L, H])
        block = torch.full((self.cfg["block_size"],), MASK_TOKEN)
        block[0] = root
        z = reference_block(self.weights, self.cfg, self.context, self.embed.detach()[block])
        slots = z if self.shift else z[1:]
        return slots @ self.head.detach().double().T, slots


def _tree(root: int, tokens: list[int], parents: list[int]) -> DraftTree:
    return DraftTree.from_lists([root, *tokens], [-1, *parents])


@pytest.mark.parametrize("kind", list(FAMILY))
def test_block_logits_match_the_reference_across_rounds(tmp_path: Path, tiny_qwen3: Any, hf_target: Any,
                                                        kind: str) -> None:
    cfg, _ = write_published_checkpoint(tmp_path / kind, kind, seed=3, target=tiny_qwen3, copy_embeddings=False,
                                        block_size=5 if kind.endswith("deepseek") else 6)
    drafter = _build(kind, tmp_path / kind, hf_target)
    assert drafter.target_layers == tuple(TAPS)
    hf_target.set_taps(drafter.target_layers)  # this test drives the target itself (the loop taps per session)
    ref = _Reference(kind, cfg, _weights(tmp_path / kind), tiny_qwen3)
    gen = torch.Generator().manual_seed(11)

    prompt = torch.randint(0, 500, (1, 5), generator=gen)
    root = 17
    state = DecodeState(tokens=torch.cat([prompt, torch.tensor([[root]])], dim=1), prompt_len=5,
                        sampling=SamplingParams(), seed=0)
    prompt_taps = torch.randn(1, 5, WIDTH, generator=gen)
    drafter.begin(state, TargetOutput(logits=torch.zeros(1, 1, 512), hidden=prompt_taps))
    ref.context = prompt_taps[0]

    # Round structure: (tree tokens, parents, accepted node indices, bonus)
    rounds = [
        ([5, 6, 7, 8, 9], [0, 1, 0, 3, 2], [0, 3, 4], 40),  # accepted path root -> 3 -> 4
        ([1, 2, 3], [0, 1, 2], [0], 41),  # nothing accepted: only the root is committed
        ([9, 8, 7, 6], [0, 1, 2, 3], [0, 1, 2, 3, 4], 42),  # the whole chain
    ]
    for step in range(len(rounds) + 1):  # a propose per round, plus one after the last commit
        proposal = drafter.propose(state)
        want_logits, want_features = ref.logits(int(state.root[0]))
        assert proposal.depth == cfg["block_size"] - (kind == "dflash")
        torch.testing.assert_close(proposal.logits[0].double(), want_logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(proposal.features[0].double(), want_features, atol=1e-5, rtol=1e-5)
        full = torch.log_softmax(proposal.logits, dim=-1)
        assert proposal.num_candidates == 64
        assert torch.equal(full.gather(-1, proposal.tokens), proposal.logprobs)
        assert torch.equal(proposal.logprobs[..., 0], full.max(dim=-1).values)
        if step == len(rounds):
            break
        tokens, parents, accepted, bonus = rounds[step]
        tree = _tree(int(state.root[0]), tokens, parents)
        node_taps = torch.randn(1, tree.capacity, WIDTH, generator=gen)
        nodes = torch.tensor([accepted + [-1] * (6 - len(accepted))])
        result = VerifyResult(accepted_nodes=nodes, num_accepted=torch.tensor([len(accepted) - 1]),
                              bonus_token=torch.tensor([bonus]))
        emitted = [tree.tokens[0, i].item() for i in accepted[1:]] + [bonus]
        state.tokens = torch.cat([state.tokens, torch.tensor([emitted])], dim=1)
        drafter.commit(state, tree, result, TargetOutput(logits=torch.zeros(1, 1, 1), hidden=node_taps))
        ref.context = torch.cat([ref.context, node_taps[0, accepted]])
    assert drafter._rows.cache.lengths == [ref.context.shape[0]]


def test_rows_are_drafted_independently(tmp_path: Path, tiny_qwen3: Any, hf_target: Any) -> None:
    write_published_checkpoint(tmp_path / "d", "dflash", seed=4, block_size=5)
    gen = torch.Generator().manual_seed(2)
    taps = torch.randn(2, 4, WIDTH, generator=gen)
    tokens = torch.randint(0, 500, (2, 5), generator=gen)

    def propose(rows: list[int]) -> torch.Tensor:
        drafter = _build("dflash", tmp_path / "d", hf_target)
        state = DecodeState(tokens=tokens[rows], prompt_len=4, sampling=SamplingParams(),
                            seed=0)
        drafter.begin(state, TargetOutput(logits=torch.zeros(len(rows), 1, 512), hidden=taps[rows]))
        return drafter.propose(state).logits

    both = propose([0, 1])
    # A batch of two may take another GEMM blocking than one row (oneDNN/AMX on Intel Xeon gives 7.5e-6 here), so
    # the bound is float32 noise on logits of size ~1, far below what another row's context leaking in moves.
    alone = [propose([0])[0], propose([1])[0]]
    torch.testing.assert_close(both[0], alone[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(both[1], alone[1], atol=1e-4, rtol=0)
    assert (alone[0] - alone[1]).abs().max() > 1e-2, "the two rows' contexts must give different drafts"


def test_out_of_sync_and_missing_taps_are_generation_errors(tmp_path: Path, hf_target: Any) -> None:
    write_published_checkpoint(tmp_path / "d", "dflash", seed=4, block_size=4)
    drafter = _build("dflash", tmp_path / "d", hf_target)
    state = DecodeState(tokens=torch.tensor([[1, 2, 3]]), prompt_len=2, sampling=SamplingParams(),
                        seed=0)
    with pytest.raises(GenerationError, match=r"TargetOutput\.hidden is None"):
        drafter.begin(state, TargetOutput(logits=torch.zeros(1, 1, 512)))
    drafter.begin(state, TargetOutput(logits=torch.zeros(1, 1, 512), hidden=torch.zeros(1, 2, WIDTH)))
    state.tokens = torch.tensor([[1, 2, 3, 4]])  # pretend a token was committed without drafter.commit
    with pytest.raises(GenerationError, match=r"call drafter\.commit"):
        drafter.propose(state)


# ------------------------------------------------------------------------------- fit to the target
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"hidden": 32}, "hidden_size is 32 but the target's is 64"),
     ({"vocab": 256, "mask": 255}, "vocab_size is 256 but the target's is 512"),
     ({"taps": [1, 7]}, r"name layer\(s\) \[7\], but the target has 4 decoder layers")],
)
def test_drafter_that_does_not_fit_the_target(make_checkpoint, hf_target: Any, kwargs: dict[str, Any],
                                              message: str) -> None:
    directory = make_checkpoint("dflash", **kwargs)
    with pytest.raises(CheckpointError, match=message):
        _build("dflash", directory, hf_target)


def test_wrong_family_and_targetless_builds(make_checkpoint, hf_target: Any) -> None:
    directory = make_checkpoint("domino")
    with pytest.raises(CheckpointError, match="is a domino checkpoint, not dflash"):
        build_block_drafter(DFlashDrafterConfig(checkpoint=str(directory)),
                            BuildContext(pipeline=None, target=hf_target), "dflash")
    with pytest.raises(ConfigError, match="needs the target model"):
        _build("domino", directory, None)


@pytest.mark.parametrize("kind", ["domino", "dspark_deepseek"])
def test_bfloat16_drafter_on_a_float32_target(make_checkpoint, hf_target: Any, kind: str) -> None:
    directory = make_checkpoint(kind, block_size=5)
    gen = torch.Generator().manual_seed(6)
    taps = torch.randn(1, 4, WIDTH, generator=gen)
    logits = {}
    for dtype in ("float32", "bfloat16"):
        drafter = _build(kind, directory, hf_target, dtype=dtype)
        state = DecodeState(tokens=torch.tensor([[3, 4, 5, 6, 7]]), prompt_len=4, sampling=SamplingParams(),
                            seed=0)
        drafter.begin(state, TargetOutput(logits=torch.zeros(1, 1, 512), hidden=taps))
        proposal = drafter.propose(state)
        assert proposal.logits.dtype == torch.float32 and proposal.features.dtype == getattr(torch, dtype)
        logits[dtype] = proposal.logits
    scale = logits["float32"].abs().max()
    assert (logits["bfloat16"] - logits["float32"]).abs().max() < 0.05 * scale


def test_building_and_drafting_leave_the_global_rng_alone(make_checkpoint, hf_target: Any) -> None:
    directory = make_checkpoint("dspark_deepseek", block_size=4)
    before = torch.get_rng_state()
    drafter = _build("dspark_deepseek", directory, hf_target)
    state = DecodeState(tokens=torch.tensor([[3, 4, 5]]), prompt_len=2, sampling=SamplingParams(),
                        seed=0)
    drafter.begin(state, TargetOutput(logits=torch.zeros(1, 1, 512), hidden=torch.zeros(1, 2, WIDTH)))
    drafter.propose(state)
    assert torch.equal(before, torch.get_rng_state())


def test_a_bf16_drafter_following_a_onednn_target_is_not_packed_and_onednn_asked_names_the_drafter(
        make_checkpoint, hf_target: Any) -> None:
    """`cpu_linear: auto` follows the target's measured rule only where packing applies, so a bf16 backbone under a
    oneDNN target builds unpacked; asking for onednn on it is an error naming drafter.cpu_linear."""
    from specframe.cpu_linear import ALWAYS, packed_layers

    directory = make_checkpoint("dflash")
    hf_target.linear_kernels = ALWAYS  # as `target.cpu_linear: onednn` leaves it
    drafter = _build("dflash", directory, hf_target, dtype="bfloat16")  # cpu_linear: auto follows the target
    assert not packed_layers(drafter.backbone)
    with pytest.raises(ConfigError, match=r"^drafter\.cpu_linear: onednn") as info:
        _build("dflash", directory, hf_target, dtype="bfloat16", cpu_linear="onednn")
    assert "drafter.cpu_linear: default" in info.value.hint and "target.cpu_linear" not in info.value.hint
