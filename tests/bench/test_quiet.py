"""The quiet-machine rule (:mod:`specframe.bench.quiet`): the start check, the background sampler and the
shell scripts' entry point, driven with a scripted load reader."""

from __future__ import annotations

import os
import subprocess
import sys
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


# --------------------------------------------------------------------------------------------- several processes
def test_the_outside_share_is_the_worst_trailing_window() -> None:
    """The module docstring's worked example, a run shorter than one window, and a tree that lost a descendant."""
    points = [(0.0, 0.0, 0.0), (30.0, 31.0, 30.0), (60.0, 62.0, 60.0), (90.0, 100.0, 90.0)]
    assert quiet.outside_share_max(points, 60.0) == pytest.approx(0.15)
    assert quiet.outside_share_max(points[:2], 60.0) == pytest.approx(1 / 30, abs=1e-3)  # shorter: first to last
    lost = [(0.0, 0.0, 5.0), (10.0, 9.0, 1.0)]  # an orphan took 4 s out of the tree: it counts as 0 for the tree
    assert quiet.outside_share_max(lost, 60.0) == pytest.approx(0.9)
    assert quiet.outside_share_max(points[:1], 60.0) is None


def _tree_sampler(readings: list[tuple[float, float]], window_s: float) -> quiet.LoadSampler:
    feed = iter(readings)
    return quiet.LoadSampler(2, start=0.1, every_s=0.01, read=lambda: 2.6, process_tree=True, window_s=window_s,
                             cpu=lambda: next(feed, readings[-1]))


def test_a_benchmark_of_several_processes_is_judged_by_the_cpu_used_outside_its_tree() -> None:
    """vLLM's spinning scheduler keeps the load at 2.6 with 2 compute threads: the load rule would call that busy,
    the process-tree rule looks at what other processes used. A neighbour burning half a core is caught."""
    own_only = [(float(i), float(i)) for i in range(200)]  # every busy CPU second is the tree's
    with _tree_sampler(own_only, window_s=0.02) as sampler:
        time.sleep(0.1)
    record = sampler.record().to_dict()
    assert record["measure"] == quiet.MEASURE_PROCESS_TREE and record["rule"] == quiet.RULE_PROCESS_TREE
    assert record["outside_max"] == 0 and record["quiet"], quiet.judge(record)
    assert not quiet.judge({**record, "measure": quiet.MEASURE_LOAD})[0]  # the load rule: excess 0.6
    neighbour = [(float(i), 0.0) for i in range(200)]  # a reading per sample, none of it the tree's
    with _tree_sampler(neighbour, window_s=0.02) as busy:
        time.sleep(0.1)
    judged = busy.record().to_dict()
    assert judged["outside_max"] is not None and judged["outside_max"] >= quiet.QUIET_EXCESS
    assert not judged["quiet"] and "outside the benchmark's process tree" in quiet.judge(judged)[1]
    assert not quiet.judge({**record, "outside_max": None})[0]
    stalled = quiet.judge({**record, "max_gap_s": 3 * quiet.OUTSIDE_WINDOW_S})  # one window would span 3 minutes
    assert not stalled[0] and "apart" in stalled[1]
    assert not quiet.judge({**record, "start": 0.4})[0]  # the start rule holds for both forms


# --------------------------------------------------------------------------------------------- a steady machine
def test_a_run_whose_machine_slowed_down_is_not_quiet_whatever_its_load() -> None:
    """The probes between phases catch what no load reading shows (another guest took the core): the run that
    slowed by half an hour in, its load at its own 1.00 throughout."""
    from specframe.bench.steadiness import STEADY_DRIFT, judge_steady

    assert judge_steady([21.0, 21.4, 20.8], [1000.0, 1040.0])[0] and judge_steady(None)[0]
    slowed = judge_steady([21.0, 43.5], [1000.0, 1010.0])
    assert not slowed[0] and "fixed probe" in slowed[1] and "+107%" in slowed[1]
    assert not judge_steady([20.0, 20.0 * (1 + STEADY_DRIFT) + 0.1], [1000.0, 1000.0])[0]
    times = iter([20.0, 20.4, 41.0])
    with quiet.LoadSampler(1, start=0.1, every_s=0.01, read=lambda: 1.0, probe=lambda: next(times)) as sampler:
        sampler.set_reference(lambda: 1000.0, "a fixed decode")
        sampler.probe_now()  # between two phases
    record = sampler.record().to_dict()
    assert record["probes_ms"] == [20.0, 20.4, 41.0] and record["reference_ms"] == [1000.0] * 3
    assert not record["quiet"] and "drifted" in quiet.judge(record)[1]
    assert quiet.judge({**record, "probes_ms": [20.0, 20.4, 20.9]})[0]
    assert not quiet.judge({**record, "probes_ms": [20.0, 20.4], "during_max": 1.5})[0]  # the load still counts


