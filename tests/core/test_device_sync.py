"""Device correctness on CPU: streams on the target's device, synchronised stage clocks, counted host syncs."""

from __future__ import annotations

import pytest
import torch

import specframe.decode.loop as loop_module
import specframe.decode.rounds as rounds_module
from specframe import device_sync
from specframe.decode.rounds import RoundOutcome
from specframe.device_sync import HostSyncCounter, StageClock
from specframe.pipeline import Pipeline
from specframe.sampling import uniforms
from specframe.sampling.noise import RoundNoise
from specframe.testing.toy import ToyTarget
from specframe.tree import DraftTree
from specframe.types import VerifyResult

from .test_decode_loop import BASE, make_host, plain_greedy


def test_uniforms_are_drawn_on_the_generators_device_and_moved() -> None:
    gen = torch.Generator().manual_seed(5)
    before = gen.get_state().clone()
    u = uniforms((3,), gen, "meta")  # a stage on another device than the streams
    assert u.device.type == "meta" and u.dtype == torch.float64
    assert not torch.equal(gen.get_state(), before)  # the stream advanced: the draw happened on its device
    again = torch.Generator().manual_seed(5)
    assert torch.equal(uniforms((3,), again, "cpu"), torch.rand(3, generator=torch.Generator().manual_seed(5),
                                                                dtype=torch.float64))


def test_random_keys_live_on_the_targets_device(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    real = RoundNoise.for_rows

    def spy(seeds: list[int], roots: list[int], device: object) -> RoundNoise:
        seen.append(device)
        return real(seeds, roots, device)  # type: ignore[arg-type]

    for module in (loop_module, rounds_module):
        monkeypatch.setattr(module.RoundNoise, "for_rows", staticmethod(spy))
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.5))
    pipe.generate([1, 2], 5)
    pipe.generate_batch([[1, 2], [3, 4, 5]], 5)
    assert seen and set(seen) == {target.device}


def test_stage_clock_synchronises_accelerators_only_when_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[torch.device] = []
    monkeypatch.setitem(device_sync.SYNCHRONIZERS, "cuda", calls.append)
    StageClock((torch.device("cpu"), torch.device("cuda", 1)), sync=True)()
    assert calls == [torch.device("cuda", 1)]
    StageClock((torch.device("cuda", 1),), sync=False)()
    StageClock((torch.device("cpu"),), sync=True)()
    assert len(calls) == 1


@pytest.mark.parametrize("timing", [True, False])
def test_decode_loop_synchronises_every_stage_device_before_reading_the_clock(
        monkeypatch: pytest.MonkeyPatch, timing: bool) -> None:
    calls: list[torch.device] = []
    monkeypatch.setitem(device_sync.SYNCHRONIZERS, "cuda", calls.append)
    target = ToyTarget.random(vocab_size=7, seed=3)
    target.devices = (torch.device("cuda", 0),)  # type: ignore[attr-defined]  # a shard on an accelerator
    pipe = Pipeline.from_dict({**BASE, "metrics": {"stage_timing": timing}}, target=target,
                              host=make_host(target, 0.5))
    result = pipe.generate([1, 2], 12)
    assert result.tokens == plain_greedy(target, [1, 2], 12)
    # Seven readings per timed round (t0 .. t6), each waiting for the device; on an accelerator one round in
    # `StageClock.every` is timed, so the others never stall the launch queue.
    timed_rounds = len(range(0, result.num_rounds, StageClock((), sync=True).every))
    assert len(calls) == (7 * timed_rounds if timing else 0)


