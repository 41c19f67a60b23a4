"""Peer benchmark: specframe and vLLM-CPU side by side, each cell under the same conditions, with its ratio.

Four configurations on the same prompts, machine, precision (float32, greedy) and token limit:

* specframe's plain loop and its speculative pipelines (``--pipelines``: the DFlash chain with 7 drafts, DARTree
  ``budget: auto``; the best of them per batch size is "specframe's best speculative pipeline"), in this (main)
  environment, in-process;
* vLLM-CPU plain and with the drafter specframe exports (``specframe vllm-export``, 7 drafts per round), in the vLLM
  environment (``make vllm-setup``), through ``specframe_vllm.bench_vllm`` in a subprocess.

**What is the same on both sides** (the fairness rules):

* *threads*: ``--threads N`` compute threads on the same CPUs (``--cpus``, default the last N this process may
  use): specframe runs with ``torch.set_num_threads(N)`` and its process bound to those CPUs; vLLM's worker gets
  ``VLLM_CPU_OMP_THREADS_BIND=<those CPUs>`` (vLLM sets ``OMP_NUM_THREADS`` to their count and binds one thread to
  each). vLLM's front-end and scheduler processes run where vLLM puts them (it reserves a core for its scheduler
  by design), unless ``--vllm-all-on-cpus`` binds them to the same CPUs too (the strictest equal-CPU reading);
  the CPU seconds each side used per wall second are in the table (``CPU/s``), so any extra core vLLM's design
  takes is visible.
* *batching*: **continuous on both sides**, because that is how each serves many requests: a batch size ``b``
  means at most ``b`` requests in flight, the next waiting one admitted as soon as one finishes. specframe:
  ``Pipeline.generate_batch(prompts, batch_size=b)`` (the one decode loop's join / round / leave,
  ``specframe.decode.loop``); vLLM: one ``LLM.generate`` call over all prompts on an engine built with
  ``max_num_seqs = b``. Static groups would time vLLM's per-call start and drain, which no vLLM user pays, and
  would hide what continuous batching costs specframe (a joining row's prefill).
* *prompts*: the same token ids (GSM8K and HumanEval first turns, the chat template applied by specframe's
  tokenizer, vLLM handed the ids), ``--per-set`` from each, from the **tune** split unless ``--split report``
  (``benchmarks/prompt_sets.py``, as every speed benchmark loads them); the same token limit; EOS ends a request
  on both sides.
* *warm-up*: one untimed call on the first ``b`` prompts (a few tokens) before each cell; vLLM's engine start-up
  is outside the timing (it is recorded); vLLM's prefix cache is off (the repeats would otherwise skip prefill).
  specframe's pipelines first decode two ``tune``-split prompts (untimed: ``budget: auto`` measures its cost
  profile and its request memory learns there), then every ``auto`` controller is frozen and restored before each
  cell's warm-up and each timed pass (:class:`~specframe.bench.learned_state.ControllerFreeze`, the JSON's
  ``protocol.controller``): no pass is decoded by a controller that has seen its prompts, in an earlier pass,
  batch size or warm-up (vLLM keeps no such memory).
* *engine modes*: vLLM runs ``enforce_eager`` as in the cross-check (the ``vllm-cpu`` build's Triton has no CPU
  backend); specframe runs its pipelines' own settings (``cpu_linear: auto``, SDPA attention).

**Losslessness**: every greedy output of every cell is compared token for token with transformers' ``generate()``
in float32 on the same prompt ids (the target's own model, its default kernels: :mod:`specframe.reference`); an
output that stops at EOS matches when it is a prefix of the reference ending where the reference emits EOS. The
table's last column says how many outputs match; the script warns when any does not. At batch 1 that ``generate()``
pass is timed too, inside the batch-1 block (one request at a time, a cell of its own): specframe's plain loop
against it is the kernel gain, printed under the ratio table apart from the engines' ratios.

**Quiet machine**: outside ``--smoke`` the script runs under the quiet rule (:mod:`specframe.bench.quiet`
through ``benchmarks/_frame.py`` ``measured_run``: refused unless the load is below 0.3 at the start, a private
cache), in its form for a benchmark of several processes: vLLM's engine runs a front-end, a scheduling loop that
spins at 0.7-1.0 of a core and a worker as separate processes, so "the load minus our threads" would charge vLLM's
own processes to the neighbours. The CPU used **outside this script's process tree** (the vLLM side runs in its
child processes) is measured instead and must stay below 0.3 of a core over every trailing minute; the record is
the JSON's ``protocol.quiet`` field. Every timed pass also gets the verdict of
:class:`~specframe.metrics.machine_load.LoadWindow` (other processes kept more than a quarter of a core busy): a
cell with a contended pass is marked ``*``.

**Interleaved by batch size**: one batch size is one block of the run (:func:`measure_block`): specframe's cells
and vLLM's (a fresh ``bench_vllm`` subprocess per block), the two engines' order alternating from block to block,
timed around by the reference workload (the plain loop decoding a fixed prompt) and measured again when its two
timings differ by more than 15 % (``RunProtocol.blocks``, :mod:`specframe.bench.steadiness`). Every ratio then
compares passes of one block, minutes apart: the whole run (half an hour on 2 cores) on a guest whose speed moves by
a fifth within that time would otherwise compare specframe's cells with vLLM's made twenty minutes later.

Each cell is the median over ``--repeats`` passes (tokens / wall seconds), with the min-max spread and τ where a
drafter runs. Output: the tables on stdout, ``--out-dir``/peer.md and peer.json (CPU, load, threads, CPUs,
versions of both environments, the commit, every pass, every output).

``--smoke`` (what ``make vllm-check`` runs) decodes 3 prompts to 8 tokens once at batch 2 (a join mid-run), to
prove the script works; its figures mean nothing. The published table (a quiet machine, held-out prompts)::

    .venv/bin/python plugins/specframe-vllm/benchmarks/vllm_peer.py --drafter runs/vllm-check/drafter \\
        --split report --per-set 20 --max-new-tokens 64 --repeats 1 --out-dir runs/vllm-peer
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
PLUGIN = Path(__file__).resolve().parents[1]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))  # the benchmark scripts' shared frame and prompt sets

from _frame import (  # noqa: E402
    BenchParser,
    bound_to,
    count,
    counts,
    decoded,
    in_repository,
    measured_run,
    name_list,
    own_threads,
    run_script,
    use_shipped_checkpoints,
)
from prompt_sets import data_dirs, load_prompt_sets, require_sets, warm_up_prompts  # noqa: E402

#: specframe's speculative pipelines (examples/smollm2) and the overrides that match vLLM's drafter where needed.
SPECULATIVE = {"specframe-dflash-chain": ("examples/smollm2/dflash-chain.yaml", ["budget=7"]),
               "specframe-dartree-auto": ("examples/smollm2/dartree-pruned.yaml", [])}
PLAIN = ("specframe-plain", "examples/smollm2/plain.yaml")
#: transformers' ``generate()`` at batch 1, one request at a time: the kernel gain's denominator.
GENERATE = "transformers-generate"
SETS = ("gsm8k", "humaneval")  # math and code: where the targets are set
NUM_SPECULATIVE_TOKENS = 7  # the exported drafter's block of 8: 7 drafts per round
#: ``--smoke``: 3 prompts (2 per set, cut to 3) to 8 tokens, one pass at batch 2 (the third prompt joins mid-run).
SMOKE_PER_SET, SMOKE_PROMPTS, SMOKE_TOKENS, SMOKE_BATCH = 2, 3, 8, 2


# --------------------------------------------------------------------------------------------- arguments
def parse_args(argv: Sequence[str] | None) -> Any:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_input("--drafter", None, kind="dir", help="the exported drafter (`specframe vllm-export`)")
    ap.add_argument("--vllm-python", type=Path, default=Path(".venv-vllm/bin/python"),
                    help="the vLLM environment's python (`make vllm-setup`; default: %(default)s)")
    ap.add_data()
    ap.add_argument("--per-set", type=count(), default=10, help="prompts per set (GSM8K, HumanEval)")
    ap.add_split(per_set=lambda args: args.per_set)
    ap.add_argument("--max-new-tokens", type=count(), default=128)
    ap.add_argument("--batch-sizes", type=counts(), default=[1, 4, 8], help="comma-separated (default: 1,4,8)")
    ap.add_argument("--repeats", type=count(), default=3)
    ap.add_argument("--pipelines", type=name_list(tuple(SPECULATIVE)), default=list(SPECULATIVE),
                    help=f"specframe's speculative pipelines (default: {','.join(SPECULATIVE)})")
    ap.add_argument("--threads", type=count(), default=1, help="compute threads of each side (default: 1)")
    ap.add_argument("--cpus", type=counts(minimum=0), default=None,
                    help="the CPUs both sides compute on, comma-separated (default: the last --threads CPUs "
                         "this process may use)")
    ap.add_argument("--vllm-all-on-cpus", action="store_true",
                    help="bind vLLM's front-end and scheduler processes to --cpus too (default: only its worker)")
    ap.add_protocol()
    ap.add_smoke("3 prompts, 8 tokens, batch 2, one pass")
    ap.add_output("runs/vllm-peer", flag="--out-dir", kind="dir", help="where peer.json and peer.md go")
    args = ap.parse_args(argv)
    if args.drafter is None:
        ap.error("argument --drafter is required: the exported drafter directory (`specframe vllm-export "
                 "checkpoints/smollm2-135m/drafter -o runs/vllm-drafter ...`, or `make vllm-check`'s "
                 "runs/vllm-check/drafter)")
    python = args.vllm_python if args.vllm_python.is_absolute() else Path.cwd() / args.vllm_python
    if not python.is_file():
        ap.error(f"argument --vllm-python: {python} does not exist; build the vLLM environment with "
                 "`make vllm-setup`, or name its python")
    args.vllm_python = python  # not resolved: a venv's python is a link, and resolving it leaves the venv
    usable = sorted(os.sched_getaffinity(0))
    if args.cpus is None:
        if args.threads > len(usable):
            ap.error(f"argument --threads: {args.threads} threads, but this process may use only {len(usable)} "
                     f"CPU(s) ({','.join(map(str, usable))})")
        args.cpus = usable[-args.threads:]
    elif len(args.cpus) != args.threads or len(set(args.cpus)) != len(args.cpus):
        ap.error(f"argument --cpus: give {args.threads} distinct CPU(s), one per thread (--threads "
                 f"{args.threads}), got {','.join(map(str, args.cpus))}")
    elif not set(args.cpus) <= set(usable):
        ap.error(f"argument --cpus: CPU(s) {','.join(str(c) for c in args.cpus if c not in usable)} are not "
                 f"among those this process may use ({','.join(map(str, usable))})")
    if args.smoke:
        args.per_set, args.max_new_tokens, args.repeats = SMOKE_PER_SET, SMOKE_TOKENS, 1
        args.batch_sizes = [SMOKE_BATCH]
    return args


# --------------------------------------------------------------------------------------------- cells
@dataclass
class Cell:
    """One (method, batch size) measurement: passes, the outputs of the first, and how they compare."""

    method: str
    batch: int
    runs: list[dict[str, Any]]  # per pass: tokens, seconds, tau, load (MachineLoad.to_dict()), cpu_per_s
    outputs: list[list[int]]  # per prompt, the first pass's new tokens
    repeats_agree: bool = True
    identical: int = 0  # outputs equal to generate()'s
    extra: dict[str, Any] | None = None  # vLLM: engine start-up and settings

    @property
    def speculative(self) -> bool:
        return not self.method.endswith("plain") and self.method != GENERATE

    @property
    def rates(self) -> list[float]:
        return [r["tokens"] / r["seconds"] for r in self.runs]

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    @property
    def busy(self) -> bool:
        return any(r["load"].get("contended") for r in self.runs)

    @property
    def tau(self) -> float | None:
        taus = [r["tau"] for r in self.runs if r["tau"] is not None]
        return statistics.median(taus) if taus else None

    @property
    def cpu_per_s(self) -> float | None:
        values = [r["cpu_per_s"] for r in self.runs if r["cpu_per_s"] is not None]
        return statistics.median(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "batch": self.batch, "median_tok_s": self.median,
                "min_tok_s": min(self.rates), "max_tok_s": max(self.rates), "tau": self.tau,
                "cpu_per_s": self.cpu_per_s, "busy": self.busy, "identical_to_generate": self.identical,
                "outputs_compared": len(self.outputs), "repeats_agree": self.repeats_agree, "runs": self.runs,
                "outputs": self.outputs, **(self.extra or {})}


def pass_record(tokens: int, start: Any, end: Any, tau: float | None) -> dict[str, Any]:
    """One timed pass from its two :class:`~specframe.metrics.machine_load.LoadSample` readings: the machine's
    load over it (the same rule for both sides) and the CPU seconds the measured side used per wall second."""
    from specframe.metrics.machine_load import LoadWindow

    seconds = end.wall - start.wall
    load = LoadWindow(cpus=os.cpu_count() or 1).finish(start, end)  # the machine's CPUs, whatever this one is bound to
    return {"tokens": tokens, "seconds": seconds, "load": load.to_dict(),
            "cpu_per_s": (end.own_cpu_s - start.own_cpu_s) / seconds if seconds > 0 else None, "tau": tau}


def time_specframe(name: str, pipe: Any, prompts: list[Any], batch: int, max_new: int, repeats: int,
                   restore: Callable[[], None] | None = None) -> Cell:
    """``repeats`` timed passes of continuous batching over every prompt (``[1, P]`` ids each), after an untimed
    warm-up on the first ``batch`` prompts. ``restore`` (the run's
    :class:`~specframe.bench.learned_state.ControllerFreeze`) puts every ``budget:
    auto`` controller back to its state after the tune-split warm-up before the warm-up and before each pass, so no
    pass decodes a prompt its controller's request memory has seen (in an earlier pass, batch size or warm-up)."""
    from specframe.metrics.machine_load import LoadWindow

    if restore is not None:
        restore()
    decoded(pipe.generate_batch(prompts[:batch], min(4, max_new), batch_size=batch), f"{name} warm-up")
    window = LoadWindow()
    runs: list[dict[str, Any]] = []
    outputs: list[list[int]] | None = None
    agree = True
    for _ in range(repeats):
        if restore is not None:
            restore()  # a deep copy of the snapshot, outside the timing
        start = window.sample()
        results = decoded(pipe.generate_batch(prompts, max_new, batch_size=batch), f"{name} at batch {batch}")
        end = window.sample()
        tokens = [list(r.tokens) for r in results]
        outputs = tokens if outputs is None else outputs
        agree = agree and tokens == outputs
        rounds = [r for res in results for r in res.rounds if r.drafted]
        tau = sum(r.committed for r in rounds) / len(rounds) if rounds else None
        runs.append(pass_record(sum(map(len, tokens)), start, end, tau))
    assert outputs is not None
    return Cell(name, batch, runs, outputs, agree)


