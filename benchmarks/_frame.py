"""The argument frame of the benchmark scripts: every argument is checked before any work starts.

Each script builds its parser as a :class:`BenchParser` and declares its arguments with the typed helpers below;
``parse_args`` then refuses, with a one-line usage error naming the flag (exit status 2), before a model is loaded
or a prompt read:

* counts (``--n``, ``--rounds``, ``--repeats``, ...) are whole numbers with a lower bound (:func:`count`); lists of
  counts (``--batch-sizes 1,2,4``, ``--budgets 16``) hold the same for every element (:func:`counts`);
* ``--threads`` is a count where 0 means torch's default (:meth:`BenchParser.add_threads`);
* ``--data DIR`` (:meth:`BenchParser.add_data`) is where prompt sets are looked for first (``prompt_sets.data_dirs``:
  then ``$SPECFRAME_DATA_DIR``, ``../shared/data`` when present, installed packages), as ``specframe datasets``;
* ``--split`` (:meth:`BenchParser.add_split`) is ``tune`` by default; ``--split report`` (held-out prompts: the
  published runs) must be asked for and needs at least :data:`MIN_REPORT_PROMPTS` prompts per set;
* ``--wait-quiet SECONDS``, ``--force`` and ``--cache DIR`` (:meth:`BenchParser.add_protocol`): how long to wait for
  the quiet rule at the start (:mod:`specframe.bench.quiet`; default: refuse at once), to run anyway (recorded, so
  never published), and a cache to start from instead of a new private one (:mod:`specframe.bench.learned_state`;
  the record then says ``warm``);
* outputs (:meth:`BenchParser.add_output`) must be writable: not an existing directory where a file is expected,
  no parent that is a file, a directory that accepts new files (probed with a temporary file; directories are
  created as the writers would create them);
* inputs (:meth:`BenchParser.add_input`) must exist; a relative path is looked up from the current directory and
  then from the repository, so a command copied from the README works from any directory.

``--smoke`` (alias ``--quick``, :meth:`BenchParser.add_smoke`) is every script's smoke mode: tiny sizes, no load
check, tune prompts only, seconds on a CPU; what it writes says it is not a measurement. ``make test`` runs every
script that way.

:func:`measured_run` is the measurement protocol every timing script runs under: the quiet rule at the start, a
load sampler through the run, a private cache; its :meth:`RunProtocol.record` is the ``protocol`` field of the
result JSON (split, prompts per set, quiet record, cache, controller state, commit).

Example::

    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=count(), default=20, help="prompts per set")
    ap.add_argument("--batch-sizes", type=counts(), default=[1, 2, 4])
    ap.add_output("runs/results.json")
    args = ap.parse_args(argv)        # `--n -1` -> "error: argument --n: must be a whole number >= 1, got -1"

    if __name__ == "__main__":
        sys.exit(run_script(main))    # a SpecframeError raised later: its one-screen message, status 2
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from specframe.bench.quiet import BlockTry

#: The repository these scripts belong to.
REPO = Path(__file__).resolve().parent.parent
#: Fewest prompts per set of a ``--split report`` run (a published figure).
MIN_REPORT_PROMPTS = 20


def count(minimum: int = 1) -> Callable[[str], int]:
    """An argparse ``type``: a whole number ≥ ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {value}")
        return value

    parse.__name__ = "count"
    return parse


def counts(minimum: int = 1, *, allow_empty: bool = False) -> Callable[[str], list[int]]:
    """An argparse ``type``: comma-separated whole numbers ≥ ``minimum`` (``"1,2,4"``); ``allow_empty`` accepts
    ``""`` as no value at all."""
    one = count(minimum)

    def parse(text: str) -> list[int]:
        items = [item for item in text.split(",") if item.strip()]
        if not items and not allow_empty:
            raise argparse.ArgumentTypeError(f"must list at least one whole number >= {minimum}, got {text!r}")
        values = []
        for item in items:
            try:
                values.append(one(item))
            except argparse.ArgumentTypeError:
                raise argparse.ArgumentTypeError(f"every value must be a whole number >= {minimum}, got "
                                                 f"{item.strip()!r} in {text!r}") from None
        return values

    parse.__name__ = "counts"
    return parse


