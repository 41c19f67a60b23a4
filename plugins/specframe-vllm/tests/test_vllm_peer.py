"""The vLLM peer benchmark (benchmarks/vllm_peer.py): its arguments, its specframe side, its comparison with
``generate()`` and its ratio table, and the vLLM side's load readings; in the main environment.

The full run (both sides) needs the vLLM environment and the converted SmolLM2: ``test_smoke_run_with_vllm``
runs the script's ``--smoke`` when both are there (``$SPECFRAME_VLLM_PYTHON``, else the repository's
``.venv-vllm``; an exported drafter from ``$SPECFRAME_VLLM_DRAFTER``, else ``runs/vllm-check/drafter``) and skips
otherwise; ``make vllm-check`` runs the same smoke on every CI run.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from specframe_vllm import bench_vllm

PLUGIN = Path(__file__).resolve().parents[1]
REPO = PLUGIN.parents[1]
SCRIPT = PLUGIN / "benchmarks" / "vllm_peer.py"


def load_script() -> Any:
    spec = importlib.util.spec_from_file_location("vllm_peer", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script loads
    spec.loader.exec_module(module)
    return module


peer = load_script()


@pytest.fixture
def fake_vllm(tmp_path: Path) -> Path:
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    return python


def args_of(tmp_path: Path, python: Path, *extra: str) -> list[str]:
    return ["--drafter", str(tmp_path), "--vllm-python", str(python), "--out-dir", str(tmp_path / "out"), *extra]


# --------------------------------------------------------------------------------------------- arguments
def test_defaults_are_the_issue_cells_on_the_tune_split(tmp_path: Path, fake_vllm: Path) -> None:
    args = peer.parse_args(args_of(tmp_path, fake_vllm))
    assert args.batch_sizes == [1, 4, 8] and args.split == "tune" and args.threads == 1
    assert args.cpus == sorted(os.sched_getaffinity(0))[-1:]  # one thread, on the last usable CPU
    assert args.vllm_python == fake_vllm  # not resolved out of its environment
    smoke = peer.parse_args([*args_of(tmp_path, fake_vllm), "--smoke", "--split", "report"])
    # a smoke run is no measurement: it never reads the held-out prompts (benchmarks/_frame.py add_split)
    assert (smoke.batch_sizes, smoke.max_new_tokens, smoke.repeats, smoke.split) == ([2], 8, 1, "tune")


@pytest.mark.parametrize(("extra", "named"), [
    (["--batch-sizes", "1,0"], "--batch-sizes"),
    (["--split", "test"], "--split"),
    (["--pipelines", "medusa"], "--pipelines"),
    (["--threads", "2", "--cpus", "0"], "--cpus: give 2 distinct"),
    (["--cpus", "99999"], "--cpus: CPU(s) 99999 are not among"),
    (["--threads", "99999"], "--threads: 99999 threads"),
    (["--wait-quiet", "-1"], "--wait-quiet"),
    (["--split", "report", "--per-set", "10"], "--split: report (a published run) needs at least 20"),
])
def test_bad_arguments_are_refused_naming_the_flag(tmp_path: Path, fake_vllm: Path, extra: list[str], named: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        peer.parse_args(args_of(tmp_path, fake_vllm, *extra))
    assert exc.value.code == 2 and named in capsys.readouterr().err


def test_missing_inputs_are_refused_with_the_fix(tmp_path: Path, fake_vllm: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        peer.parse_args(["--vllm-python", str(fake_vllm), "--out-dir", str(tmp_path / "out")])
    assert "--drafter is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        peer.parse_args(args_of(tmp_path, tmp_path / "no-venv" / "python"))
    assert "make vllm-setup" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        peer.parse_args(["--drafter", str(tmp_path / "none"), "--vllm-python", str(fake_vllm)])
    assert "--drafter" in capsys.readouterr().err


FAKE_VLLM = """
import json, os, sys, time
if "--fail" in os.environ.get("FAKE_VLLM", ""):
    sys.exit(3)
