"""The physics bound of a batch size: the module docstring's worked example, and plain decoding as the floor."""

from __future__ import annotations

import itertools

import pytest

from specframe.bench.physics import physics_bound


def curve(q: int) -> float:
    points = {1: 40.0, 4: 60.0, 8: 80.0, 16: 120.0}
    keys = sorted(points)
    for lo, hi in itertools.pairwise(keys):
        if lo <= q <= hi:
            return points[lo] + (points[hi] - points[lo]) * (q - lo) / (hi - lo)
    return points[keys[-1]] * q / keys[-1]


def test_worked_example() -> None:
    bound = physics_bound(1, curve, 8.0, {3: 2.2, 7: 2.8})
    assert bound.nodes == 3 and bound.speedup == pytest.approx(2.2 / 68 * 40)


def test_plain_decoding_is_the_floor() -> None:
    bound = physics_bound(8, curve, 30.0, {3: 1.2, 7: 1.3})
    assert bound.speedup == 1.0 and bound.nodes == 0