def name_list(allowed: Sequence[str], *, allow_empty: bool = False) -> Callable[[str], list[str]]:
    """An argparse ``type``: comma-separated names, each one of ``allowed``."""

    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",") if item.strip()]
        unknown = [item for item in items if item not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(map(repr, unknown))}; choose from "
                                             f"{', '.join(allowed)}")
        if not items and not allow_empty:
            raise argparse.ArgumentTypeError(f"must name at least one of {', '.join(allowed)}")
        return items

    parse.__name__ = "name_list"
    return parse


def finite(minimum: float = 0.0) -> Callable[[str], float]:
    """An argparse ``type``: a finite number ≥ ``minimum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number >= {minimum:g}, got {text!r}") from None
        if not math.isfinite(value) or value < minimum:
            raise argparse.ArgumentTypeError(f"must be a finite number >= {minimum:g}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


@dataclass(frozen=True)
class _PathArg:
    dest: str
    flag: str
    kind: Literal["file", "dir"]


def output_problem(path: Path, kind: Literal["file", "dir"]) -> str | None:
    """Why ``path`` cannot receive the output (a file, or a directory of files); None when it can. Missing parent
    directories are created, as the writers would create them."""
    from specframe.files.write import OutputError, check_output_file, check_writable_dir

    try:
        if kind == "dir":
            if path.exists() and not path.is_dir():
                return f"{path} is a file; give a directory"
            check_writable_dir(path, what="output directory")
        else:
            if path.is_dir():
                return f"{path} is a directory; give a file path such as {path / 'results.json'}"
            check_writable_dir(check_output_file(path, what="output file").parent, what="output directory")
    except OutputError as exc:
        return exc.message
    return None


def resolve_input(path: Path, kind: Literal["file", "dir"]) -> tuple[Path | None, str]:
    """``path`` as an absolute path that exists: from the current directory, else from the repository; or None
    with the reason."""
    from specframe.files.read import path_problem

    places = [path] if path.is_absolute() else [Path.cwd() / path, REPO / path]
    for place in places:
        if path_problem(place, directory=kind == "dir") is None:
            return place.resolve(), ""
    problem = path_problem(places[0], directory=kind == "dir")
    where = f"{places[0]} {problem}" + ("" if len(places) == 1 else f" (nor is it under the repository {REPO})")
    return None, where


class BenchParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that checks outputs and inputs after parsing (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._outputs: list[_PathArg] = []
        self._inputs: list[_PathArg] = []
        self._per_set: Callable[[Any], int] | None = None

    def add_output(self, default: str | Path, *, flag: str = "--out", kind: Literal["file", "dir"] = "file",
                   help: str = "where the results go (JSON)") -> None:
        """An output path (``kind``: a file, or a directory the script fills), checked writable at parse time and
        made absolute."""
        action = self.add_argument(flag, type=Path, default=Path(default), help=f"{help} (default: %(default)s)")
        self._outputs.append(_PathArg(action.dest, flag, kind))

    def add_input(self, flag: str, default: str | Path | None, *, kind: Literal["file", "dir"] = "file",
                  help: str = "", positional: bool = False) -> None:
        """An input path that must exist (``kind``: a file or a directory), resolved at parse time from the
        current directory, else from the repository, and made absolute."""
        if positional:
            action = self.add_argument(flag, type=Path, help=help)
        else:
            action = self.add_argument(flag, type=Path, default=None if default is None else Path(default),
                                       help=help + (" (default: %(default)s)" if default is not None else ""))
        self._inputs.append(_PathArg(action.dest, flag, kind))

    def add_threads(self, default: int) -> None:
        self.add_argument("--threads", type=count(0), default=default,
                          help="torch CPU threads, 0: torch's default (default: %(default)s)")

    def add_data(self) -> None:
        """``--data DIR``: where prompt sets are looked for first (see the module docstring)."""
        self.add_input("--data", None, kind="dir",
                       help="a directory holding the prompt sets (DIR/gsm8k/test.jsonl, ...), searched before "
                            "$SPECFRAME_DATA_DIR, ../shared/data and installed packages")

    def add_split(self, per_set: Callable[[Any], int] = lambda args: args.n) -> None:
        """``--split {tune,report}``, ``tune`` by default; ``report`` refused with fewer than
        :data:`MIN_REPORT_PROMPTS` prompts per set (``per_set(args)``), and never read by a smoke run."""
        from specframe.bench.splits import SPLITS, TUNE

        self.add_argument("--split", choices=SPLITS, default=TUNE,
                          help="tune (default): the prompts settings are developed on; report: held-out prompts, "
                               f"for published runs only (at least {MIN_REPORT_PROMPTS} per set)")
        self._per_set = per_set

    def add_protocol(self) -> None:
        """``--wait-quiet SECONDS``, ``--force`` and ``--cache DIR`` (see the module docstring)."""
        self.add_argument("--wait-quiet", type=finite(), default=0.0,
                          help="seconds to wait for a quiet machine before refusing (default: %(default)s)")
        self.add_argument("--force", action="store_true",
                          help="run even when the machine is not quiet (the record says so: never published)")
        self.add_argument("--cache", type=Path, default=None,
                          help="start from this $SPECFRAME_CACHE instead of a new private one (recorded as warm "
                               "when it holds learnt files)")

    def add_smoke(self, what: str) -> None:
        self.add_argument("--smoke", "--quick", dest="smoke", action="store_true",
                          help=f"a smoke run ({what}; no load check): checks that the script works, its figures "
                               "mean nothing")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed = super().parse_args(args, namespace)
        for arg in self._inputs:
            value = getattr(parsed, arg.dest)
            if value is None:
                continue
            found, why = resolve_input(value, arg.kind)
            if found is None:
                self.error(f"argument {arg.flag}: {why}")
            setattr(parsed, arg.dest, found)
        for arg in self._outputs:
            value = getattr(parsed, arg.dest).absolute()
            problem = output_problem(value, arg.kind)
            if problem:
                self.error(f"argument {arg.flag}: {problem}")
            setattr(parsed, arg.dest, value)
        if self._per_set is not None:
            smoke = getattr(parsed, "smoke", False)
            if parsed.split == "report" and not smoke and self._per_set(parsed) < MIN_REPORT_PROMPTS:
                self.error(f"argument --split: report (a published run) needs at least {MIN_REPORT_PROMPTS} prompts "
                           f"per set, got {self._per_set(parsed)}; raise --n, or use --split tune")
            if smoke:
                parsed.split = "tune"  # a smoke run is no measurement: it never reads the held-out prompts
        return parsed


def run_script(main: Callable[[], int]) -> int:
    """A script's exit status: ``main()``'s, or 2 with the one-screen message of a
    :class:`~specframe.errors.SpecframeError` (bad input found after parsing: a malformed recipe, a missing
    checkpoint), as the ``specframe`` command does."""
    import sys

    from specframe.errors import SpecframeError

    try:
        return main()
    except SpecframeError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return 2


def decoded(outcomes: Sequence[Any], what: str) -> list[Any]:
    """``outcomes`` of ``Pipeline.generate_batch``, every one decoded: a benchmark's figures mean nothing with a
    refused request among them, so a refusal stops the script with its reason (one screen, exit status 2)."""
    from specframe.errors import GenerationError
    from specframe.pipeline import RefusedRequest

    refused = [o for o in outcomes if isinstance(o, RefusedRequest)]
    if refused:
        raise GenerationError(f"{what}: {len(refused)} of {len(outcomes)} request(s) refused; the first, "
                              f"{refused[0]}", hint="the benchmark needs every request decoded; "
                              "fix the cause above (a smaller batch, a shorter prompt) and rerun")
    return list(outcomes)


def apply_threads(threads: int) -> None:
    """Set torch's CPU threads (0: leave torch's default)."""
    import torch

    if threads:
        torch.set_num_threads(threads)


def own_threads(threads: int) -> int:
    """The threads a run keeps busy: ``threads``, or torch's default for 0."""
    import torch

    return threads or torch.get_num_threads()