out = sys.argv[sys.argv.index("--out") + 1]
env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "VLLM_CPU_OMP_THREADS_BIND", "PYTHONPATH")}
json.dump({"results": [], "versions": {}, "env": env, "cpus": sorted(os.sched_getaffinity(0)),
           "argv": sys.argv[1:], "inputs": json.load(open(sys.argv[3])), "started": time.time()}, open(out, "w"))
"""


def fake_vllm_python(tmp_path: Path) -> Path:
    """A "python" that answers the vLLM side's command line with :data:`FAKE_VLLM`'s JSON (no engine runs)."""
    fake = tmp_path / "python"
    fake.write_text(f"#!{sys.executable}\n{FAKE_VLLM}")
    fake.chmod(0o755)
    return fake


def test_the_vllm_side_runs_bound_to_the_same_cpus_from_this_checkout(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_vllm_python(tmp_path)
    usable = sorted(os.sched_getaffinity(0))
    cpu = usable[-1]
    loose = peer.run_vllm(tmp_path, {"prompts": []}, fake, [cpu])
    assert loose["argv"][:2] == ["-m", "specframe_vllm.bench_vllm"] and loose["cpus"] == usable
    assert loose["env"]["VLLM_CPU_OMP_THREADS_BIND"] == str(cpu) and loose["env"]["OMP_NUM_THREADS"] == "1"
    assert loose["env"]["PYTHONPATH"].split(os.pathsep)[0] == str(PLUGIN)
    strict = peer.run_vllm(tmp_path, {"prompts": []}, fake, [cpu], everything_on_cpus=True)
    assert strict["cpus"] == [cpu] and sorted(os.sched_getaffinity(0)) == usable  # the driver's CPUs restored
    monkeypatch.setenv("FAKE_VLLM", "--fail")
    from specframe.errors import GenerationError

    with pytest.raises(GenerationError, match="exited with status 3"):
        peer.run_vllm(tmp_path, {"prompts": []}, fake, [cpu])
    assert sorted(os.sched_getaffinity(0)) == usable


# --------------------------------------------------------------------------------------------- losslessness
def test_an_output_matches_generate_only_as_a_prefix_cut_by_the_limit_or_eos() -> None:
    ref, eos = [5, 9, 2, 7], {2}
    assert peer.matches_reference([5, 9, 2, 7], ref, 4, eos)
    assert peer.matches_reference([5, 9, 2], ref, 4, eos)  # EOS emitted, then stopped
    assert peer.matches_reference([5, 9], ref, 4, eos)  # stopped at EOS, EOS left out
    assert not peer.matches_reference([5], ref, 4, eos)  # stopped early for no reason
    assert not peer.matches_reference([5, 9, 3], ref, 4, eos)  # a different token
    assert not peer.matches_reference([5, 9, 2, 8], ref, 4, eos)


# --------------------------------------------------------------------------------------------- the specframe side
@pytest.fixture(scope="module")
def tiny_pipes() -> dict[str, Any]:
    from specframe_hf.target import HFTarget
    from specframe_hf.testing import tiny_causal_lm

    from specframe.pipeline import Pipeline

    model = tiny_causal_lm("llama", seed=5)
    model.generation_config.eos_token_id = None  # random weights: decode to the limit
    model.config.eos_token_id = None
    target = HFTarget.from_model(model)
    target.eos_token_ids = ()
    base = {"tree_builder": {"type": "chain"}, "pruner": {"type": "none"}, "sampling": {"temperature": 0.0}}
    return {"specframe-plain": Pipeline.from_dict({**base, "drafter": {"type": "none"}, "budget": 1},
                                                  target=target),
            "specframe-ngram": Pipeline.from_dict({**base, "drafter": {"type": "ngram", "num_speculative_tokens": 4},
                                                   "budget": 4}, target=target)}


def test_specframe_side_decodes_continuously_and_equals_generate(tiny_pipes: dict[str, Any]) -> None:
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(6, 500, (1, n), generator=gen) for n in (5, 9, 7)]  # [1, P] each
    plain = tiny_pipes["specframe-plain"]
    cells = [peer.time_specframe(name, pipe, prompts, 2, 12, 2) for name, pipe in tiny_pipes.items()]
    reference = peer.reference_outputs(plain, prompts, 12)
    peer.compare(cells, reference, 12, set())
    for cell in cells:
        assert cell.identical == 3 and cell.repeats_agree and len(cell.runs) == 2
        assert all(r["tokens"] == 36 and r["seconds"] > 0 and "contended" in r["load"] for r in cell.runs)
    assert cells[1].tau is not None and cells[0].tau is None
    broken = [[*ref[:-1], (ref[-1] + 1) % 500] for ref in reference]  # generate() disagreeing on a last token
    peer.compare(cells, broken, 12, set())
    assert [c.identical for c in cells] == [0, 0]


class LearningPipeline:
    """A pipeline whose ``budget: auto`` controller counts the prompts it has decoded, as its request memory
    remembers them; ``seen`` notes the count each decode starts from."""

    def __init__(self, pipe: Any) -> None:
        from types import SimpleNamespace

        self.pipe = pipe
        self.seen: list[int] = []
        self.auto_budget = SimpleNamespace(prompts_seen=0, memory_file=None)

    def generate_batch(self, prompts: list[Any], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(self.auto_budget.prompts_seen)
        self.auto_budget.prompts_seen += len(prompts)
        return self.pipe.generate_batch(prompts, *args, **kwargs)


@pytest.mark.parametrize("frozen", [True, False])
def test_every_timed_pass_starts_from_the_controllers_tune_state(tiny_pipes: dict[str, Any], frozen: bool) -> None:
    """With the run's freeze, the cell's warm-up and each timed pass start from what the controller learnt on the
    tune prompts; without it (the control) the memory has seen the measured prompts before the second pass."""
    from specframe.bench.learned_state import ControllerFreeze

    gen = torch.Generator().manual_seed(6)
    prompts = [torch.randint(6, 500, (1, n), generator=gen) for n in (5, 7, 6)]  # [1, P] each
    learning = LearningPipeline(tiny_pipes["specframe-ngram"])
    learning.generate_batch(prompts[:2], 2, batch_size=2)  # stands in for the tune warm-up: 2 prompts learnt
    freeze = ControllerFreeze([learning])
    cell = peer.time_specframe("learning", learning, prompts, 2, 6, 2, freeze.restore if frozen else None)
    assert cell.repeats_agree and len(cell.runs) == 2
    after_tune = learning.seen[1:]  # the cell's warm-up, then its two timed passes
    assert (after_tune == [2, 2, 2]) == frozen
    assert freeze.restored == (3 if frozen else 0) and freeze.record()["memory"] == "frozen"


class NotedPipeline:
    """A pipeline that notes, in ``log``, when it decodes a batch."""

    def __init__(self, pipe: Any, log: list[float]) -> None:
        self.pipe, self.log = pipe, log

    def generate_batch(self, *args: Any, **kwargs: Any) -> Any:
        self.log.append(time.time())
        return self.pipe.generate_batch(*args, **kwargs)


@pytest.mark.parametrize("vllm_first", [False, True])
def test_a_block_decodes_one_batch_size_on_both_sides_in_the_order_given(tmp_path: Path, tiny_pipes: dict[str, Any],
                                                                        vllm_first: bool) -> None:
    """One block of the interleaved run: specframe's cells and the vLLM side's, at one batch size, one side after
    the other in the order the block's turn gives (:func:`measure_block`)."""
    from types import SimpleNamespace

    args = SimpleNamespace(cpus=sorted(os.sched_getaffinity(0))[-1:], max_new_tokens=6, repeats=1, out_dir=tmp_path,
                           vllm_python=fake_vllm_python(tmp_path), vllm_all_on_cpus=False)
    gen = torch.Generator().manual_seed(4)
    prompts = [torch.randint(6, 500, (1, n), generator=gen) for n in (5, 8, 6)]  # [1, P] each
    log: list[float] = []
    pipes = {name: NotedPipeline(pipe, log) for name, pipe in tiny_pipes.items()}
    cells, vllm = peer.measure_block(args, pipes, prompts, {"prompts": [], "repeats": 1}, 2, vllm_first=vllm_first)
    assert [(c.method, c.batch) for c in cells] == [(name, 2) for name in tiny_pipes]
    assert vllm["inputs"] == {"prompts": [], "repeats": 1, "batch_sizes": [2]}  # the block's one batch size
    assert len(log) == 2 * len(tiny_pipes)  # a warm-up and a timed pass per pipeline
    assert (vllm["started"] < min(log) if vllm_first else vllm["started"] > max(log))


