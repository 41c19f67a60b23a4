"""The decode round as an engine: one host read per round, no cache or token-buffer reallocation across rounds.

A tiny two-way Llama target (drafts are accepted, so commits move cache entries) with random DFlash drafters, run
through the real loop at batch 1 and 4 for each verifier: greedy (chain), WALK at T = 0.7 (DARTree pruned, the
identity corrector), chain rejection (sampled chain) and tree rejection (sampled tree). Every round is wrapped to
count host synchronisations (`specframe.device_sync.HostSyncCounter`) and to record the target's slot cache and
every row's token buffer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from specframe_diffusion.testing import random_checkpoint
from specframe_hf import HFTarget
from specframe_hf.slot_rows import SlotRows
from specframe_hf.testing import tiny_causal_lm, two_way_lm

import specframe.decode.loop as loop
from specframe.device_sync import HostSyncCounter
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost
from specframe.testing.counters import RoundCounters

PLUGINS = ["diffusion", "hf", "trees", "verifiers"]
#: Host-to-device copies the target makes per round whatever its rows: the forward's slots, lengths and block
#: tables in one, the selective-batching index, the commit's moves.
TARGET_COPIES_PER_ROUND = 3
T07 = {"temperature": 0.7}
SHAPES: dict[str, dict[str, Any]] = {
    "greedy-chain": {"budget": 7, "tree_builder": {"type": "chain"}, "verifier": {"type": "greedy"}},
    "walk-dartree": {"budget": 8, "sampling": T07, "tree_builder": {"type": "dartree", "width": 3},
                     "pruner": {"type": "deferred_topb"}, "verifier": {"type": "walk"}},
    "chain-rejection": {"budget": 6, "sampling": T07, "tree_builder": {"type": "sampled_chain"},
                        "verifier": {"type": "chain_rejection"}},
    "tree-rejection": {"budget": 8, "sampling": T07, "tree_builder": {"type": "sampled_tree", "branching": [2, 2, 1]},
                       "verifier": {"type": "tree_rejection"}},
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[HFTarget, Path, PluginHost]:
    model = two_way_lm(tiny_causal_lm("llama", seed=3, num_layers=4, max_position_embeddings=512))
    checkpoint = random_checkpoint(tmp_path_factory.mktemp("dflash") / "ckpt", target=model, block_size=8,
                                   taps=(1, 3), seed=5)
    return HFTarget.from_model(model), checkpoint, PluginHost(allowlist=PLUGINS)


def pipeline(setup: tuple[HFTarget, Path, PluginHost], shape: str) -> Pipeline:
    target, checkpoint, host = setup
    config = {"name": shape, "seed": 0, "sampling": {"temperature": 0.0}, "corrector": {"type": "identity"},
              "pruner": {"type": "none"}, "drafter": {"type": "dflash", "checkpoint": str(checkpoint), "top_k": 4},
              **SHAPES[shape]}
    return Pipeline.from_dict(config, target=target, host=host)


class RoundWatch:
    """Per round: host reads, and the addresses of the target's cache buffer and every row's token buffer."""

    def __init__(self) -> None:
        self.reads: list[int] = []
        self.cache: list[tuple[int, int]] = []  # (allocations, data_ptr)
        self.tokens: list[dict[int, int]] = []  # request index -> token buffer address

    @staticmethod
    @pytest.fixture
    def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[RoundWatch]:
        watch = RoundWatch()
        inner = loop.run_round

        def watched(session: Any, rows: list[Any]) -> None:
            with HostSyncCounter() as counter:
                inner(session, rows)
            watch.reads.append(counter.total)
            assert isinstance(session.target, SlotRows), "the tiny Llama target takes the lean engine path"
            cache = session.target.cache
            watch.cache.append((cache.allocations, cache.buffer.data_ptr()))
            watch.tokens.append({r.index: r.state.buffer_data_ptr for r in rows})

        monkeypatch.setattr(loop, "run_round", watched)
        yield watch


watch = RoundWatch.installed


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_one_host_read_per_round(setup: Any, watch: RoundWatch, shape: str, batch: int) -> None:
    pipe = pipeline(setup, shape)
    prompts = [torch.randint(3, 500, (12 + 3 * i,), generator=torch.Generator().manual_seed(i)).tolist()
               for i in range(batch)]
    results = pipe.generate_batch(prompts, 24, batch_size=batch)
    assert len(watch.reads) >= 4
    assert watch.reads == [1] * len(watch.reads), f"host reads per round: {watch.reads}"
    assert any(r.accepted >= 1 for res in results for r in res.rounds)  # drafts were verified and accepted


@pytest.mark.parametrize("batch", [1, 4])
def test_cache_and_token_buffers_are_not_reallocated_across_rounds(setup: Any, watch: RoundWatch,
                                                                   batch: int) -> None:
    pipe = pipeline(setup, "tree-rejection")  # trees whose accepted paths leave the prefix: commits move entries
    prompts = [torch.randint(3, 500, (10 + i,), generator=torch.Generator().manual_seed(9 + i)).tolist()
               for i in range(batch)]
    results = pipe.generate_batch(prompts, 40, batch_size=batch)
    assert sum(len(r.tokens) for r in results) == 40 * batch
    assert len(set(watch.cache)) == 1, f"the KV buffer changed between rounds: {sorted(set(watch.cache))}"
    by_request: dict[int, set[int]] = {}
    for ptrs in watch.tokens:
        for index, ptr in ptrs.items():
            by_request.setdefault(index, set()).add(ptr)
    assert len(by_request) == batch and all(len(v) == 1 for v in by_request.values())
    assert any(r.accepted >= 2 for res in results for r in res.rounds)  # commits moved entries, not only chains


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("shape", ["greedy-chain", "walk-dartree", "tree-rejection"])
def test_round_counters_at_batch_1_and_8(setup: Any, shape: str, batch: int) -> None:
    """`specframe.testing.counters` over continuous batching (more requests than rows, so rows leave and join
    mid-run) for the chain and tree pipeline shapes: one device-to-host read per round, no KV-pool allocation in
    any round, one target forward per round, and the target's host-to-device copies per round bounded whatever
    its rows (the loop's own, such as each row's token history, are counted in ``copies`` and not bounded here)."""
    pipe = pipeline(setup, shape)
    prompts = [torch.randint(3, 500, (8 + 3 * i,), generator=torch.Generator().manual_seed(i)).tolist()
               for i in range(batch + 2)]
    with RoundCounters() as counters:
        results = pipe.generate_batch(prompts, 16, batch_size=batch)
    rounds = counters.rounds
    assert len(rounds) >= 4 and max(r.rows for r in rounds) == batch
    assert [r.reads for r in rounds] == [1] * len(rounds)
    assert counters.kv_allocations_after_admission == 0
    assert all(len(r.shapes) == 1 and r.shapes[0][0] == r.rows for r in rounds)
    assert max(r.target_copies for r in rounds) <= TARGET_COPIES_PER_ROUND, [r.target_copies for r in rounds]
    assert any(r.accepted >= 1 for res in results for r in res.rounds)
