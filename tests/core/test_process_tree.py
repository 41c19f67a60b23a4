"""The CPU time of a process tree (:mod:`specframe.metrics.process_tree`), on real processes: a child's CPU time
counts as the tree's while it runs and after it is reaped; an orphan's (a process that left the tree) does not, and
shows as CPU used outside the tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from specframe.metrics.process_tree import machine_and_tree_cpu_seconds, parse_stat, tree_cpu_seconds

#: A child that burns 0.6 CPU seconds, says so, and waits for its stdin to close.
BURN = ("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
        "print('burnt', flush=True)\nsys.stdin.read()")
#: A process that starts an orphan (its own child, left behind when it exits at once) burning 0.6 CPU seconds; the
#: orphan reports on the inherited stdout when done.
ORPHAN = ("import os, sys, time\nif os.fork() == 0:\n    t = time.process_time()\n"
          "    while time.process_time() - t < 0.6: pass\n    print('burnt', flush=True)\n    os._exit(0)\nos._exit(0)")


def test_stat_lines_parse_with_odd_command_names_and_count_reaped_children() -> None:
    line = "42 (vllm (core) 1) S 7 42 42 0 -1 4194304 100 0 0 0 250 30 15 5 20 0 3 0 1 1 1"
    assert parse_stat(line) == (42, 7, 250 + 30 + 15 + 5)


def _needs_proc() -> None:
    if tree_cpu_seconds() is None or machine_and_tree_cpu_seconds() is None:
        pytest.skip("no /proc on this system")


def test_a_child_counts_as_the_tree_while_it_runs_and_after_it_is_reaped() -> None:
    _needs_proc()
    before, own_before = tree_cpu_seconds(), time.process_time()
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "burnt"
        running = tree_cpu_seconds()
        assert running is not None and (running - before) - (time.process_time() - own_before) >= 0.55
    finally:
        child.stdin.close()
        child.wait()
    reaped = tree_cpu_seconds()  # the child is gone from /proc: its time is in this process's cutime now
    assert reaped is not None and (reaped - before) - (time.process_time() - own_before) >= 0.55


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_an_orphan_is_outside_the_tree_and_its_cpu_shows_as_outside() -> None:
    _needs_proc()
    start, own_start = machine_and_tree_cpu_seconds(), time.process_time()
    assert start is not None
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    parent.wait()  # the orphan is init's (or a subreaper's) child from here on
    assert parent.stdout.readline().strip() == "burnt"
    end, own_end = machine_and_tree_cpu_seconds(), time.process_time()
    assert end is not None
    busy, tree = end[0] - start[0], end[1] - start[1]
    assert busy - tree >= 0.5, (busy, tree)  # the orphan's 0.6 s, less tick rounding
    assert tree - (own_end - own_start) < 0.3, tree  # the short-lived parent's start-up only, not the orphan's 0.6 s