def test_the_batch_1_block_times_generate_as_the_kernel_gains_reference(tmp_path: Path,
                                                                       tiny_pipes: dict[str, Any]) -> None:
    """At batch 1 the block also times transformers' generate(), one request at a time: its outputs are the
    losslessness reference, and the ratio rows quote the plain loop against it."""
    from types import SimpleNamespace

    args = SimpleNamespace(cpus=sorted(os.sched_getaffinity(0))[-1:], max_new_tokens=6, repeats=1, out_dir=tmp_path,
                           vllm_python=fake_vllm_python(tmp_path), vllm_all_on_cpus=False)
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(6, 500, (1, n), generator=gen) for n in (5, 7)]  # [1, P] each
    cells, _ = peer.measure_block(args, tiny_pipes, prompts, {"prompts": []}, 1, vllm_first=False)
    assert [c.method for c in cells] == [*tiny_pipes, peer.GENERATE]
    generate = cells[-1]
    assert generate.outputs == peer.reference_outputs(tiny_pipes["specframe-plain"], prompts, 6)
    assert generate.runs[0]["tokens"] == 12 and not generate.speculative
    (row,) = peer.ratio_rows(cells, [1])
    assert row["plain_vs_generate"] == pytest.approx(cells[0].median / generate.median)


# --------------------------------------------------------------------------------------------- the table
def cell(method: str, batch: int, rate: float, outputs: int = 2, identical: int = 2, busy: bool = False,
         tau: float | None = None) -> Any:
    run = {"tokens": rate * 2, "seconds": 2.0, "tau": tau, "cpu_per_s": 1.0, "load": {"contended": busy}}
    c = peer.Cell(method, batch, [run], [[1]] * outputs)
    c.identical = identical
    return c