def time_generate(pipe: Any, prompts: list[Any], max_new: int) -> Cell:
    """transformers' ``generate()`` (float32, greedy, no EOS stop: ``max_new`` tokens each) on every prompt, one
    request at a time, as one timed pass: the batch-1 cell of the kernel gain (specframe's plain loop against the
    target's own decoding, quoted apart from the engines' ratios), whose outputs are the losslessness reference."""
    from specframe.metrics.machine_load import LoadWindow

    window = LoadWindow()
    start = window.sample()
    outputs = reference_outputs(pipe, prompts, max_new)
    end = window.sample()
    return Cell(GENERATE, 1, [pass_record(sum(map(len, outputs)), start, end, None)], outputs)


def vllm_cells(raw: list[dict[str, Any]]) -> list[Cell]:
    """The vLLM side's results (``bench_vllm``'s JSON) as cells, judged by the same load rule."""
    from specframe.metrics.machine_load import LoadSample

    cells = []
    for r in raw:
        runs = [pass_record(p["tokens"], LoadSample(**p["start"]), LoadSample(**p["end"]), p["tau"])
                for p in r["runs"]]
        cells.append(Cell(r["method"], r["batch"], runs, r["outputs"], r["repeats_agree"],
                          extra={"startup_s": r["startup_s"], "engine": r["engine"]}))
    return cells


