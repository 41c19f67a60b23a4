"""The quiet-machine rule (:mod:`specframe.bench.quiet`): the start check, the background sampler and the
shell scripts' entry point, driven with a scripted load reader."""

from __future__ import annotations

import time

import pytest

from specframe.bench import quiet


def test_the_start_check_refuses_a_busy_machine_and_waits_for_a_quiet_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        quiet.refuse_unless_quiet(1, read=lambda: 0.3, sleep=lambda s: None)  # 0.3 is not below 0.3
    assert exc.value.code == 2 and "1-minute load 0.30 before the start" in capsys.readouterr().err
    readings = iter([0.9, 0.6, 0.29])
    slept: list[float] = []
    assert quiet.refuse_unless_quiet(1, wait_s=60, read=lambda: next(readings), sleep=slept.append) == 0.29
    assert slept == [quiet.SAMPLE_EVERY_S] * 2
    assert quiet.refuse_unless_quiet(1, read=lambda: None) is None  # no /proc/loadavg: nothing to judge


def test_the_sampler_records_the_loads_of_the_run_and_the_rule_judges_them() -> None:
    readings = iter([0.1, 0.5, 0.9, 1.2, 1.25, 1.25, 1.25, 1.25])
    with quiet.LoadSampler(1, every_s=0.01, read=lambda: next(readings, 1.25)) as sampler:
        time.sleep(0.1)
    record = sampler.record()
    assert record.start == 0.1 and record.during_max == 1.25 and record.samples >= 3
    assert record.to_dict()["quiet"] and record.during_mean is not None and record.during_mean <= 1.25
    with quiet.LoadSampler(1, start=0.1, every_s=0.01, read=lambda: 1.4) as busy:  # a neighbour's job meanwhile
        time.sleep(0.05)
    assert not busy.record().to_dict()["quiet"]
    assert "excess 0.40" in quiet.judge(busy.record().to_dict())[1]


def test_the_shell_entry_point_exits_2_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(quiet, "load_average", lambda: 0.95)
    with pytest.raises(SystemExit) as exc:
        quiet.main([])
    assert exc.value.code == 2
    monkeypatch.setattr(quiet, "load_average", lambda: 0.05)
    assert quiet.main([]) == 0 and "quiet" in capsys.readouterr().out