def test_ratios_are_specframe_over_vllm_per_batch_with_the_best_speculative_pipeline() -> None:
    cells = [cell("specframe-plain", 1, 10), cell("specframe-dflash-chain", 1, 18, tau=1.8),
             cell("specframe-dartree-auto", 1, 20, tau=2.9), cell(peer.GENERATE, 1, 8),
             cell("vllm-plain", 1, 12), cell("vllm-dflash", 1, 16, identical=1, tau=1.8),
             cell("specframe-plain", 4, 30, busy=True), cell("specframe-dflash-chain", 4, 24, tau=1.8),
             cell("specframe-dartree-auto", 4, 28), cell("vllm-plain", 4, 40), cell("vllm-dflash", 4, 20, tau=1.8)]
    one, four = peer.ratio_rows(cells, [1, 4])
    assert one["plain"] == pytest.approx(10 / 12) and one["speculative"] == pytest.approx(20 / 16)
    assert one["specframe_speculative"] == "specframe-dartree-auto" and one["best"] == pytest.approx(20 / 16)
    assert (one["identical"], one["compared"]) == (9, 10)  # generate() is the reference: not counted against itself
    assert one["plain_vs_generate"] == pytest.approx(10 / 8) and four["plain_vs_generate"] is None
    assert four["speculative"] == pytest.approx(28 / 20) and four["best"] == pytest.approx(30 / 40)
    text = peer.render(cells, [one, four], "header")
    assert "| 1 | 10.0 | 12.0 | 0.83× | 20.0 (dartree-auto) | 16.0 | 1.25× | 1.25× | 9/10 |" in text
    assert "the kernel gain, quoted apart from the engines' ratios): 1.25× at batch 1." in text
    assert "| transformers-generate | 1 | 8.0 |" in text
    assert "| 4 | 30.0* | 40.0 | 0.75× | 28.0 (dartree-auto, drafted no round) | 20.0 | 1.40× |" in text
    # a contended cell is marked, and auto's cell at batch 4, which never drafted, says so