# --------------------------------------------------------------------------------------------- losslessness
def matches_reference(output: Sequence[int], reference: Sequence[int], max_new: int, eos: set[int]) -> bool:
    """Whether a greedy ``output`` is what ``generate()`` gives: ``reference`` is generate()'s ``max_new`` tokens
    without an EOS stop, so the output must be its prefix, and be cut only by the limit or at an EOS (the output's
    last token, or the reference's next one, for an engine that leaves the EOS out).

    Example: reference ``[5, 9, 2, 7]`` with EOS 2, ``max_new`` 4: ``[5, 9, 2]`` and ``[5, 9]`` match, ``[5]`` and
    ``[5, 9, 2, 8]`` do not."""
    n = len(output)
    if list(output) != list(reference[:n]):
        return False
    return n >= max_new or (n > 0 and output[-1] in eos) or (n < len(reference) and reference[n] in eos)


def reference_outputs(pipe: Any, prompts: list[Any], max_new: int) -> list[list[int]]:
    """transformers' ``generate()`` (float32, greedy, no EOS stop) of every prompt, ``max_new`` tokens."""
    from specframe.reference import reference_result

    return [reference_result(pipe, ids, new_tokens=max_new, seed=0)[0].tokens for ids in prompts]


def compare(cells: list[Cell], reference: list[list[int]], max_new: int, eos: set[int]) -> None:
    """Set each cell's count of outputs identical to ``reference``."""
    for cell in cells:
        cell.identical = sum(matches_reference(out, ref, max_new, eos)
                             for out, ref in zip(cell.outputs, reference, strict=True))