@pytest.mark.parametrize("timing", [True, False])
def test_batched_loop_synchronises_before_reading_the_clock_only_when_timing(
        monkeypatch: pytest.MonkeyPatch, timing: bool) -> None:
    calls: list[torch.device] = []
    monkeypatch.setitem(device_sync.SYNCHRONIZERS, "cuda", calls.append)
    target = ToyTarget.random(vocab_size=7, seed=3)
    target.devices = (torch.device("cuda", 0),)  # type: ignore[attr-defined]
    pipe = Pipeline.from_dict({**BASE, "metrics": {"stage_timing": timing}}, target=target,
                              host=make_host(target, 0.5))
    results = pipe.generate_batch([[1, 2], [3, 4, 5]], 8)
    assert [r.tokens for r in results] == [plain_greedy(target, [1, 2], 8), plain_greedy(target, [3, 4, 5], 8)]
    assert (len(calls) > 0) == timing


def test_a_rounds_outcome_reaches_the_host_in_one_transfer() -> None:
    tree = DraftTree.from_lists([3, 5, 6, 7, 4], [-1, 0, 1, 2, 1])
    result = VerifyResult(accepted_nodes=torch.tensor([[0, 1, 2, -1]]), num_accepted=torch.tensor([2]),
                          bonus_token=torch.tensor([9]))
    with HostSyncCounter() as counter:
        outcome = RoundOutcome.read(tree, result)
    assert counter.total == 1, counter.by_op
    assert outcome.emitted == result.emitted_tokens(tree.tokens)
    assert (outcome.nodes, outcome.depths, outcome.accepted) == ([int(tree.num_nodes[0]) - 1], [tree.max_depth], [2])


@pytest.mark.parametrize("seed", range(6))
def test_ancestor_mask_is_the_parent_closure_without_reading_the_device(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    n = int(torch.randint(1, 20, (1,), generator=gen))
    parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
    row = DraftTree.from_lists(list(range(n)), parents)
    tree = DraftTree.stack([row, DraftTree.from_lists([7, 8], [-1, 0])])  # a padded second row
    with HostSyncCounter() as counter:
        mask = tree.ancestor_mask()  # [2, N, N]
    assert counter.total == 0
    for b, ps in enumerate((parents, [-1, 0])):
        for i in range(tree.capacity):
            expected = set()
            j = i if i < len(ps) else -1
            while j >= 0:
                expected.add(j)
                j = ps[j]
            assert set(mask[b, i].nonzero().flatten().tolist()) == expected


def test_host_sync_counter_counts_reads_and_data_dependent_shapes() -> None:
    t = torch.tensor([1, 0, 3])
    with HostSyncCounter() as counter:
        t[0].item()
        t.tolist()
        bool(t[1])
        int(t[2])
        t[t > 0]
        t.nonzero()
        t.cpu()
        t + 1  # not a synchronisation
    assert counter.total == 7
    assert counter.by_op["__getitem__"] == 1 and counter.by_op["nonzero"] == 1


@pytest.mark.parametrize("batch_size", [1, 2])
def test_a_tree_drafted_on_another_device_moves_to_the_targets_once(monkeypatch: pytest.MonkeyPatch,
                                                                    batch_size: int) -> None:
    """The target reports device ``cpu:0`` while the drafter builds its trees on ``cpu`` (distinct devices to
    torch, and both able to compute here): every drafted round moves its tree once, alone and in a batch."""
    moves: list[torch.device] = []
    real = DraftTree.to

    def spy(tree: DraftTree, device: str | torch.device) -> DraftTree:
        moves.append(torch.device(device))
        return real(tree, device)

    monkeypatch.setattr(DraftTree, "to", spy)
    target = ToyTarget.random(vocab_size=7, seed=3)
    target.device = torch.device("cpu", 0)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.5))
    results = pipe.generate_batch([[1, 2], [3, 4, 5]], 8, batch_size=batch_size)
    assert [r.tokens for r in results] == [plain_greedy(target, [1, 2], 8), plain_greedy(target, [3, 4, 5], 8)]
    rounds = sum(r.num_rounds for r in results) if batch_size == 1 else max(r.num_rounds for r in results)
    assert moves.count(torch.device("cpu", 0)) == rounds