# --------------------------------------------------------------------------------------------- the vLLM side's readings
def test_proc_stat_lines_parse_with_odd_command_names() -> None:
    line = "42 (vllm (core) 1) S 7 42 42 0 -1 4194304 100 0 0 0 250 30 0 0 20 0 3 0 1 1 1"
    assert bench_vllm.parse_proc_stat(line) == (42, 7, 280)
    stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n"
    assert bench_vllm.busy_cpu_seconds(stat, 100.0) == pytest.approx((100 + 5 + 50 + 3 + 2 + 1) / 100)


def test_the_process_tree_cpu_includes_children() -> None:
    """vLLM computes in child processes: their CPU time must count as the vLLM side's."""
    before, own_before = bench_vllm.tree_cpu_seconds(os.getpid()), time.process_time()
    if before is None:
        pytest.skip("no /proc")
    burn = ("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
            "print('burnt', flush=True)\nsys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "burnt"
        after, own_after = bench_vllm.tree_cpu_seconds(os.getpid()), time.process_time()
        assert after is not None and (after - before) - (own_after - own_before) >= 0.55
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


# --------------------------------------------------------------------------------------------- both sides
def vllm_python() -> Path | None:
    path = Path(os.environ.get("SPECFRAME_VLLM_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))
    return path if path.is_file() else None


@pytest.mark.real_model
def test_smoke_run_with_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from specframe_smollm2.cache import target_dir
    from specframe_smollm2.testing import private_cache

    python = vllm_python()
    drafter = Path(os.environ.get("SPECFRAME_VLLM_DRAFTER", REPO / "runs" / "vllm-check" / "drafter"))
    if python is None or not (drafter / "config.json").is_file():
        pytest.skip("no vLLM environment or exported drafter (`make vllm-check` builds both)")
    if not (target_dir() / "manifest.json").is_file():
        pytest.skip("no converted SmolLM2 (run `specframe setup-target`)")
    private_cache(tmp_path / "cache", monkeypatch)
    assert peer.main(["--smoke", "--drafter", str(drafter), "--vllm-python", str(python),
                      "--out-dir", str(tmp_path / "peer")]) == 0
    report = json.loads((tmp_path / "peer" / "peer.json").read_text())
    methods = {c["method"] for c in report["cells"]}
    assert {"specframe-plain", "vllm-plain", "vllm-dflash"} <= methods and report["batching"] == "continuous"
    assert report["all_identical_to_generate"] and report["ratios"][0]["plain"] > 0
    # interleaved: the one batch size is one block, both engines inside it, timed around by the reference workload
    quiet = report["protocol"]["quiet"]
    assert "vLLM" in quiet["pairing"] and len(quiet["blocks"]) == 1 and quiet["measure"] == "process-tree"
    assert {c["batch"] for c in report["cells"]} == {2}
    # DARTree `auto` learnt on tune prompts only; every timed pass started from that frozen state
    assert report["protocol"]["controller"]["memory"] == "frozen" and report["protocol"]["controller"]["restores"] > 0