def shipped_plain_pipeline() -> Any:
    """The shipped SmolLM2 plain loop (``examples/smollm2/plain.yaml``), for a script whose own pipelines are
    built where the reference workload cannot reach them (:meth:`RunProtocol.set_plain_reference`)."""
    from specframe.pipeline import Pipeline

    return Pipeline.from_yaml(REPO / "examples" / "smollm2" / "plain.yaml")


@dataclass
class PlainOutputs:
    """Each kind's prompts decoded greedily by the shipped plain loop (:func:`plain_outputs`): what a counts script
    holds its pipelines' outputs to, with the loop whose target they share."""

    plain: Any  # the plain loop's Pipeline
    host: Any  # the PluginHost the script's other pipelines are built with
    prompts: dict[str, list[str]]  # kind -> prompt texts
    tokens: dict[str, list[list[int]]]  # kind -> the plain loop's output per prompt


def plain_outputs(sets: Mapping[str, Any], kinds: Mapping[str, str], max_new_tokens: int) -> PlainOutputs:
    """Load the shipped plain loop and decode every prompt of ``sets`` (prompt sets by name; ``kinds``: kind ->
    set name) for ``max_new_tokens`` tokens."""
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    host = PluginHost()
    plain = Pipeline.from_yaml(REPO / "examples" / "smollm2" / "plain.yaml", host=host)
    prompts = {kind: [item.text for item in sets[name].prompts] for kind, name in kinds.items()}
    tokens = {kind: [plain.generate(p, max_new_tokens).tokens for p in texts] for kind, texts in prompts.items()}
    return PlainOutputs(plain, host, prompts, tokens)