def test_a_run_whose_own_work_slowed_is_not_steady_though_the_fixed_probe_held() -> None:
    """What the fixed probe missed (decoding 28 % slower an hour later, the probe unchanged): the reference
    workload, a fixed piece of the run's own work timed at the same points, must drift within the bound too;
    and a run that timed the fixed probe without a reference workload is not shown steady."""
    from specframe.bench.steadiness import STEADY_DRIFT, judge_steady, reference_probe

    durations = iter([0.010, 0.010, 0.010, 0.0105, 0.0105, 0.0105, 0.016, 0.016, 0.016])  # s per try
    work = reference_probe(lambda: time.sleep(next(durations)))
    with quiet.LoadSampler(1, start=0.1, every_s=0.01, read=lambda: 1.0, probe=lambda: 8.0) as sampler:
        sampler.set_reference(work, "a decode that slows")  # 3 tries each: ~10 ms, ~10.5 ms, then ~16 ms
        sampler.probe_now()
    record = sampler.record().to_dict()
    assert record["probes_ms"] == [8.0] * 3 and len(record["reference_ms"]) == 3
    assert record["reference_ms"][-1] > (1 + STEADY_DRIFT) * record["reference_ms"][0]  # slept 60 % longer
    assert not record["quiet"] and "the reference workload" in quiet.judge(record)[1]
    not_shown = judge_steady([8.0, 8.1])
    assert not not_shown[0] and "not shown" in not_shown[1]
    assert not judge_steady(None, [10.0, 16.0])[0]  # a drifting reference fails with or without the fixed probe
    assert "only once" in judge_steady([8.0, 8.1], [10.0])[1] and not judge_steady([8.0, 8.1], [10.0])[0]
    assert quiet.judge({**record, "reference_ms": [10.2, 10.6, 10.4]})[0]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_the_probe_sees_a_core_shared_with_another_job() -> None:
    """The probe's purpose: a core taken by something else makes it slower beyond the steadiness bound. A busy
    process pinned to this process's CPU stands for the other guest."""
    from specframe.bench.steadiness import STEADY_DRIFT, drift, probe_ms

    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        alone = probe_ms()
        busy_loop = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
        hog = subprocess.Popen([sys.executable, "-c", busy_loop])
        try:
            time.sleep(0.3)
            shared = probe_ms()
        finally:
            hog.kill()
            hog.wait()
    finally:
        os.sched_setaffinity(0, before)
    spread = drift([alone, shared])
    assert spread is not None and spread > STEADY_DRIFT, (alone, shared)


# ------------------------------------------------------------------------------------------ an interleaved run
def test_an_interleaved_run_is_judged_block_by_block() -> None:
    """A run whose ratios compare decodes of one block (the corrector ablation) is steady when every block held,
    whatever the drift across the run (it falls on both sides of each ratio); a block that moved fails it, and
    a record that declares blocks but lost them is not shown steady."""
    from specframe.bench.steadiness import judge_steady

    across = [1190.0, 1210.0, 1305.0, 1320.0]  # +11 % across the run, at most +8 % within a block
    assert not judge_steady([8.0] * 4, across + [1420.0])[0]  # judged over the whole run: +19 %
    steady = judge_steady([8.0] * 5, across + [1400.0], blocks=[0, 1, 2, 3])
    assert steady[0] and "4 interleaved blocks" in steady[1], steady
    moved = judge_steady([8.0] * 4, [1190.0, 1210.0, 1420.0, 1430.0], blocks=[0, 1, 2])
    assert not moved[0] and "block 1" in moved[1] and "+17%" in moved[1]
    assert judge_steady([8.0] * 4, [1190.0, 1210.0, 1420.0, 1430.0], blocks=[0, 2])[0]  # block 1 retried
    assert judge_steady([8.0, 6.4, 8.3, 7.0], across, blocks=[0, 1, 2])[0]  # the fixed probe's noise: not a block's
    assert not judge_steady([8.0] * 4, across, blocks=[])[0]
    assert not judge_steady([8.0] * 4, across, blocks=[3])[0]  # a block past the series: not shown
    record = {"threads": 1, "start": 0.1, "during_max": 1.1, "samples": 9, "probes_ms": [8.0] * 4,
              "reference_ms": across, "pairing": "one prompt by every side", "blocks": [0, 1, 2]}
    assert quiet.judge(record)[0]
    assert not quiet.judge({**record, "blocks": None})[0]  # declared interleaved, blocks lost
    assert not quiet.judge({**record, "pairing": None, "reference_ms": [*across, 1420.0], "probes_ms": [8.0] * 5})[0]


def test_a_block_whose_machine_moved_is_measured_again_and_the_record_says_so() -> None:
    """The sampler's blocks: a closing probe that moved more than 15 % from the opening one asks for the block
    again (recorded as retried); the last try is kept whatever it says, and then fails the run."""
    references = iter([1000.0, 1000.0, 1010.0, 1300.0, 1310.0, 1700.0, 1710.0])
    with quiet.LoadSampler(1, start=0.1, every_s=0.01, read=lambda: 1.0, probe=lambda: 8.0) as sampler:
        with pytest.raises(RuntimeError, match="reference"):
            sampler.interleave("one prompt")
        sampler.set_reference(lambda: next(references), "a decode")  # 1000
        sampler.interleave("one prompt")
        sampler.open_block()  # 1000
        assert sampler.close_block(last_try=False)  # 1010: kept (block 1)
        assert not sampler.close_block(last_try=False)  # 1300: +29 %, retried (block 2)
        assert sampler.close_block(last_try=False)  # 1310: kept (block 3)
        assert not sampler.close_block(last_try=True)  # 1700: moved, but the last try: kept (block 4)
    record = sampler.record().to_dict()  # 1710
    assert record["blocks"] == [1, 3, 4] and record["retried"] == [2] and record["pairing"] == "one prompt"
    assert not record["quiet"] and "block 4" in quiet.judge(record)[1]
    assert quiet.judge({**record, "blocks": [1, 3]})[0]
