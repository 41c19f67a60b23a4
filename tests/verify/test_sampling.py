"""`specframe.sampling`: transformers semantics, greedy, draws, sampling without replacement, validation, RNG."""

from __future__ import annotations

import math

import pytest
import torch

from specframe.errors import GenerationError
from specframe.sampling import (
    gumbel_from_uniforms,
    inverse_cdf,
    probs,
    processed_logprobs,
    sample,
    sample_from_probs,
    sample_without_replacement,
    uniforms,
    validate_sampling,
)
from specframe.testing.stats import g_test
from specframe.types import MIN_TEMPERATURE, SamplingParams

transformers_lp = pytest.importorskip("transformers.generation.logits_process")


def _transformers_kept(x: torch.Tensor, params: SamplingParams) -> torch.Tensor:  # [..., V] bool
    y = transformers_lp.TemperatureLogitsWarper(float(params.temperature))(None, x.clone())
    if params.top_k:
        y = transformers_lp.TopKLogitsWarper(params.top_k)(None, y)
    if params.top_p < 1.0:
        y = transformers_lp.TopPLogitsWarper(params.top_p)(None, y)
    return torch.isfinite(y)


def test_matches_transformers_warpers_on_random_logits() -> None:
    gen = torch.Generator().manual_seed(0)
    for trial in range(100):
        vocab = int(torch.randint(2, 60, (1,), generator=gen))
        x = torch.randn(16, vocab, generator=gen) * 3
        params = SamplingParams(
            temperature=float(torch.rand(1, generator=gen)) * 2 + 0.1,
            top_k=int(torch.randint(0, vocab + 3, (1,), generator=gen)),
            top_p=1.0 if trial % 5 == 0 else float(torch.rand(1, generator=gen)) * 0.99 + 0.01,
        )
        ours = processed_logprobs(x, params)
        kept = _transformers_kept(x, params)
        assert torch.equal(torch.isfinite(ours), kept), (trial, params)
        reference = (x / params.temperature).masked_fill(~kept, float("-inf")).log_softmax(-1)
        assert torch.allclose(ours[kept], reference[kept], atol=1e-5)


@pytest.mark.parametrize("top_p", [0.3, 0.5, 0.6, 0.7, 0.95])
def test_top_p_boundary_and_ties_match_transformers_on_small_rows(top_p: float) -> None:
    x = torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    params = SamplingParams(temperature=1.0, top_p=top_p)
    assert torch.equal(torch.isfinite(processed_logprobs(x, params)), _transformers_kept(x, params))


def test_worked_example_of_the_module_docstring() -> None:
    kept = torch.isfinite(processed_logprobs(torch.tensor([2.0, 1.0, 1.0, 1.0, 0.0]), SamplingParams(1.0, 0, 0.6)))
    assert kept.tolist() == [True, False, False, True, False]


def test_top_k_keeps_ties_at_the_boundary_and_top_p_keeps_one_token() -> None:
    x = torch.tensor([3.0, 2.0, 2.0, 1.0])
    assert torch.isfinite(processed_logprobs(x, SamplingParams(1.0, top_k=2))).tolist() == [True, True, True, False]
    assert torch.isfinite(processed_logprobs(x, SamplingParams(1.0, top_k=9))).all()
    assert torch.isfinite(processed_logprobs(x, SamplingParams(5.0, top_p=1e-6))).tolist() == [True, False, False,
                                                                                               False]


def test_temperature_zero_is_a_point_mass_on_the_first_argmax() -> None:
    x = torch.tensor([[1.0, 4.0, 4.0, 0.0]])
    p = probs(x, SamplingParams(0.0, top_k=1, top_p=0.5))
    assert p.tolist() == [[0.0, 1.0, 0.0, 0.0]]
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    assert sample(x, SamplingParams(0.0), None).tolist() == [1]
    assert torch.equal(state, gen.get_state())


def test_float64_input_stays_float64_and_low_precision_is_upcast() -> None:
    assert processed_logprobs(torch.zeros(3, dtype=torch.float64), SamplingParams(1.0)).dtype == torch.float64
    assert processed_logprobs(torch.zeros(3, dtype=torch.bfloat16), SamplingParams(1.0)).dtype == torch.float32


def test_tiny_temperature_does_not_overflow() -> None:
    """The smallest temperature (1e-5) over logits whose quotient overflows float32 unless shifted by the maximum."""
    p = probs(torch.tensor([1e34, 0.0, -1e34]), SamplingParams(MIN_TEMPERATURE))
    assert p.tolist() == [1.0, 0.0, 0.0]