@contextmanager
def bound_to(cpus: Collection[int] | None) -> Iterator[None]:
    """Run the body on ``cpus`` (None: where the process already runs), the process's CPU set restored after."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


#: Tokens the plain-loop reference workload decodes (about a second for SmolLM2-135M on one core).
REFERENCE_TOKENS = 16


class RunProtocol:
    """One measured run's protocol (see :func:`measured_run`)."""

    def __init__(self, args: Any, sampler: Any, cache: dict[str, Any]) -> None:
        self.args = args
        self.sampler = sampler
        self.cache = cache
        self.freeze: Any = None

    @property
    def start_load(self) -> float | None:
        return self.sampler.start

    def probe(self) -> None:
        """Time the steadiness probe between two phases (:mod:`specframe.bench.steadiness`); the record holds every
        probe and the run is judged by their spread."""
        self.sampler.probe_now()

    def set_reference(self, work: Callable[[], object], what: str) -> None:
        """Register a fixed piece of this run's own work (``what`` describes it) as its reference workload, timed
        now and at every later probe (:mod:`specframe.bench.steadiness`: the fixed probe alone misses slowdowns
        that decoding feels); without one a run is not shown steady."""
        from specframe.bench.steadiness import reference_probe

        self.sampler.set_reference(reference_probe(work), what)

    def set_plain_reference(self, plain: Any, prompt: Any) -> None:
        """Register the plain loop ``plain`` decoding ``prompt`` for :data:`REFERENCE_TOKENS` tokens (2 in a smoke
        run) as the reference workload: what every speed ratio of a decode benchmark is taken against."""
        tokens = 2 if getattr(self.args, "smoke", False) else REFERENCE_TOKENS
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None

        def work() -> None:  # on the CPUs of the registration, wherever the run is bound when it is timed again
            with bound_to(cpus):
                plain.generate(prompt, tokens)

        plain.generate(prompt, 2)  # first-call allocations out of the first timing
        self.set_reference(work, f"the plain loop decoding a fixed prompt for {tokens} tokens")

    def interleave(self, what: str) -> None:
        """Declare this run interleaved (``what``: what one block holds): every ratio it reports compares decodes
        of one block, and its steadiness is judged block by block (:mod:`specframe.bench.steadiness`). Needs the
        reference workload registered first."""
        self.sampler.interleave(what)

    def blocks(self) -> Iterator[BlockTry]:
        """The tries of one block of this interleaved run (:meth:`specframe.bench.quiet.LoadSampler.block_tries`:
        close each once its decodes are done; keep them when ``close()`` says so)."""
        tries: Iterator[BlockTry] = self.sampler.block_tries()
        return tries

    def open_block(self) -> None:
        """Time the probes that open the next block (after work that is not a block: loading, warm-ups)."""
        self.sampler.open_block()

    def freeze_controllers(self, pipes: Sequence[Any]) -> Any:
        """Snapshot the ``budget: auto`` controllers of ``pipes`` after the warm-up; ``.restore()`` before every
        measured request (:class:`specframe.bench.learned_state.ControllerFreeze`)."""
        from specframe.bench.learned_state import ControllerFreeze

        self.freeze = ControllerFreeze(pipes)
        return self.freeze

    def record(self, *, prompts_per_set: int | None = None, controller: dict[str, Any] | None = None,
               timed: bool = True) -> dict[str, Any]:
        """The ``protocol`` field of the result JSON: the loads so far under the quiet rule, the split, the cache,
        the commit and the CPU.
        Its ``published`` is :func:`specframe.bench.published.verdict` on this record as written (the load and
        steadiness, unless ``timed`` is False: a file of counts; the split and, for a per-set report
        (``prompts_per_set`` given), the prompt count); the docs judge the file again when they render it, by the
        rule of their day."""
        from specframe.bench.provenance import git_revision
        from specframe.bench.published import NOT_FROZEN, verdict
        from specframe.metrics.machine_info import machine_summary

        split = getattr(self.args, "split", None)
        smoke = bool(getattr(self.args, "smoke", False))
        record = {
            "split": split, "prompts_per_set": prompts_per_set, "smoke": smoke, "published": False,
            "quiet": self.sampler.record().to_dict(), "cache": self.cache,
            "controller": controller if controller is not None else (
                self.freeze.record() if self.freeze is not None else dict(NOT_FROZEN)),
            "commit": git_revision(REPO), "cpu": machine_summary()["cpu"],
        }
        record["published"] = verdict({"protocol": record, "smoke": smoke},
                                      per_set=prompts_per_set is not None, timed=timed).published
        return record


