"""oneDNN-prepacked linear layers: numerically a linear layer, and pipelines on a packed target stay exact."""

from __future__ import annotations

import pytest
import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids, tiny_causal_lm
from torch import nn

from specframe.cpu_linear import PackedLinear, onednn_linear_available, pack_linear_layers
from specframe.errors import ConfigError
from specframe.pipeline import Pipeline

pytestmark = pytest.mark.skipif(not onednn_linear_available(), reason="this torch build has no oneDNN")


def test_packed_linear_computes_the_same_product() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(64, 96)
    packed = PackedLinear(layer)
    for shape in ((1, 64), (3, 9, 64), (2, 1, 64)):
        x = torch.randn(*shape)
        torch.testing.assert_close(packed(x), layer(x), rtol=1e-5, atol=1e-5)
    assert packed.weight is layer.weight  # tied weights stay tied


def test_every_linear_is_replaced_and_tied_embeddings_stay_shared() -> None:
    model = tiny_causal_lm("llama", seed=0)
    linears = sum(type(m) is nn.Linear for m in model.modules())
    assert pack_linear_layers(model) == linears > 0
    assert not any(type(m) is nn.Linear for m in model.modules())
    head = model.get_output_embeddings()
    assert isinstance(head, PackedLinear) and head.weight.shape[0] == model.config.vocab_size


def test_pipeline_on_a_packed_target_equals_its_own_generate() -> None:
    model = tiny_causal_lm("qwen3", seed=1)
    model.generation_config.eos_token_id = None
    pack_linear_layers(model)
    prompt = random_ids(12, seed=1)
    expected = model.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False, pad_token_id=0)
    data = {"sampling": {"temperature": 0.0}, "budget": 6, "drafter": {"type": "ngram", "num_speculative_tokens": 6},
            "tree_builder": {"type": "chain"}, "pruner": {"type": "none"},
            "generation": {"stop_at_eos": False, "chat_template": False}}
    pipe = Pipeline.from_dict(data, target=HFTarget.from_model(model))
    assert pipe.generate(torch.tensor([prompt]), 30).tokens == expected[0, len(prompt):].tolist()


def test_non_float32_models_are_refused_with_the_fix() -> None:
    model = tiny_causal_lm("llama", seed=0).to(torch.bfloat16)
    with pytest.raises(ConfigError, match="float32"):
        pack_linear_layers(model, what="the target 'x'")


def test_auto_packs_float32_cpu_models_only() -> None:
    from specframe.cpu_linear import resolve_cpu_linear

    assert resolve_cpu_linear("auto", tiny_causal_lm("llama", seed=0)) == "onednn"
    assert resolve_cpu_linear("auto", tiny_causal_lm("llama", seed=0).to(torch.bfloat16)) == "default"
    assert resolve_cpu_linear("default", tiny_causal_lm("llama", seed=0)) == "default"
