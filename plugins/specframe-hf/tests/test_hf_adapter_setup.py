"""Loading, refusals and bad input of the hf target adapter."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from specframe_hf.config import HFTargetConfig
from specframe_hf.target import HFTarget
from specframe_hf.testing import causal_logits, random_ids, tiny_causal_lm, tiny_tokenizer
from transformers import GPT2Config, GPT2LMHeadModel, LlamaForCausalLM

from specframe.errors import CheckpointError, ConfigError, GenerationError
from specframe.interfaces import BuildContext
from specframe.plugins import PluginHost
from specframe.tree import DraftTree

ATOL = 1e-4


# ------------------------------------------------------------------------------------------- refusals
def test_sliding_window_mistral_is_refused_naming_the_model_type():
    model = tiny_causal_lm("mistral", sliding_window=16)
    with pytest.raises(ConfigError, match=r"mistral.*DynamicSlidingWindowLayer.*sliding_window=16") as info:
        HFTarget.from_model(model)
    assert "sliding_window = None" in info.value.hint


def test_qwen2_with_sliding_layers_is_refused():
    model = tiny_causal_lm("qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=1)
    with pytest.raises(ConfigError, match=r"qwen2.*DynamicSlidingWindowLayer"):
        HFTarget.from_model(model)


def test_unverified_family_is_refused_naming_the_model_type():
    with torch.random.fork_rng(devices=[]):
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32))
    with pytest.raises(ConfigError, match="model type 'gpt2'") as info:
        HFTarget.from_model(model)
    assert "llama" in info.value.hint


def test_attention_that_cannot_take_a_mask_is_refused():
    model = tiny_causal_lm("llama")
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ConfigError, match="flash_attention_2"):
        HFTarget.from_model(model)


def test_bad_tap_layers_are_config_errors(tiny_model):
    target = HFTarget.from_model(tiny_model("llama"))
    with pytest.raises(ConfigError, match=r"\[5\] do not exist.*2 decoder layers"):
        target.set_taps((0, 5))
    with pytest.raises(ConfigError, match="repeat"):
        target.set_taps((1, 1))
    with pytest.raises(Exception, match="non-negative"):
        HFTargetConfig(model="/x", taps=(-1,))


# ----------------------------------------------------------------------------------------- bad input
def test_prompt_longer_than_the_context_fails_before_any_work():
    model = tiny_causal_lm("llama", max_position_embeddings=16)
    calls: list[int] = []
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    target = HFTarget.from_model(model)
    assert target.max_length == 16
    with pytest.raises(GenerationError, match=r"17 tokens.*context is 16"):
        target.prefill(torch.tensor([random_ids(17, seed=0)]))
    assert calls == []
    with pytest.raises(GenerationError, match=r"ids must lie in \[0, 512\)"):
        target.prefill(torch.tensor([[1, 600]]))
    with pytest.raises(GenerationError, match="P >= 1"):
        target.prefill(torch.zeros(1, 0, dtype=torch.long))
    assert calls == []


def test_tree_running_past_the_context_is_refused():
    target = HFTarget.from_model(tiny_causal_lm("llama", max_position_embeddings=16))
    target.prefill(torch.tensor([random_ids(14, seed=1)]))
    target.forward_tree(DraftTree.from_lists([1, 2], [-1, 0]))  # positions 14, 15: fits
    with pytest.raises(GenerationError, match="runs past"):
        target.forward_tree(DraftTree.from_lists([1, 2, 3], [-1, 0, 1]))


def test_forward_tree_before_prefill_is_refused(tiny_model):
    target = HFTarget.from_model(tiny_model("llama"))
    with pytest.raises(GenerationError, match="before prefill"):
        target.forward_tree(DraftTree.from_lists([1], [-1]))


def test_tokenizer_larger_than_the_vocabulary_is_refused():
    model = tiny_causal_lm("llama", vocab_size=8)
    tok = tiny_tokenizer(["a", "b", "c", "d"])  # 10 tokens
    with pytest.raises(CheckpointError, match="10 tokens but the model's output layer has 8"):
        HFTarget.from_model(model, tok)


# ------------------------------------------------------------------------------------------ metadata
def test_eos_from_generation_config_then_tokenizer():
    model = tiny_causal_lm("llama", vocab_size=64)
    assert HFTarget.from_model(model).eos_token_ids == (2,)
    model.generation_config.eos_token_id = [2, 7, 2]
    assert HFTarget.from_model(model).eos_token_ids == (2, 7)
    model.generation_config.eos_token_id = None
    model.config.eos_token_id = None
    tok = tiny_tokenizer(["x"])
    assert HFTarget.from_model(model, tok).eos_token_ids == (tok.eos_token_id,)
    assert HFTarget.from_model(model).eos_token_ids == ()


class PastKeyValuesLlama(LlamaForCausalLM):
    """A model whose forward spells the cache argument ``past_key_values`` (transformers < 5.24)."""

    def forward(self, input_ids: Any = None, attention_mask: Any = None, position_ids: Any = None,
                past_key_values: Any = None, use_cache: Any = None, logits_to_keep: Any = 0) -> Any:
        assert past_key_values is not None
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                               cache=past_key_values, use_cache=use_cache, logits_to_keep=logits_to_keep)


def test_past_key_values_spelling_is_detected_and_used(tiny_model):
    reference = tiny_model("llama")
    model = PastKeyValuesLlama(reference.config).eval()
    model.load_state_dict(reference.state_dict())
    target = HFTarget.from_model(model)
    assert target.runner.cache_kwarg == "past_key_values"
    assert HFTarget.from_model(reference).runner.cache_kwarg == "cache"
    prompt = random_ids(6, seed=2)
    target.prefill(torch.tensor([prompt]))
    tree = DraftTree.from_lists([3, 4, 5], [-1, 0, 0])
    logits = target.forward_tree(tree).logits
    assert torch.allclose(logits[0, 2], causal_logits(reference, [*prompt, 3, 5])[-1], atol=ATOL)
    target.commit(tree, torch.tensor([[0, 2, -1]]))
    nxt = target.forward_tree(DraftTree.root_only(torch.tensor([8]))).logits
    assert torch.allclose(nxt[0, 0], causal_logits(reference, [*prompt, 3, 5, 8])[-1], atol=ATOL)


# ------------------------------------------------------------------------------------------- loading
@pytest.fixture(scope="module")
def saved_model_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny-qwen3")
    words = [f"w{i}" for i in range(50)]
    tiny_causal_lm("qwen3", vocab_size=64).save_pretrained(directory)
    tiny_tokenizer(words).save_pretrained(directory)
    return directory


def test_registry_factory_loads_model_and_tokenizer_offline(saved_model_dir):
    host = PluginHost(autoload=True, allowlist=["hf"], disabled=(), trace=False)  # this plugin's entry point only
    spec = host.registry.get("target", "hf").spec
    assert spec.capabilities.exposes_taps
    config = HFTargetConfig(model=str(saved_model_dir), dtype="float32", device="cpu", attn="eager", taps=(0,))
    target = spec.factory(config, BuildContext(pipeline=None))
    assert isinstance(target, HFTarget)
    assert target.model.config._attn_implementation == "eager"
    assert target.vocab_size == 64 and target.max_length == 512 and target.taps == (0,)
    assert target.tokenizer is not None and target.eos_token_ids == (2,)
    ids = target.encode("w1 w2")  # through the chat template: <user> w1 w2 <assistant>
    assert ids.tolist() == [[4, 7, 8, 5]]
    out = target.prefill(ids)
    assert out.logits.shape == (1, 1, 64) and out.hidden.shape == (1, 4, 64)


def test_bfloat16_load_keeps_the_dtype(saved_model_dir):
    target = HFTarget.from_pretrained(str(saved_model_dir), dtype="bfloat16", device="cpu")
    assert target.dtype == torch.bfloat16
    logits = target.prefill(torch.tensor([[4, 7, 8]])).logits
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()


def test_missing_directory_and_missing_config_are_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist") as info:
        HFTarget.from_pretrained(str(tmp_path / "nowhere"))
    assert "never downloads" in info.value.hint
    with pytest.raises(CheckpointError, match=r"no config.json"):
        HFTarget.from_pretrained(str(tmp_path))


def test_directory_without_weights_is_a_checkpoint_error(tmp_path):
    tiny_causal_lm("llama").config.save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match=r"model\.safetensors is missing"):
        HFTarget.from_pretrained(str(tmp_path), device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when CUDA is absent")
def test_cuda_without_a_gpu_is_a_config_error(saved_model_dir):
    with pytest.raises(ConfigError, match="no CUDA device"):
        HFTarget.from_pretrained(str(saved_model_dir), device="cuda")
