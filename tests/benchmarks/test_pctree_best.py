"""Which PCTree shape `benchmarks/pctree_shapes.py` names best (the one the builder's defaults carry)."""

from __future__ import annotations

from typing import Any

from pctree_shapes import best_shape


def row(children: list[int], spine: bool, mean: float) -> dict[str, Any]:
    return {"children": children, "keep_spine": spine, "width": 8, "tau_mean_over_sets": mean, "sets": {}}


def test_the_highest_mean_tau_wins_wherever_it_stands_in_the_grid() -> None:
    rows = [row([2, 1], True, 2.01), row([3, 2, 1], False, 2.30), row([4, 2, 1], True, 2.12)]
    for shift in range(len(rows)):
        rotated = rows[shift:] + rows[:shift]
        assert best_shape(rotated) == {"children": [3, 2, 1], "keep_spine": False, "width": 8,
                                       "tau_mean_over_sets": 2.30}


def test_equal_means_go_to_the_first_shape_of_the_grid() -> None:
    rows = [row([2, 1], True, 2.01), row([2, 2, 1], True, 2.07), row([4, 2, 1], False, 2.07)]
    assert best_shape(rows)["children"] == [2, 2, 1]