# --------------------------------------------------------------------------------------------- tables
def ratio_rows(cells: list[Cell], batches: list[int]) -> list[dict[str, Any]]:
    """Per batch size: specframe / vLLM for plain decoding, for the best speculative configuration of each (vLLM
    has one: the exported drafter), and for the best of each side (plain included)."""
    rows = []
    for b in batches:
        at = {c.method: c for c in cells if c.batch == b}
        sf = [c for c in at.values() if c.method.startswith("specframe")]
        vl = [c for c in at.values() if c.method.startswith("vllm")]
        sf_plain, vl_plain, generate = at.get(PLAIN[0]), at.get("vllm-plain"), at.get(GENERATE)
        sf_spec = max((c for c in sf if c.speculative), key=lambda c: c.median, default=None)
        vl_spec = at.get("vllm-dflash")
        sf_best = max(sf, key=lambda c: c.median, default=None)
        vl_best = max(vl, key=lambda c: c.median, default=None)

        def ratio(a: Cell | None, v: Cell | None) -> float | None:
            return a.median / v.median if a is not None and v is not None and v.median > 0 else None

        engines = [c for c in at.values() if c.method != GENERATE]  # the reference's own cell compares itself
        rows.append({"batch": b, "plain": ratio(sf_plain, vl_plain), "speculative": ratio(sf_spec, vl_spec),
                     "best": ratio(sf_best, vl_best), "plain_vs_generate": ratio(sf_plain, generate),
                     "specframe_speculative": sf_spec and sf_spec.method,
                     "specframe_best": sf_best and sf_best.method, "vllm_best": vl_best and vl_best.method,
                     "identical": sum(c.identical for c in engines),
                     "compared": sum(len(c.outputs) for c in engines)})
    return rows