def test_temperatures_below_the_smallest_are_refused() -> None:
    for t in (1e-300, 1e-9, MIN_TEMPERATURE / 2):
        with pytest.raises(GenerationError, match="use 0 for greedy decoding"):
            probs(torch.zeros(3), SamplingParams(t))


def test_inverse_cdf_never_picks_zero_weight_tokens() -> None:
    w = torch.tensor([0.0, 0.5, 0.0, 0.5, 0.0])
    u = torch.tensor([0.0, 0.25, 0.5, 0.999999, 1.0 - 1e-16])
    assert inverse_cdf(w.expand(5, -1), u).tolist() == [1, 1, 3, 3, 3]


def test_draws_follow_the_processed_law() -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    params = SamplingParams(temperature=0.8, top_k=5, top_p=0.9)
    law = probs(x, params)
    draws = sample(x.expand(20_000, -1), params, uniforms((20_000,), gen))
    res = g_test(torch.bincount(draws, minlength=7).double(), law)
    assert res.impossible == 0 and res.p_value > 1e-6
    # Power: the unfiltered law is rejected by the same test.
    assert g_test(torch.bincount(draws, minlength=7).double(), probs(x, SamplingParams(0.8))).p_value < 1e-6


def test_sample_from_unnormalised_weights() -> None:
    gen = torch.Generator().manual_seed(5)
    w = torch.tensor([2.0, 0.0, 6.0])
    draws = sample_from_probs(w.expand(8_000, -1), gen)
    assert g_test(torch.bincount(draws, minlength=3).double(), w).p_value > 1e-6


def test_sampling_without_replacement_has_the_sequential_law() -> None:
    gen = torch.Generator().manual_seed(11)
    q = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0], dtype=torch.float64)
    tokens, ok = sample_without_replacement(q.log().expand(20_000, -1), 2,
                                            gumbel_from_uniforms(uniforms((20_000, q.shape[-1]), gen)))
    assert bool(ok.all()) and bool((tokens[:, 0] != tokens[:, 1]).all())
    counts = torch.bincount(tokens[:, 0] * 5 + tokens[:, 1], minlength=25).view(5, 5).double()
    law = q[:, None] * q[None, :] / (1 - q[:, None])
    law.fill_diagonal_(0.0)
    assert g_test(counts, law).p_value > 1e-6


def test_sampling_without_replacement_flags_exhausted_support() -> None:
    logq = torch.tensor([[0.0, float("-inf"), float("-inf")], [math.log(0.5), math.log(0.5), float("-inf")]])
    tokens, ok = sample_without_replacement(logq, 4, gumbel_from_uniforms(uniforms(tuple(logq.shape),
                                                                                torch.Generator().manual_seed(0))))
    assert ok.tolist() == [[True, False, False, False], [True, True, False, False]]
    assert tokens[0, 0] == 0 and sorted(tokens[1, :2].tolist()) == [0, 1]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (SamplingParams(temperature=-1.0), "temperature"),
        (SamplingParams(temperature=float("nan")), "temperature"),
        (SamplingParams(temperature=float("inf")), "temperature"),
        (SamplingParams(temperature=1.0, top_k=-2), "top_k"),
        (SamplingParams(temperature=1.0, top_k=2.5), "top_k"),  # type: ignore[arg-type]
        (SamplingParams(temperature=1.0, top_p=0.0), "top_p"),
        (SamplingParams(temperature=1.0, top_p=1.01), "top_p"),
    ],
)
def test_bad_values_raise_generation_error_naming_the_field(params: SamplingParams, field: str) -> None:
    with pytest.raises(GenerationError) as info:
        validate_sampling(params)
    assert field in info.value.message and info.value.hint
    with pytest.raises(GenerationError):
        sample(torch.zeros(2, 3), params, uniforms((2,), torch.Generator()))


def test_global_rng_untouched() -> None:
    torch.manual_seed(0)
    before = torch.get_rng_state()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 9, generator=gen)
    params = SamplingParams(temperature=0.9, top_k=4, top_p=0.8)
    sample(x, params, uniforms((4,), gen))
    sample_from_probs(probs(x, params), gen)
    sample_without_replacement(processed_logprobs(x, params), 3, gumbel_from_uniforms(uniforms((4, 9), gen)))
    assert torch.equal(before, torch.get_rng_state())
