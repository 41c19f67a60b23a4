"""The ``lm_draft`` drafter on its own: cached proposals equal an uncached rollout, the cache follows the
commits, and bad models or configs fail with messages that say how to fix them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lmdraft_testkit import VOCAB, draft_model, rollout_reference, save_draft, target_model
from pydantic import ValidationError
from specframe_example_lmdraft import LMDraftConfig, LMDrafter
from specframe_example_lmdraft.plugin import build_lm_draft
from specframe_hf import HFTarget
from specframe_hf.testing import tiny_causal_lm, tiny_tokenizer

from specframe.errors import CheckpointError, ConfigError
from specframe.interfaces import BuildContext
from specframe.testing.conformance.inputs import greedy_decode

PROMPT = [7, 99, 3, 250, 18, 42, 7, 99]


def run(kind: str, rounds: int = 6, depth: int = 4, k: int = 3) -> tuple[LMDrafter, list, object]:
    drafter = LMDrafter(draft_model(kind), vocab_size=VOCAB, depth=depth, num_candidates=k)
    trace = greedy_decode(drafter, HFTarget.from_model(target_model()), PROMPT, rounds)
    return drafter, trace.proposals, trace


@pytest.mark.parametrize("kind", ["same", "noisy", "other"])
def test_cached_proposals_equal_an_uncached_rollout(kind: str) -> None:
    drafter, proposals, trace = run(kind)
    committed = 1  # the prefill token
    for r, proposal in enumerate(proposals):
        tokens = PROMPT + trace.tokens[:committed]
        ids, logprobs = rollout_reference(drafter.model, tokens, depth=4, k=3)
        assert torch.equal(proposal.tokens[0], ids), f"round {r}"
        assert torch.allclose(proposal.logprobs[0], logprobs, atol=1e-5), f"round {r}"
        committed += trace.accepted[r] + 1


def test_a_copy_of_the_target_is_accepted_at_every_depth() -> None:
    _, _, trace = run("same")
    assert trace.accepted == [4] * 6


def test_a_noisy_draft_is_accepted_sometimes_and_the_cache_follows() -> None:
    drafter, _, trace = run("noisy", rounds=8)
    assert 0 < sum(trace.accepted) < 4 * 8, trace.accepted  # both hits and misses happened
    cached = drafter._cached.shape[1]
    assert drafter._cache.get_seq_length() == cached
    tokens = PROMPT + trace.tokens
    assert drafter._cached[0].tolist() == tokens[:cached] and cached <= len(tokens) - 1


def test_proposal_layout() -> None:
    _, proposals, _ = run("other", rounds=2, depth=5, k=7)
    p = proposals[0]
    assert p.tokens.shape == (1, 5, 7) and p.logprobs.dtype == torch.float32 and p.logits.shape == (1, 5, VOCAB)
    assert bool((p.logprobs[..., :-1] >= p.logprobs[..., 1:]).all())


# ------------------------------------------------------------------------------------------------- errors
def test_config_is_checked() -> None:
    with pytest.raises(ValidationError, match="num_speculative_tokens"):
        LMDraftConfig(model="/m", num_speculative_tokens=0)
    with pytest.raises(ValidationError, match="model is empty"):
        LMDraftConfig(model="  ")


def test_missing_model_directory(tmp_path: Path) -> None:
    ctx = BuildContext(pipeline=None, target=HFTarget.from_model(target_model()))
    with pytest.raises(CheckpointError, match=r"no config\.json") as info:
        build_lm_draft(LMDraftConfig(model=str(tmp_path / "nowhere")), ctx)
    assert "save_pretrained" in info.value.hint


def test_draft_vocabulary_must_cover_the_target(tmp_path: Path) -> None:
    tiny_causal_lm("llama", seed=1, vocab_size=256).save_pretrained(tmp_path)
    ctx = BuildContext(pipeline=None, target=HFTarget.from_model(target_model()))
    with pytest.raises(ConfigError, match="256 output tokens but the target's vocabulary has 512"):
        build_lm_draft(LMDraftConfig(model=str(tmp_path)), ctx)


def test_tokenizers_must_agree(tmp_path: Path) -> None:
    save_draft(tmp_path, "other")
    tiny_tokenizer(["red", "green"]).save_pretrained(tmp_path)
    target = HFTarget.from_model(target_model(), tiny_tokenizer(["red", "blue"]))
    ctx = BuildContext(pipeline=None, target=target)
    with pytest.raises(ConfigError, match="differs from the target's"):
        build_lm_draft(LMDraftConfig(model=str(tmp_path)), ctx)
    drafter = build_lm_draft(LMDraftConfig(model=str(tmp_path), check_tokenizer=False), ctx)
    assert drafter.vocab_size == VOCAB


def test_pickle_only_draft_model_is_refused_unread(tmp_path: Path) -> None:
    save_draft(tmp_path, "other")
    for weights in tmp_path.glob("*.safetensors"):
        weights.unlink()
    marker = tmp_path / "MARKER"
    torch.save({"x": _Exploit(marker)}, tmp_path / "pytorch_model.bin")
    ctx = BuildContext(pipeline=None, target=HFTarget.from_model(target_model()))
    with pytest.raises(CheckpointError, match="only pickle weights") as info:
        build_lm_draft(LMDraftConfig(model=str(tmp_path)), ctx)
    assert "safetensors" in info.value.hint and not marker.exists()


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_draft_weights_missing_a_tensor_are_refused(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    save_draft(tmp_path, "other")
    weights = load_file(str(tmp_path / "model.safetensors"))
    dropped = sorted(k for k in weights if "layers.0.mlp" in k)[0]
    del weights[dropped]  # transformers alone would fill it at random and only warn
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    ctx = BuildContext(pipeline=None, target=HFTarget.from_model(target_model()))
    with pytest.raises(CheckpointError, match=f"missing keys .*{dropped}"):
        build_lm_draft(LMDraftConfig(model=str(tmp_path)), ctx)