def render(cells: list[Cell], ratios: list[dict[str, Any]], header: str) -> str:
    """The header, the ratio table (one row per batch size) and the detail table (one row per cell), Markdown: the
    tables the docs render from peer.json (:mod:`specframe.bench.peer_table`)."""
    from specframe.bench.peer_table import peer_tables

    return "\n".join([header, "", *peer_tables([c.to_dict() for c in cells], ratios)])


# --------------------------------------------------------------------------------------------- the vLLM side
def vllm_env(cpus: list[int]) -> dict[str, str]:
    """The vLLM subprocess's environment: its worker bound to ``cpus`` (one OpenMP thread each), a 2 GiB KV cache,
    and this checkout's plugin first on the path (the vLLM side runs the code of the driver's checkout)."""
    path = os.pathsep.join(p for p in (str(PLUGIN), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OMP_NUM_THREADS": str(len(cpus)), "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cpus)),
            "VLLM_CPU_KVCACHE_SPACE": "2", "PYTHONPATH": path}


def run_vllm(out_dir: Path, inputs: dict[str, Any], vllm_python: Path, cpus: list[int], *,
             everything_on_cpus: bool = False) -> dict[str, Any]:
    """Run ``specframe_vllm.bench_vllm`` in the vLLM environment, its worker bound to ``cpus`` (and with
    ``everything_on_cpus`` every vLLM process: they inherit the launcher's CPUs); its JSON."""
    from specframe.errors import GenerationError
    from specframe.files import write_text

    write_text(out_dir / "vllm-inputs.json", json.dumps(inputs) + "\n", what="the vLLM side's inputs")
    with bound_to(cpus if everything_on_cpus else None):
        status = subprocess.run([str(vllm_python), "-m", "specframe_vllm.bench_vllm",
                                 str(out_dir / "vllm-inputs.json"), "--out", str(out_dir / "vllm.json")],
                                env=vllm_env(cpus)).returncode
    if status != 0:
        raise GenerationError(f"the vLLM side ({vllm_python} -m specframe_vllm.bench_vllm) exited with status "
                              f"{status}", hint="its messages are above; `make vllm-setup` rebuilds the vLLM "
                                                "environment")
    data: dict[str, Any] = json.loads((out_dir / "vllm.json").read_text())
    return data


