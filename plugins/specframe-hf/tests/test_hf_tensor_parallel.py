"""transformers' tensor-parallel plan under torchrun with gloo on CPU: 2 ranks, each holding half the heads, score
trees, compact the cache and decode greedily exactly like the whole model in one process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from specframe_hf.device_map import DeviceMap
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_rounds, tiny_causal_lm

from specframe.errors import ConfigError
from specframe.pipeline import Pipeline
from specframe.tensor_files import load_tensor_file

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from dist_tp_main import NGRAM, PROMPT  # noqa: E402

sys.path.remove(str(HERE))


def test_two_tensor_parallel_ranks_equal_one_process(tmp_path: Path) -> None:
    model_dir, out = tmp_path / "model", tmp_path / "out"
    out.mkdir()
    tiny_causal_lm("llama", seed=5, num_layers=2).save_pretrained(model_dir)  # 4 heads, 2 KV heads: 2 ranks
    whole = HFTarget.from_pretrained(str(model_dir), device="cpu")
    expected = random_rounds(whole, PROMPT, seed=3)
    whole.reset()
    tokens = Pipeline.from_dict(NGRAM, target=whole).generate(PROMPT, 16).tokens
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(port), str(HERE / "dist_tp_main.py"),
           str(model_dir), str(out)]
    run = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stderr[-4000:]
    for rank in range(2):
        got = load_tensor_file(out / f"rank-{rank}.pt")
        assert got["q_proj_local"] == (32, 64)  # each rank holds half the query heads
        assert got["tokens"] == tokens
        for ours, theirs in zip(got["logits"], expected, strict=True):
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


def test_tensor_parallel_without_torchrun_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    tiny_causal_lm("llama", seed=5, num_layers=2).save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="needs a torchrun launch with two or more ranks"):
        HFTarget.from_pretrained(str(tmp_path), device="cpu", placement=DeviceMap(tensor_parallel=True))
    with pytest.raises(ConfigError, match=r"cannot be combined with target\.device_map"):
        HFTarget.from_pretrained(str(tmp_path), placement=DeviceMap("auto", tensor_parallel=True))
