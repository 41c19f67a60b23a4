"""The keyed hash behind position-keyed sampling (`specframe.sampling.noise`: `hash_key`, `to_unit`,
`RoundNoise.uniforms`) gives uniforms that look independent where the decode loop reads them: consecutive
positions of one request, adjacent seeds (requests 0, 1, 2, ...), and the streams of one key.

One battery of tests (:func:`battery`) over a grid of 256 adjacent seeds x 1024 consecutive positions:

* χ² of the values in 64 equal bins (uniform marginal);
* χ² of pairs in 16 x 16 bins: (position t, t + 1) of one seed, (seed s, s + 1) at one position, and the same
  key's draws in two streams (2-D equidistribution where the keys are neighbours);
* serial correlation at lags 1 to 8 along positions and between adjacent seeds (z-test of Pearson's r);

each at α = 1e-6. The real hash must pass all of them; two deliberately weak hashes (negative controls, same key
layout) must fail: an additive Weyl key (``seed · φ + position · ψ`` mod 2^64, well spread but linear) and a
multiply-only chain (``mix64`` without its xor-shifts).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from specframe.sampling.noise import _GOLDEN, _M1, ACCEPT, TARGET, RoundNoise, hash_key, to_unit
from specframe.testing.stats import chi2_sf

ALPHA = 1e-6
SEEDS, POSITIONS = 256, 1024

Uniforms = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]  # (stream, seeds [S], positions [P]) -> [S, P]


def real(stream: int, seeds: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:  # [S, P] float64
    """What the decode loop reads: row s has request seed ``seeds[s]``, its root at position -1, so depth d
    predicts position d."""
    noise = RoundNoise(seeds=seeds, roots=torch.full_like(seeds, -1))
    return noise.uniforms(stream, positions[None, :].expand(len(seeds), -1))


def weyl(stream: int, seeds: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Negative control: an additive key, ``seed · φ + stream · χ + position · ψ`` (mod 2^64)."""
    phi, chi, psi = (torch.tensor(c, dtype=torch.long) for c in (_GOLDEN, _M1, -0x3C6EF372FE94F82B))
    return to_unit(seeds[:, None] * phi + stream * chi + positions[None, :] * psi)


