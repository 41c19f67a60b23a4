"""oneDNN-prepacked linear layers: numerically a linear layer, dispatched by row count, and pipelines on a packed
target stay exact; ``cpu_linear: auto`` applies the measured (here: injected) choice and caches it."""

from __future__ import annotations

import pytest
import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids, tiny_causal_lm
from torch import nn

from specframe.cost.kernel_choice import KernelTimings
from specframe.cpu_linear import (
    ALWAYS,
    NEVER,
    LinearKernels,
    PackedLinear,
    default_kernels,
    linear_kernels_of,
    onednn_linear_available,
    pack_linear_layers,
    resolve_cpu_linear,
    set_linear_kernels,
    unpack_linear_layers,
)
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


@pytest.mark.parametrize("kernels", [NEVER, ALWAYS, LinearKernels(low=3), LinearKernels(low=1, high=3)],
                         ids=["default", "onednn", "onednn-from-3-rows", "onednn-below-3-rows"])
def test_pipeline_on_a_packed_target_equals_its_own_generate(kernels: LinearKernels) -> None:
    model = tiny_causal_lm("qwen3", seed=1)
    model.generation_config.eos_token_id = None
    pack_linear_layers(model, kernels=kernels)
    prompt = random_ids(12, seed=1)
    expected = model.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False, pad_token_id=0)
    data = {"sampling": {"temperature": 0.0}, "budget": 6, "drafter": {"type": "ngram", "num_speculative_tokens": 6},
            "tree_builder": {"type": "chain"}, "pruner": {"type": "none"},
            "generation": {"stop_at_eos": False, "chat_template": False}}
    target = HFTarget.from_model(model)
    assert target.linear_kernels == kernels and target.cpu_linear == kernels.name
    pipe = Pipeline.from_dict(data, target=target)
    assert pipe.generate(torch.tensor([prompt]), 30).tokens == expected[0, len(prompt):].tolist()


def test_non_float32_models_are_refused_with_the_fix() -> None:
    model = tiny_causal_lm("llama", seed=0).to(torch.bfloat16)
    with pytest.raises(ConfigError, match="float32"):
        pack_linear_layers(model, what="the target 'x'")


def test_auto_is_measured_for_float32_cpu_models_only() -> None:
    assert resolve_cpu_linear("auto", tiny_causal_lm("llama", seed=0)) == "auto"
    assert resolve_cpu_linear("auto", tiny_causal_lm("llama", seed=0).to(torch.bfloat16)) == "default"
    assert resolve_cpu_linear("default", tiny_causal_lm("llama", seed=0)) == "default"


def test_packed_layers_pick_their_kernel_by_the_products_row_count() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(64, 96)
    always, by_rows = PackedLinear(layer, ALWAYS), PackedLinear(layer, LinearKernels(low=4))
    for shape in ((1, 64), (1, 3, 64), (3, 64), (1, 4, 64), (2, 9, 64)):
        x = torch.randn(*shape)
        rows = x.numel() // 64
        if rows < 4:  # nn.Linear's own computation, bit for bit
            assert torch.equal(by_rows(x), layer(x))
        else:  # the prepacked product, bit for bit
            assert torch.equal(by_rows(x), always(x))
    assert "default BLAS below 4 rows" in repr(by_rows)


def test_default_kernels_switch_every_packed_layer_for_a_block_and_unpack_restores_linear() -> None:
    model = tiny_causal_lm("llama", seed=0)
    reference = tiny_causal_lm("llama", seed=0)
    ids = torch.tensor([random_ids(9, seed=2)])
    pack_linear_layers(model, kernels=LinearKernels(low=2))
    with torch.no_grad():
        with default_kernels(model) as switched:
            assert switched > 0 and linear_kernels_of(model) == NEVER
            assert torch.equal(model(input_ids=ids).logits, reference(input_ids=ids).logits)  # the unmodified model
        assert linear_kernels_of(model) == LinearKernels(low=2)
        assert set_linear_kernels(model, ALWAYS) == switched
        assert unpack_linear_layers(model) == switched
        assert not any(isinstance(m, PackedLinear) for m in model.modules())
        assert torch.equal(model(input_ids=ids).logits, reference(input_ids=ids).logits)
    assert model.get_output_embeddings().weight.shape[0] == model.config.vocab_size


