"""Seeds: a defined range (0 to 2**63 - 1) refused outside it where seeds enter, and keys that never wrap one
seed onto another."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from specframe.cli import run_cli
from specframe.decode.request import RefusedRequest
from specframe.errors import GenerationError
from specframe.sampling.noise import ACCEPT, DRAFT, RESIDUAL, TARGET, RoundNoise
from specframe.seeds import MAX_SEED, check_seed
from tests.bench.toy_plugin import toy_host, write_pipeline


def draws(seed: int) -> list[list[float]]:
    """Four positions' uniforms of every stream of ``seed``."""
    noise = RoundNoise.for_rows([check_seed(seed)], [10], "cpu")
    depth = torch.arange(4)[None, :]
    return [noise.uniforms(stream, depth)[0].tolist() for stream in (DRAFT, ACCEPT, RESIDUAL, TARGET)]


def test_the_largest_seed_does_not_wrap_onto_seed_zero() -> None:
    assert draws(MAX_SEED) != draws(0)
    assert draws(MAX_SEED // 4) != draws(MAX_SEED // 4 + 1) != draws(0)
    assert draws(5) == draws(5) and draws(int(np.int64(5))) == draws(5)
    four = draws(7)
    assert len({tuple(x) for x in four}) == 4  # the streams of one seed are independent


def test_seeds_key_distinct_draws_across_the_range() -> None:
    seeds = [0, 1, 2, 3, 4, 5, MAX_SEED - 3, MAX_SEED - 2, MAX_SEED - 1, MAX_SEED, 2**62, 2**62 + 1, 2**61]
    first = {tuple(draws(s)[3]) for s in seeds}
    assert len(first) == len(seeds)


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**64 + 3, True, 1.5, "3"])
def test_seeds_outside_the_range_are_refused(seed: object) -> None:
    with pytest.raises(GenerationError, match="must be a whole number from 0 to 9223372036854775807"):
        check_seed(seed)


@pytest.mark.parametrize("args, message", [
    (["--seed", "-1"], "-1 is not in the range 0<=x<=9223372036854775807"),
    (["--seed", str(2**63)], "is not in the range"),
    (["--set", "seed=-5"], "seed: Input should be greater than or equal to 0"),
    (["--set", f"seed={2**63}"], "seed: Input should be less than or equal to 9223372036854775807"),
])
def test_seeds_entering_from_the_command_line_or_the_pipeline_are_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    pipeline = write_pipeline(tmp_path / "toy.yaml")
    code = run_cli(["run", str(pipeline), "--prompt", "hi", "--max-new-tokens", "3", *args], host=toy_host())
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and message in err and "Traceback" not in err


def test_a_request_seed_out_of_range_is_refused(tmp_path: Path) -> None:
    from specframe.pipeline import Pipeline

    pipe = Pipeline.from_yaml(write_pipeline(tmp_path / "toy.yaml"), host=toy_host())
    with pytest.raises(GenerationError, match="seed must be a whole number"):
        pipe.generate("hi", 3, seed=-3)
    outcomes = pipe.generate_batch(["hi", "ho"], 3, seed=2**63)
    assert all(isinstance(o, RefusedRequest) and "seed must be a whole number" in str(o) for o in outcomes)


def test_noise_for_a_device_without_float64_is_hashed_on_the_host() -> None:
    """Apple's mps has no float64: the uniforms are hashed on the host (the same numbers as on any device) and
    handed over in float32; other devices hash where they are."""
    import torch

    from specframe.sampling.noise import RoundNoise, hash_device

    assert hash_device("mps") == torch.device("cpu") and hash_device("cpu") == torch.device("cpu")
    assert hash_device("cuda:1") == torch.device("cuda:1")
    here = RoundNoise.for_rows([3, 4], [10, 20], "cpu")
    assert here.use_device is None
    depth = torch.tensor([[0, 1], [1, 2]])
    moved = RoundNoise(here.seeds, here.roots, use_device=torch.device("cpu"))  # what mps gets, on the host
    u64, u32 = here.uniforms(1, depth), moved.uniforms(1, depth)
    assert u64.dtype == torch.float64 and u32.dtype == torch.float32
    assert torch.equal(u32, u64.float())
