"""Data-parallel `specframe bench` under torchrun: 2 gloo ranks on CPU equal one process; resume; refusals."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from specframe.bench.results import ResultsFileError, read_results, record_key
from specframe.bench.shards import (
    ShardManifest,
    check_manifest,
    merge_shards,
    shard_dir,
    shard_path,
)
from specframe.cli import run_cli

from .toy_plugin import toy_host, write_pipeline

ROOT = Path(__file__).parents[2]
#: Timing-free report columns (everything a record's tokens and rounds decide).
SAME_COLUMNS = ("method", "dataset", "responses", "rounds", "new_tokens", "tau_per_response", "tau_pooled",
                "nodes_per_round", "identical", "identical_of")


def bench_args(folder: Path, output: Path, *extra: str) -> list[str]:
    """Three single-turn GSM8K-style questions and two two-turn MT-Bench-style ones (tiny files written here)."""
    pipeline = write_pipeline(folder / "toy.yaml", extra="sweep: {drafter.depth: [1, 3]}\n")
    gsm8k, mt_bench = folder / "gsm8k.jsonl", folder / "mt_bench.jsonl"
    gsm8k.write_text("".join(json.dumps({"question": f"How many eggs are {n} and {n + 3}?", "answer": "#### 1"}) + "\n"
                             for n in range(3)))
    mt_bench.write_text("".join(json.dumps({"question_id": 81 + i, "category": "writing",
                                            "turns": [f"Write about place {i}.", "Now shorter."]}) + "\n"
                                for i in range(2)))
    return ["bench", str(pipeline), "-d", "gsm8k:3", "-d", "mt_bench:2", "--data-file", f"gsm8k={gsm8k}",
            "--data-file", f"mt_bench={mt_bench}", "-o", str(output), "--no-progress", "--warmup", "0", *extra]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(args: list[str], nproc: int = 2) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           str(ROOT / "tests/bench/dist_bench_main.py"), *args]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def outcome(records: list[dict]) -> list[tuple]:
    return [(record_key(r), r["tokens"], r["accepted"], r["tree_nodes"], r["choices"][0]["turns"]) for r in records]


def report_rows(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert run_cli(["report", str(path), "--json", "--bootstrap", "100"], host=toy_host()) == 0
    rows = json.loads(capsys.readouterr().out)
    return [{k: row[k] for k in SAME_COLUMNS} for row in rows]


def test_two_gloo_ranks_equal_one_process_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    single, merged = tmp_path / "single.jsonl", tmp_path / "merged.jsonl"
    assert run_cli(bench_args(tmp_path, single), host=toy_host()) == 0
    capsys.readouterr()
    run = torchrun(bench_args(tmp_path, merged))
    assert run.returncode == 0, run.stderr[-8000:]
    assert "merged 21 records from 2 shards" in run.stderr
    # Same records in the same order (timings aside), so the report's timing-free columns are identical.
    assert outcome(read_results(merged)) == outcome(read_results(single))
    assert report_rows(merged, capsys) == report_rows(single, capsys)
    shards = [read_results(shard_path(shard_dir(merged), r, 2)) for r in range(2)]
    questions = [{(x["dataset"], x["question_id"]) for x in s} for s in shards]
    assert all(questions) and not questions[0] & questions[1]  # each rank ran its own questions
    # A rerun resumes every shard (nothing decoded) and leaves the merged file as it was.
    before = merged.read_bytes()
    again = torchrun(bench_args(tmp_path, merged))
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("0 turns to run") == 2 and "merged 0 records" in again.stderr
    assert merged.read_bytes() == before
    # Resuming the shards with other settings is refused with the reason, on every rank.
    other = torchrun(bench_args(tmp_path, merged, "--max-new-tokens", "8"))
    text = " ".join(other.stderr.split())  # rich wraps lines
    assert other.returncode != 0 and "with max_new_tokens = 12, but this run has max_new_tokens = 8" in text
    # A one-screen error (status 2; torchrun may stop the other rank first), no traceback from specframe's code.
    assert "exitcode : 2" in text and "specframe/cli" not in text
    # A merge with a prompt missing from a shard (a rank that died) is refused, naming the prompt.
    cut = shard_path(shard_dir(merged), 1, 2)
    records = read_results(cut)
    cut.write_text("".join(json.dumps(r) + "\n" for r in records[:-1]))
    merged.unlink()
    keys = [record_key(r) for r in read_results(single)]
    with pytest.raises(ResultsFileError, match=f"{records[-1]['dataset']}/{records[-1]['question_id']}"):
        merge_shards(merged, shard_dir(merged), 2, keys)
    assert not read_results(merged)  # nothing half-merged
    for r, shard in enumerate(shards):
        if r == 0:
            assert read_results(shard_path(shard_dir(merged), 0, 2)) == shard  # the other shard is intact


def test_a_shard_directory_of_another_launch_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "out.jsonl.shards"
    selection = (("gsm8k", "1"), ("gsm8k", "2"), ("mt_bench", "81"))
    check_manifest(directory, ShardManifest(2, selection), write=True)
    check_manifest(directory, ShardManifest(2, selection), write=False)  # the same launch continues
    with pytest.raises(ResultsFileError, match="world size 2, but this run has 3 ranks"):
        check_manifest(directory, ShardManifest(3, selection), write=True)
    with pytest.raises(ResultsFileError, match="not selected now: mt_bench/81"):
        check_manifest(directory, ShardManifest(2, selection[:2]), write=True)
    with pytest.raises(ResultsFileError, match="new now: gsm8k/3"):
        check_manifest(directory, ShardManifest(2, (*selection, ("gsm8k", "3"))), write=True)
    (directory / "rank-00000-of-00004.jsonl").write_text("")
    with pytest.raises(ResultsFileError, match="shards of another world size: rank-00000-of-00004"):
        check_manifest(directory, ShardManifest(2, selection), write=False)


def test_batched_bench_under_two_ranks_equals_one_process(tmp_path: Path) -> None:
    single, merged = tmp_path / "single.jsonl", tmp_path / "merged.jsonl"
    assert run_cli(bench_args(tmp_path, single, "--batch-size", "2"), host=toy_host()) == 0
    run = torchrun(bench_args(tmp_path, merged, "--batch-size", "2"))
    assert run.returncode == 0, run.stderr[-8000:]
    assert outcome(read_results(merged)) == outcome(read_results(single))  # same records, same order


LAUNCH = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SPECFRAME_RENDEZVOUS_TIMEOUT")


@pytest.mark.parametrize("env, message", [
    ({"WORLD_SIZE": "2", "RANK": "1"}, "WORLD_SIZE=2 is set but LOCAL_RANK, MASTER_ADDR, MASTER_PORT are not"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1"}, "LOCAL_RANK, MASTER_PORT are not"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "99999"},
     "MASTER_PORT=99999 is not a TCP port"),
    ({"WORLD_SIZE": "2.9"}, "WORLD_SIZE='2.9' is not a whole number"),
    ({"WORLD_SIZE": "1", "RANK": "3"}, "RANK=3 does not fit WORLD_SIZE=1"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "2950",
      "SPECFRAME_RENDEZVOUS_TIMEOUT": "soon"}, "SPECFRAME_RENDEZVOUS_TIMEOUT='soon' is not a number of seconds"),
])
def test_a_launch_environment_torchrun_did_not_set_is_a_one_screen_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, env: dict,
        message: str) -> None:
    for name in LAUNCH:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert run_cli(bench_args(tmp_path, tmp_path / "out.jsonl"), host=toy_host()) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message in err and "hint:" in err and "Traceback" not in err and "gsm8k" not in err  # before loading


def test_a_rank_waiting_for_missing_peers_gives_up_with_a_message(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH}
    env.update(WORLD_SIZE="2", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               SPECFRAME_RENDEZVOUS_TIMEOUT="4", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    script = ("import sys, specframe.distributed as d\n"
              "d.WAIT_NOTICE_S = 0.5\n"
              "try:\n    d.from_env(backend='gloo')\n"
              "except d.DistributedError as exc:\n    print(exc.render(), file=sys.stderr); sys.exit(2)\n")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    err = " ".join(done.stderr.split())
    assert done.returncode == 2 and "Traceback" not in err
    assert "rank 0 of 2 is waiting for the other 1 rank(s) at 127.0.0.1:" in err  # said while waiting
    assert "could not join the other ranks" in err and "within 4 s" in err and "SPECFRAME_RENDEZVOUS_TIMEOUT" in err


@pytest.mark.parametrize("text, message", [
    ('{"world_size": 1e400, "selection": []}', "the number 1e400 is too large"),
    ('{"world_size": 2.9, "selection": []}', "world_size is 2.9, not a whole number of ranks"),
    ('{"world_size": true, "selection": []}', "world_size is True"),
    ('{"world_size": "2", "selection": []}', "world_size is '2'"),
    ('{"world_size": 100000000000000000000, "selection": []}', "world_size is 100000000000000000000"),
    ('{"world_size": 2, "selection": [["gsm8k", 1]]}', "selection[0] is ['gsm8k', 1]"),
    ('{"world_size": 2, "selection": {"a": 1}}', "selection is dict"),
    ('[2]', "it holds a JSON list"),
])
def test_a_manifest_with_numbers_that_are_not_rank_counts_is_named(tmp_path: Path, text: str, message: str) -> None:
    directory = tmp_path / "out.jsonl.shards"
    directory.mkdir()
    (directory / "manifest.json").write_text(text)
    with pytest.raises(ResultsFileError) as info:
        check_manifest(directory, ShardManifest(2, ()), write=False)
    assert message in info.value.render() and "manifest.json" in info.value.render()