# --------------------------------------------------------------------------------------------- main
def versions() -> dict[str, str | None]:
    import torch
    import transformers

    import specframe

    return {"specframe": specframe.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version()}


#: What one block of the run holds (its record's ``pairing``).
BLOCK_CONTENTS = ("one batch size: specframe's plain loop and speculative pipelines and vLLM plain and with the "
                  "exported drafter, over every prompt, the two engines' order alternating per block")


def measure_block(args: Any, pipes: dict[str, Any], prompts: list[Any], inputs: dict[str, Any], batch: int, *,
                  vllm_first: bool, restore: Callable[[], None] | None = None) -> tuple[list[Cell], dict[str, Any]]:
    """One block of the interleaved run: every cell of batch size ``batch``, specframe's (in this process, bound to
    ``args.cpus``; at batch 1 also transformers' ``generate()``, :func:`time_generate`) and vLLM's (its subprocess,
    engines started per cell, their start-up untimed), vLLM's first when ``vllm_first``; the cells and the vLLM
    side's JSON. The block is timed around by the reference workload
    (``RunProtocol.blocks``), so every ratio of this batch size compares passes made minutes apart, not half an
    hour (:mod:`specframe.bench.steadiness`). ``restore``: see :func:`time_specframe`."""

    def specframe_side() -> list[Cell]:
        with bound_to(args.cpus):
            cells = [time_specframe(name, pipe, prompts, batch, args.max_new_tokens, args.repeats, restore)
                     for name, pipe in pipes.items()]
            if batch == 1:  # the target's own generate(), one request at a time: the kernel gain's denominator
                cells.append(time_generate(pipes[PLAIN[0]], prompts, args.max_new_tokens))
            return cells

    def vllm_side() -> dict[str, Any]:
        return run_vllm(args.out_dir, {**inputs, "batch_sizes": [batch]}, args.vllm_python, args.cpus,
                        everything_on_cpus=args.vllm_all_on_cpus)

    if vllm_first:
        vllm = vllm_side()
        own = specframe_side()
    else:
        own = specframe_side()
        vllm = vllm_side()
    return own + vllm_cells(vllm["results"]), vllm


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(SETS, data_dirs(args.data))
    with measured_run(args, own_threads(args.threads), process_tree=True) as run:  # vLLM's engine: processes
        return measure(args, run)


