"""The demo's contention warning: methods measured while other processes loaded the machine are named."""

from __future__ import annotations

from specframe_smollm2.demo import MethodRun, contention_warning

from specframe.metrics.machine_load import MachineLoad


def _load(other_cpu_s: float | None, contended: bool | None) -> MachineLoad:
    return MachineLoad(0.5, 1.5, other_cpu_s, 4.0, 2, contended)


def test_warning_names_contended_methods_only() -> None:
    runs = {"plain decoding": MethodRun("plain decoding", loads=[_load(0.0, False), _load(0.1, False)]),
            "DFlash chain": MethodRun("DFlash chain", loads=[_load(0.0, False), _load(3.0, True)]),
            "DARTree pruned": MethodRun("DARTree pruned", loads=[_load(None, None)])}
    warning = contention_warning(runs)
    assert warning is not None and "DFlash chain (0.38 cores)" in warning
    assert "plain decoding" not in warning and "DARTree" not in warning
    quiet = {"plain decoding": MethodRun("plain decoding", loads=[_load(0.0, False)]),
             "no /proc": MethodRun("no /proc", loads=[_load(None, None)])}
    assert contention_warning(quiet) is None
