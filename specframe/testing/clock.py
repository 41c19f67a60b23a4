"""`TickClock`: a deterministic stage clock for tests of `budget: auto`.

The controller decides from measured stage times, so two runs on a loaded machine may decide differently. With
``monkeypatch.setattr(specframe.decode.loop, "StageClock", TickClock)`` every clock reading advances by
``tick_ns`` and every round counts as exactly timed, so the controller sees the same times in every run.
"""

from __future__ import annotations

from typing import Any


class TickClock:
    """A stage clock (`specframe.device_sync.StageClock`'s surface) that advances ``tick_ns`` per reading."""

    tick_ns = 1_000_000

    def __init__(self, devices: Any = (), *, sync: bool = False) -> None:
        self.now = 0

    def start_round(self) -> bool:
        return True

    def __call__(self) -> int:
        self.now += self.tick_ns
        return self.now