def measure(args: Any, run: Any) -> int:
    """Both sides' cells, the ratios, the table and the JSON, inside :func:`_frame.measured_run`."""
    use_shipped_checkpoints()
    import torch
    from specframe_smollm2.cache import target_dir

    from specframe.bench.provenance import git_revision
    from specframe.files import write_text
    from specframe.metrics.machine_info import machine_summary
    from specframe.pipeline import Pipeline

    sets = load_prompt_sets(data_dirs(args.data), n=args.per_set, split=args.split, names=SETS)
    items = [(name, item) for name, ps in sets.items() for item in ps.prompts]
    items = items[:SMOKE_PROMPTS] if args.smoke else items
    with bound_to(args.cpus):  # specframe computes on the CPUs vLLM's worker is bound to
        torch.set_num_threads(args.threads)
        with in_repository():
            plain = Pipeline.from_yaml(PLAIN[1])
            pipes = {PLAIN[0]: plain}
            for name in args.pipelines:
                path, overrides = SPECULATIVE[name]
                pipes[name] = Pipeline.from_yaml(path, overrides=overrides, target=plain.target)
        prompts = [plain.encode(item.text) for _, item in items]  # [1, P] each, chat template applied
        warm = warm_up_prompts(data_dirs(args.data))
        for name, pipe in pipes.items():  # tune prompts: first-call allocations, auto's cost profile and memory
            decoded(pipe.generate_batch(warm, min(4, args.max_new_tokens), batch_size=2), f"{name} tune warm-up")
        freeze = run.freeze_controllers(list(pipes.values()))
        run.set_plain_reference(plain, warm[0])
    inputs = {"prompts": [{"prompt_ids": p[0].tolist()} for p in prompts], "target": str(target_dir()),
              "drafter": str(args.drafter), "num_speculative_tokens": NUM_SPECULATIVE_TOKENS, "dtype": "float32",
              "max_new_tokens": args.max_new_tokens, "repeats": args.repeats}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    run.interleave(BLOCK_CONTENTS)
    run.open_block()
    cells: list[Cell] = []
    vllm: dict[str, Any] = {}
    for index, batch in enumerate(args.batch_sizes):
        for attempt in run.blocks():
            block, vllm = measure_block(args, pipes, prompts, inputs, batch, vllm_first=index % 2 == 1,
                                        restore=freeze.restore)
            if attempt.close():
                cells += block
    timed = next((c for c in cells if c.method == GENERATE), None)  # batch 1's generate(): the reference's outputs
    if timed is None:
        with bound_to(args.cpus):
            reference = reference_outputs(plain, prompts, args.max_new_tokens)
    else:
        reference = timed.outputs
    eos = set(plain.target.eos_token_ids or ())
    compare(cells, reference, args.max_new_tokens, eos)
    ratios = ratio_rows(cells, args.batch_sizes)
    machine = machine_summary()
    where = ",".join(map(str, args.cpus)) + (" (all of vLLM's processes)" if args.vllm_all_on_cpus else "")
    header = (f"CPU: {machine['cpu']} ({machine['cores']} CPUs); {args.threads} compute thread(s) per side on CPU(s) "
              f"{where}; float32, greedy; continuous batching (at most `batch` requests in "
              f"flight); {len(prompts)} {args.split}-split prompts, {args.max_new_tokens} new tokens; tokens/s "
              f"median of {args.repeats}; ratio = specframe / vLLM; * = other processes loaded the machine"
              + ("; SMOKE RUN: the figures mean nothing" if args.smoke else ""))
    text = render(cells, ratios, header)
    print(text)
    mismatched = [f"{c.method}@{c.batch}" for c in cells if c.identical < len(c.outputs)]
    if mismatched:
        print(f"warning: outputs differ from generate() in {', '.join(mismatched)} (see peer.json)", file=sys.stderr)
    report = {"schema": 3, "smoke": args.smoke, "machine": machine,
              "protocol": run.record(prompts_per_set=args.per_set), "threads": args.threads, "cpus": args.cpus,
              "batching": "continuous",
              "commit": git_revision(REPO), "versions": {"main": versions(), "vllm": vllm["versions"]},
              "vllm_env": vllm["env"], "vllm_all_on_cpus": args.vllm_all_on_cpus, "split": args.split,
              "sets": list(SETS),
              "prompts": [{"set": name, "question_id": item.question_id} for name, item in items],
              "max_new_tokens": args.max_new_tokens, "dtype": "float32", "repeats": args.repeats,
              "ratios": ratios, "all_identical_to_generate": not mismatched, "reference": reference,
              "cells": [c.to_dict() for c in cells]}
    write_text(args.out_dir / "peer.json", json.dumps(report, indent=1) + "\n", what="peer benchmark results")
    write_text(args.out_dir / "peer.md", text + "\n", what="peer benchmark table")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
