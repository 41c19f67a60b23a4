"""Why a row decoded a round plainly (verified no draft node): the names every round record carries.

`specframe report` counts them per method; `budget: auto` explains each of its plain rounds with one.
"""

from __future__ import annotations

#: Reason -> what it means.
PLAIN_REASONS: dict[str, str] = {
    "no_gain": "budget: auto predicted that drafting would bring fewer tokens than plain decoding earns in the "
               "time it costs, even at the optimistic bound of the row's calibration",
    "explore_declined": "the optimistic bound would pay, but this round's exploration draw did not",
    "context_full": "the row's context has no room for a draft node",
    "drafter_refused": "the drafter (or the pruner) left no draft node for the row",
    "no_drafter": "the pipeline decodes plainly (no drafter)",
}
