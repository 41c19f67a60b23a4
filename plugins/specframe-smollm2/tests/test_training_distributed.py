"""Data-parallel training: 2 gloo ranks on CPU follow the single-process loss curve (same global batch), write
once, and resume exactly."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from specframe_diffusion.checkpoint import load_checkpoint
from specframe_smollm2.testing import tiny_recipe
from specframe_smollm2.training.data_parallel import rank_rows
from specframe_smollm2.training.trainer import train

from specframe.distributed import DistContext
from specframe.errors import ConfigError
from specframe.tensor_files import load_tensor_file

HERE = Path(__file__).parent
STEPS = 30
#: Two ranks compute the same gradient as one process up to floating-point summation order.
TOLERANCE = 1e-4


def torchrun(*args: str, script: str = "dist_train_main.py") -> subprocess.CompletedProcess[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(port), str(HERE / script), *args]
    return subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=180)


def losses(root: Path) -> dict[int, float]:
    lines = [json.loads(line) for line in (root / "work-drafter" / "metrics.jsonl").read_text().splitlines()]
    steps = [m["step"] for m in lines if "loss" in m]
    assert len(steps) == len(set(steps)), "a step was logged twice (every rank writing?)"
    return {m["step"]: m["loss"] for m in lines if "loss" in m}


def weights(root: Path) -> dict[str, torch.Tensor]:
    return {k: v.float() for k, v in load_checkpoint(root / "out-drafter").groups()["backbone"].items()}


def test_two_gloo_ranks_follow_the_single_process_loss_curve(tmp_path: Path, tiny_target, tiny_data) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    train(tiny_recipe("drafter", one, tiny_data, steps=STEPS), target_dir=one, target_model=tiny_target,
          progress=False, log=lambda m: None)
    run = torchrun(str(two), str(tiny_data), str(STEPS), "15")  # interrupted after step 15 (state at 15)
    assert run.returncode == 0, run.stderr[-4000:]
    state = load_tensor_file(two / "work-drafter" / "state.pt")
    assert state["step"] == 15
    run = torchrun(str(two), str(tiny_data), str(STEPS))  # resumed by both ranks
    assert run.returncode == 0, run.stderr[-4000:]
    a, b = losses(one), losses(two)
    assert sorted(a) == sorted(b) == [10, 20, 30]  # written once (by rank 0), not once per rank
    for step in a:
        assert abs(a[step] - b[step]) <= TOLERANCE * max(1.0, abs(a[step])), (step, a[step], b[step])
    wa, wb = weights(one), weights(two)
    for name in wa:
        torch.testing.assert_close(wb[name], wa[name], rtol=TOLERANCE, atol=TOLERANCE)


def test_a_global_batch_that_does_not_split_over_the_ranks_is_refused() -> None:
    assert rank_rows(4, DistContext()) is None
    assert rank_rows(4, DistContext(rank=1, world_size=2)) == slice(2, 4)
    with pytest.raises(ConfigError, match="batch_seqs = 5 does not split evenly over 2 ranks"):
        rank_rows(5, DistContext(rank=0, world_size=2))


def test_slices_of_a_batch_sum_to_its_loss(tmp_path: Path, tiny_target, tiny_data) -> None:
    from specframe_smollm2.training.dataset import load_sequences, make_batch
    from specframe_smollm2.training.trainer import build_objective

    recipe = tiny_recipe("drafter", tmp_path, tiny_data)
    seqs = load_sequences(tiny_data)
    objective, _ = build_objective(recipe, tiny_target, seqs, torch.Generator().manual_seed(0))
    batch = make_batch(seqs[:4], 4, 4, torch.Generator().manual_seed(1))
    whole = objective.loss(batch, torch.Generator().manual_seed(2))
    parts = [objective.loss(batch, torch.Generator().manual_seed(2), rows=slice(i, i + 2)) for i in (0, 2)]
    torch.testing.assert_close(sum(parts), whole, rtol=1e-5, atol=1e-6)


def test_data_generation_is_shared_out_by_rank(tmp_path: Path, tiny_target) -> None:
    from specframe_hf.testing import tiny_tokenizer

    sys.path.insert(0, str(HERE))
    try:
        from dist_datagen_main import PROMPTS
    finally:
        sys.path.remove(str(HERE))
    from specframe_smollm2.training.generate_data import generate_dataset

    model_dir = tmp_path / "model"
    tiny_target.save_pretrained(model_dir)
    tiny_tokenizer([f"w{i}" for i in range(40)]).save_pretrained(model_dir)
    one, two = tmp_path / "one", tmp_path / "two"
    generate_dataset(model_dir, one, PROMPTS, {"test": 1}, batch_size=2, max_new_tokens=6, taps=(0, 1), topk=2,
                     progress=False, log=lambda m: None)
    run = torchrun(str(model_dir), str(two), script="dist_datagen_main.py")
    assert run.returncode == 0, run.stderr[-4000:]
    names = sorted(p.name for p in one.glob("shard-*.pt"))
    assert names == sorted(p.name for p in two.glob("shard-*.pt")) and len(names) == 3
    for name in names:
        a, b = load_tensor_file(one / name), load_tensor_file(two / name)
        assert a["index"] == b["index"]
        assert all(torch.equal(x, y) for x, y in zip(a["ids"], b["ids"], strict=True))
