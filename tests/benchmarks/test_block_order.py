"""The corrector ablation's block order (``benchmarks/corrector_ablation.py`` ``block_order``): each block decodes
every side once, and over a run's prompts every side sits at every part of a block alike, so drift within a block
does not fall on one side more than another."""

from __future__ import annotations

import pytest
from corrector_ablation import PLAIN_AND_GENERATE, block_order


@pytest.mark.parametrize(("prompts", "pipes"), [(20, 18), (20, 45), (20, 3), (6, 45), (1, 4)])
def test_every_block_decodes_every_side_once_and_no_side_is_always_late(prompts: int, pipes: int) -> None:
    orders = [block_order(index, prompts, pipes) for index in range(prompts)]
    units = [PLAIN_AND_GENERATE, *range(pipes)]
    assert all(sorted(order) == sorted(units) for order in orders)
    if prompts < 2:
        return
    middle = (len(units) - 1) / 2
    mean_slot = {u: sum(order.index(u) for order in orders) / prompts for u in units}
    # an even share of a full turn per prompt: every side's mean place within half a turn's step of the middle
    step = len(units) / prompts
    assert all(abs(slot - middle) <= max(step, 1.0) / 2 + 0.5 for slot in mean_slot.values()), mean_slot


def test_the_worked_example() -> None:
    assert block_order(0, 2, 3) == [PLAIN_AND_GENERATE, 0, 1, 2]
    assert block_order(1, 2, 3) == [1, 2, PLAIN_AND_GENERATE, 0]
