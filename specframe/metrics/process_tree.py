"""CPU time of a process and of every process it started, from ``/proc``: what a multi-process benchmark used itself.

A benchmark that runs another engine (the vLLM peer: a front-end, an engine-core loop and a worker, each its own
process) cannot say how many threads it keeps busy, so "the load minus the benchmark's threads" cannot tell its own
work from a neighbour's. What it can measure directly is the CPU time of its **process tree**: this process, every
living descendant (``/proc/<pid>/stat`` ``utime + stime``, all threads), and every descendant already reaped (its
parent's ``cutime + cstime``: the kernel adds a child's whole CPU time, its own reaped children's included, to the
parent's when the parent waits for it). The machine's busy CPU time (``/proc/stat``) minus the tree's is what
**other** processes used.

Edge: a descendant that exits and is reaped by init (an orphan) takes its CPU time out of the tree, so in that
window the tree's share looks smaller and the outside share larger; the error can only call a run busier than it
was, never quieter.

Worked example (ticks of 10 ms): this process 100 ticks, its child 250 + 30, a grandchild 40, a child reaped
earlier 60 (in this process's ``cutime``): the tree has used (100 + 60 + 280 + 40) / 100 = 4.8 CPU seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

from specframe.metrics.machine_load import ProcReader, busy_cpu_seconds, read_proc, ticks_per_second

__all__ = ["machine_and_tree_cpu_seconds", "parse_stat", "tree_cpu_seconds"]


def parse_stat(text: str) -> tuple[int, int, int]:
    """``(pid, ppid, ticks)`` from the text of ``/proc/<pid>/stat``, ``ticks`` = ``utime + stime + cutime + cstime``
    (its own CPU time and that of its reaped children).

    The command name (field 2) is in parentheses and may hold spaces or parentheses, so the fields are split after
    its last ``)``: then ``state`` is field 0, ``ppid`` field 1, ``utime stime cutime cstime`` fields 11-14.
    Example: ``"42 (vllm (core)) S 7 ..."`` -> pid 42, ppid 7."""
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    return int(head.split("(", 1)[0]), int(fields[1]), sum(int(v) for v in fields[11:15])


def tree_cpu_seconds(root: int | None = None, proc_dir: Path = Path("/proc"),
                     ticks: float | None = None) -> float | None:
    """CPU seconds used so far by process ``root`` (default: this one), its living descendants and its reaped ones
    (None without ``/proc`` or when ``root`` is not found)."""
    root = os.getpid() if root is None else root
    ticks = ticks or ticks_per_second()
    children: dict[int, list[int]] = {}
    used: dict[int, int] = {}
    try:
        entries = [p for p in proc_dir.iterdir() if p.name.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            pid, ppid, cpu = parse_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile, or unreadable
        children.setdefault(ppid, []).append(pid)
        used[pid] = cpu
    if root not in used:
        return None
    total, todo = 0, [root]
    while todo:  # depth-first over the descendants; a pid is one process's, so no node is reached twice
        pid = todo.pop()
        total += used.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / ticks


def machine_and_tree_cpu_seconds(proc: ProcReader = read_proc, root: int | None = None) -> tuple[float, float] | None:
    """``(machine busy CPU seconds, this process tree's CPU seconds)`` read together (None without ``/proc``): the
    outside share of a window is the difference of the first minus the difference of the second."""
    busy = busy_cpu_seconds(proc, ticks_per_second())
    tree = tree_cpu_seconds(root)
    return None if busy is None or tree is None else (busy, tree)
