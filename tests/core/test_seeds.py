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


def sampled_pipe(seed: int | None = None):  # type: ignore[no-untyped-def]
    """The exact toy target at T = 1 (walk verifier, a drafting tree), with the pipeline ``seed:`` given."""
    from specframe.pipeline import Pipeline
    from specframe.testing.toy import ToyTarget
    from tests.core.test_batch_decode import SAMPLED, sampled_host

    target = ToyTarget.random(vocab_size=7, seed=3)
    config = SAMPLED if seed is None else {**SAMPLED, "seed": seed}
    return Pipeline.from_dict(config, target=target, host=sampled_host(target))


def test_unseeded_samples_of_one_prompt_differ_and_each_records_its_seed() -> None:
    """`generate_batch([p] * n)` at T > 0 gives n independent samples (it gave n identical ones when every
    unseeded request took the pipeline's seed 0), and so do repeated calls."""
    pipe = sampled_pipe()
    assert pipe.config.seed is None
    results = pipe.generate_batch([[2, 5]] * 8, 12)
    seeds = [r.seed for r in results]
    assert all(isinstance(s, int) and 0 <= s <= MAX_SEED for s in seeds) and len(set(seeds)) == 8
    assert len({tuple(r.tokens) for r in results}) > 1
    again = [pipe.generate([2, 5], 12) for _ in range(4)]
    assert len({r.seed for r in again} | set(seeds)) == 12 and len({tuple(r.tokens) for r in again}) > 1


def test_replaying_a_recorded_seed_reproduces_the_sample_token_for_token() -> None:
    pipe = sampled_pipe()
    results = pipe.generate_batch([[2, 5], [6, 6, 0, 1], [2, 5]], 12, batch_size=2)
    for result, prompt in zip(results, [[2, 5], [6, 6, 0, 1], [2, 5]], strict=True):
        replay = pipe.generate(prompt, 12, seed=result.seed)
        assert replay.tokens == result.tokens and replay.seed == result.seed
        assert sampled_pipe().generate(prompt, 12, seed=result.seed).tokens == result.tokens  # another pipeline
    assert results[0].as_dict()["seed"] == results[0].seed


def test_a_pipeline_seed_derives_each_requests_seed_from_its_index() -> None:
    """With `seed:` set, request n (in the order the pipeline serves them) gets derive_seed(seed, n): the samples
    differ, and a new pipeline with the same seed replays the whole run."""
    from specframe.seeds import derive_seed

    first = sampled_pipe(seed=11)
    run = [r.seed for r in first.generate_batch([[2, 5]] * 3, 12)] + [first.generate([2, 5], 12).seed]
    assert run == [derive_seed(11, n) for n in range(4)] and len(set(run)) == 4
    second = sampled_pipe(seed=11)
    assert [r.tokens for r in second.generate_batch([[2, 5]] * 3, 12)] == \
        [r.tokens for r in sampled_pipe(seed=11).generate_batch([[2, 5]] * 3, 12)]
    own = second.generate([2, 5], 12, seed=5)
    assert own.seed == 5  # a request's own seed wins


def test_derived_seeds_are_in_range_distinct_and_stable() -> None:
    from specframe.seeds import derive_seed, fresh_seed

    seeds = {derive_seed(base, n) for base in (0, 1, MAX_SEED) for n in range(200)}
    assert len(seeds) == 600 and all(0 <= s <= MAX_SEED for s in seeds)
    assert derive_seed(0, "gsm8k", "7", 0) == derive_seed(0, "gsm8k", "7", 0) != derive_seed(0, "gsm8k", "7", 1)
    assert 0 <= fresh_seed() <= MAX_SEED and fresh_seed() != fresh_seed()


def test_bench_records_carry_each_turns_seed_shared_by_every_method(tmp_path: Path) -> None:
    """Every record names the seed that drew its sample (`request_seed`), derived from the base seed and the
    question: the method and the baseline share it, and `generate(ids, seed=request_seed)` replays the record."""
    import json

    import specframe_verifiers.plugin as verifiers_plugin

    from specframe.bench.conversation import encode_turn
    from specframe.pipeline import Pipeline

    pipeline = write_pipeline(tmp_path / "toy.yaml")
    pipeline.write_text(pipeline.read_text().replace("sampling: {temperature: 0}", "sampling: {temperature: 0.9}\n"
                                                                                    "verifier: {type: walk}"))
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"question_id": i, "category": "chat", "turns": [f"question {i}"]}) + "\n"
                            for i in range(3)))
    out = tmp_path / "r.jsonl"
    host = toy_host()
    host.register(verifiers_plugin, "verifiers")
    code = run_cli(["bench", str(pipeline), "--data-file", f"mt_bench={data}", "-d", "mt_bench:3",
                    "--max-new-tokens", "6", "--no-reference", "-o", str(out)], host=host)
    assert code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    by_method: dict[str, dict[int, dict]] = {}
    for r in records:
        by_method.setdefault(r["method"], {})[r["question_id"]] = r
    assert len(by_method) == 2  # the pipeline and the AR baseline
    seeds = [{q: r["request_seed"] for q, r in rows.items()} for rows in by_method.values()]
    assert seeds[0] == seeds[1] and len(set(seeds[0].values())) == 3
    assert all(r["seed"] == 0 for r in records)  # the base seed: the pipeline sets none
    pipe = Pipeline.from_yaml(pipeline, host=host)
    for question, record in by_method[pipe.config.name].items():
        ids = encode_turn(pipe, [f"question {question}"], [])
        assert pipe.generate(ids, 6, seed=record["request_seed"]).tokens == record["tokens"]


def test_a_target_or_stage_on_a_device_without_float64_is_refused_naming_it(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Apple's mps has no float64, which tree building, verification and sampling use on the stages' device: a
    pipeline whose target or stage sits there is refused when it is built, naming the component and the fix,
    instead of failing at the first float64 tensor of a round (greedy or sampled)."""
    from specframe.errors import ConfigError
    from specframe.pipeline import Pipeline, refuse_without_float64

    path = write_pipeline(tmp_path / "toy.yaml")
    pipe = Pipeline.from_yaml(path, host=toy_host())
    monkeypatch.setattr(type(pipe.target), "device", torch.device("mps"), raising=False)
    with pytest.raises(ConfigError, match="the target is on Apple's mps device") as refused:
        Pipeline.from_yaml(path, target=pipe.target, host=toy_host())
    assert "cpu or cuda" in str(refused.value.hint)
    monkeypatch.setattr(type(pipe.target), "device", torch.device("cpu"), raising=False)
    assert Pipeline.from_yaml(path, target=pipe.target, host=toy_host()).target is pipe.target
    for fine in (object(), torch.nn.Linear(1, 1), "cuda:0"):
        refuse_without_float64(fine, "x")
    with pytest.raises(ConfigError, match="the drafter is on Apple's mps"):
        refuse_without_float64(type("Stage", (), {"device": "mps"})(), "the drafter")
