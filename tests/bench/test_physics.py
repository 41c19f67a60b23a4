"""The physics bound of a batch size, read from the controller's cost model: the module docstring's worked example,
plain decoding as the floor, and the batch curve (not the one-row one) deciding at a batch size."""

from __future__ import annotations

import pytest

from specframe.bench.physics import physics_bound
from specframe.cost.profile import CostProfile

PROFILE = CostProfile(key={}, verify_ms={1: 40.0, 4: 60.0, 8: 80.0, 16: 120.0},
                      batch_ms={8: {8: 80.0, 32: 200.0, 64: 400.0}})


def test_worked_example() -> None:
    bound = physics_bound(1, PROFILE, (4.0, 4.0), {3: 2.2, 7: 2.8})
    assert bound.nodes == 3 and bound.speedup == pytest.approx(2.2 / 68 * 40)


def test_plain_decoding_is_the_floor() -> None:
    bound = physics_bound(8, PROFILE, (20.0, 1.25), {3: 1.2, 7: 1.3})
    assert bound.speedup == 1.0 and bound.nodes == 0


def test_the_batch_curve_prices_a_batch() -> None:
    """At 8 rows of 4 tokens the batch curve says 200 ms where the one-row curve read at 32 tokens says 160: the
    bound uses the batch's (2.5 tokens a row: 20 / 200 against 8 / 80, exactly plain decoding's rate)."""
    bound = physics_bound(8, PROFILE, (0.0, 0.0), {3: 2.5})
    assert bound.speedup == pytest.approx(1.0) and bound.nodes == 0