def multiply_only(stream: int, seeds: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Negative control: ``hash_key``'s chain with a bare multiplication in place of ``mix64``."""
    h = (seeds[:, None] + _GOLDEN) * _M1
    h = ((h + _GOLDEN) ^ stream) * _M1
    h = ((h + _GOLDEN) ^ positions[None, :]) * _M1
    return to_unit(h)


def chi2_p(values: torch.Tensor, bins: int) -> float:
    """χ² p-value of ``values`` in ``[0, 1)`` falling in ``bins`` equal bins."""
    counts = torch.bincount((values.reshape(-1) * bins).long().clamp(max=bins - 1), minlength=bins).double()
    expected = counts.sum() / bins
    return chi2_sf(float(((counts - expected) ** 2 / expected).sum()), bins - 1)


def pair_chi2_p(a: torch.Tensor, b: torch.Tensor, bins: int = 16) -> float:
    """χ² p-value of the pairs ``(a, b)`` in ``bins x bins`` equal cells."""
    cell = (a.reshape(-1) * bins).long().clamp(max=bins - 1) * bins + (b.reshape(-1) * bins).long().clamp(max=bins - 1)
    return chi2_p((cell.double() + 0.5) / bins**2, bins**2)


def correlation_p(a: torch.Tensor, b: torch.Tensor) -> float:
    """Two-sided p-value of Pearson's r between ``a`` and ``b`` being 0 (normal approximation, n large)."""
    a, b = a.reshape(-1) - a.mean(), b.reshape(-1) - b.mean()
    r = float((a * b).sum() / (a.norm() * b.norm()))
    return math.erfc(abs(r) * math.sqrt(a.numel()) / math.sqrt(2.0))


def battery(uniforms: Uniforms) -> dict[str, float]:
    """Every test's p-value on the grid (see the module docstring)."""
    seeds = torch.arange(SEEDS, dtype=torch.long)
    positions = torch.arange(POSITIONS, dtype=torch.long)
    u = uniforms(TARGET, seeds, positions)  # [S, P]
    other = uniforms(ACCEPT, seeds, positions)
    assert u.dtype == torch.float64 and u.shape == (SEEDS, POSITIONS)
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    out = {"marginal": chi2_p(u, 64),
           "pairs along positions": pair_chi2_p(u[:, :-1], u[:, 1:]),
           "pairs across adjacent seeds": pair_chi2_p(u[:-1], u[1:]),
           "pairs across streams": pair_chi2_p(u, other),
           "adjacent seeds correlation": correlation_p(u[:-1], u[1:])}
    for lag in range(1, 9):
        out[f"lag {lag} correlation"] = correlation_p(u[:, :-lag], u[:, lag:])
    return out


def test_the_keyed_hash_passes_every_test_of_the_battery() -> None:
    results = battery(real)
    failed = {name: p for name, p in results.items() if p < ALPHA}
    assert not failed, failed


@pytest.mark.parametrize("weak", [weyl, multiply_only], ids=["weyl", "multiply-only"])
def test_weak_hashes_fail_the_battery(weak: Uniforms) -> None:
    """The negative controls: the battery has the power to see a hash that is not mixing."""
    results = battery(weak)
    failed = {name: p for name, p in results.items() if p < ALPHA}
    assert failed, results


def test_uniforms_are_a_pure_function_of_the_key() -> None:
    """The same (seed, stream, position) gives the same number in any batch, at any root; the parts' order
    matters (``(a, b)`` and ``(b, a)`` differ)."""
    seeds = torch.tensor([5, 9, 5])
    alone = real(TARGET, torch.tensor([5]), torch.arange(40, 50))
    batch = real(TARGET, seeds, torch.arange(40, 50))
    assert torch.equal(batch[0], alone[0]) and torch.equal(batch[2], alone[0]) and not torch.equal(batch[1], alone[0])
    shifted = RoundNoise(seeds=torch.tensor([5]), roots=torch.tensor([39])).uniforms(TARGET, torch.arange(10)[None])
    assert torch.equal(shifted[0], alone[0])  # root 39: depths 0..9 predict positions 40..49
    assert not torch.equal(to_unit(hash_key(torch.tensor([3]), 4)), to_unit(hash_key(torch.tensor([4]), 3)))


def test_a_rounds_draws_hash_the_seed_and_stream_once_and_equal_the_whole_key_hash() -> None:
    """`RoundNoise.uniforms` continues a per-round, per-stream prefix (`extend_key`): the same numbers as hashing
    the whole key (seed, stream, position, node, sibling) from scratch, for per-row seeds and for derived ones."""
    from specframe.sampling.noise import extend_key

    a, b, c = torch.tensor([3, 9]), 5, torch.tensor([[11, 12], [13, 14]])
    assert torch.equal(extend_key(hash_key(a, b), c.T), hash_key(a, b, c.T))
    noise = RoundNoise.for_rows([7, 8, 9], [20, 30, 40], "cpu")
    depth = torch.tensor([[0, 1], [1, 2], [2, 3]])
    node, sibling = torch.tensor([[0, 2], [1, 1], [3, 0]]), 4
    want = to_unit(hash_key(noise.seeds.view(-1, 1), ACCEPT, noise.roots.view(-1, 1) + depth + 1, node, sibling))
    assert torch.equal(noise.uniforms(ACCEPT, depth, node, sibling), want)
    assert torch.equal(noise.uniforms(ACCEPT, depth, node, sibling), want)  # from the cached prefix
    assert not torch.equal(noise.uniforms(TARGET, depth, node, sibling), want)
    derived = RoundNoise.from_seed(5, root=3)
    seeds = hash_key(torch.arange(3), torch.tensor(5))
    assert torch.equal(derived.uniforms(TARGET, depth), to_unit(hash_key(seeds.view(-1, 1), TARGET, 3 + depth + 1)))