@contextmanager
def measured_run(args: Any, threads: int, *, process_tree: bool = False) -> Iterator[RunProtocol]:
    """The body as one measured run: refuse unless the machine is quiet at the start (not in a smoke run; waits up
    to ``--wait-quiet``), sample the load in the background through the body, and point ``$SPECFRAME_CACHE`` at a
    private cache (``--cache`` when given). ``threads``: the benchmark's own busy threads; ``process_tree``: the
    benchmark runs other processes (an engine's), so the quiet rule measures the CPU used outside its process tree
    (:mod:`specframe.bench.quiet`)."""
    from specframe.bench.learned_state import private_run_cache
    from specframe.bench.quiet import LoadSampler, refuse_unless_quiet
    from specframe.bench.steadiness import probe_ms
    from specframe.metrics.machine_load import load_average

    unchecked = bool(getattr(args, "smoke", False) or getattr(args, "force", False))
    start = load_average() if unchecked else refuse_unless_quiet(threads, wait_s=getattr(args, "wait_quiet", 0.0))
    sampler = LoadSampler(threads, start=start, process_tree=process_tree, probe=probe_ms)
    with private_run_cache(getattr(args, "cache", None)) as cache, sampler:
        yield RunProtocol(args, sampler, cache)


def use_shipped_checkpoints() -> None:
    """Point the example pipelines' ``${SPECFRAME_CHECKPOINTS:-checkpoints/smollm2-135m}`` (and the chat zoo's
    ``${SPECFRAME_CHAT_ZOO:-checkpoints/smollm2-135m-chat}``) at this repository's checkpoints (unless the caller set
    them), so the scripts work from any directory."""
    os.environ.setdefault("SPECFRAME_CHECKPOINTS", str(REPO / "checkpoints" / "smollm2-135m"))
    os.environ.setdefault("SPECFRAME_CHAT_ZOO", str(REPO / "checkpoints" / "smollm2-135m-chat"))


@contextmanager
def in_repository() -> Iterator[Path]:
    """Run the body with the repository as the current directory (the recipes' relative data paths are written
    from there); the caller's directory is restored afterwards."""
    before = Path.cwd()
    os.chdir(REPO)
    try:
        yield REPO
    finally:
        os.chdir(before)