@pytest.fixture
def saved_llama(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    directory = tmp_path / "llama"
    tiny_causal_lm("llama", seed=0).save_pretrained(directory)
    return directory


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel choice is cached only when measured on a quiet machine: these tests say it is one."""
    from specframe.testing.load_window import fix_machine_load

    fix_machine_load(monkeypatch)


def _inject(monkeypatch, result: KernelTimings) -> list[int]:
    """Replace the timing of ``cpu_linear: auto`` by ``result``; returns the list its calls are counted in."""
    from specframe_hf import kernel_probe

    calls: list[int] = []

    def measure(forward, use, **kwargs):
        calls.append(1)
        return result

    monkeypatch.setattr(kernel_probe, "measure_kernels", measure)
    return calls


def test_auto_applies_the_measured_rule_and_the_next_load_reads_it_from_the_cache(saved_llama, monkeypatch,
                                                                                  capsys) -> None:
    intel = KernelTimings(default_ms={1: 55.5, 4: 70.0, 17: 130.0}, onednn_ms={1: 61.7, 4: 66.0, 17: 100.2})
    calls = _inject(monkeypatch, intel)
    target = HFTarget.from_pretrained(str(saved_llama), cpu_linear="auto", device="cpu")
    assert target.linear_kernels == LinearKernels(low=4) and target.cpu_linear == "by_rows"
    assert all(m.kernels == LinearKernels(low=4) for m in target.model.modules() if isinstance(m, PackedLinear))
    assert calls == [1] and "default BLAS below 4 rows" in capsys.readouterr().err
    again = HFTarget.from_pretrained(str(saved_llama), cpu_linear="auto", device="cpu")
    assert again.linear_kernels == LinearKernels(low=4) and calls == [1]  # cached: not measured again
    assert capsys.readouterr().err == ""


def test_a_choice_measured_on_a_busy_machine_says_it_is_not_cached(saved_llama, monkeypatch, capsys) -> None:
    """Issue 27: the notice said "not caching it" and "(cached in ...)" in the same breath."""
    from specframe.testing.load_window import fix_machine_load

    fix_machine_load(monkeypatch, contended=True)
    _inject(monkeypatch, KernelTimings(default_ms={1: 55.5, 17: 130.0}, onednn_ms={1: 61.7, 17: 100.2}))
    HFTarget.from_pretrained(str(saved_llama), cpu_linear="auto", device="cpu")
    err = " ".join(capsys.readouterr().err.split())
    assert "not caching it" in err and "for this run only (not cached)" in err and "cached in" not in err


def test_auto_drops_the_packed_copies_when_the_default_wins(saved_llama, monkeypatch) -> None:
    _inject(monkeypatch, KernelTimings(default_ms={1: 1.0, 17: 2.0}, onednn_ms={1: 2.0, 17: 3.0}))
    target = HFTarget.from_pretrained(str(saved_llama), cpu_linear="auto", device="cpu")
    assert target.cpu_linear == "default" and not any(isinstance(m, PackedLinear) for m in target.model.modules())


def test_auto_measures_the_real_forwards_once(saved_llama) -> None:
    """The real measurement on a tiny model: both kernels timed, a rule chosen and cached (values not checked)."""
    from specframe_hf.kernel_probe import model_config_hash

    from specframe.cost.kernel_choice import choice_key, choice_path

    target = HFTarget.from_pretrained(str(saved_llama), cpu_linear="auto", device="cpu")
    key = choice_key(model=model_config_hash(target.model), dtype="float32")
    stored = choice_path(key).read_text()
    assert '"onednn_ms"' in stored and '"17"' in stored and target.cpu_linear in ("default", "onednn", "by_rows")
