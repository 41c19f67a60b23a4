"""`FixedLoadWindow`: a stand-in for `specframe.metrics.machine_load.LoadWindow` with a verdict the test sets, so
tests of what the product does on a quiet or a busy machine do not depend on what else runs on the machine.

Every measurement whose numbers may be cached opens its window through :func:`specframe.files.cache.measuring`;
:func:`fix_machine_load` makes those windows report the verdict the test wants.
"""

from __future__ import annotations

from typing import Any

from specframe.metrics.machine_load import MachineLoad


class FixedLoadWindow:
    """Context manager whose ``.load`` says ``contended`` (a class attribute: set it on the class in a test)."""

    contended = False
    #: Cores other processes keep busy when contended.
    busy_cores = 1.6

    def __enter__(self) -> FixedLoadWindow:
        return self

    def __exit__(self, *exc: object) -> None:
        busy = self.busy_cores if self.contended else 0.0
        self.load = MachineLoad(0.1, 0.1 + busy, busy, 1.0, 2, self.contended)


def fix_machine_load(monkeypatch: Any, *, contended: bool = False) -> type[FixedLoadWindow]:
    """Make every cache-guarding measurement window report ``contended`` (``monkeypatch``: pytest's fixture);
    returns the window class, whose ``contended`` the test may change later."""
    from specframe.files import cache

    window = type("TestLoadWindow", (FixedLoadWindow,), {"contended": contended})
    monkeypatch.setattr(cache, "LoadWindow", window)
    return window
