"""The block drafter's native rows (`BlockRows`): every drafting row in one forward, each row as if alone.

Rows of different prompt lengths join and leave between rounds, rounds propose for subsets of the rows (the others
only commit their root), and accepted paths differ per row, so the ragged cache, the padded context writes, the key
masks and the per-row positions are all exercised. Every batched proposal must equal the same request decoded alone
(its own one-row `BlockRows`, which ``test_diffusion_drafter`` checks against a float64 re-derivation).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusion_testkit import HIDDEN, TAPS, VOCAB
from specframe_diffusion.drafters import (
    DFlashDrafterConfig,
    DominoDrafterConfig,
    DSparkDrafterConfig,
    build_block_drafter,
)
from specframe_diffusion.drafters.block_rows import BlockRows
from specframe_diffusion.models.draft_cache import DraftKVCache

from specframe.device_sync import HostSyncCounter
from specframe.draft_vocab import DraftVocab, save_draft_vocab
from specframe.errors import GenerationError
from specframe.interfaces import BuildContext, DecodeState
from specframe.tree import DraftTree
from specframe.types import SamplingParams, TargetOutput, VerifyResult

WIDTH = len(TAPS) * HIDDEN
CONFIGS = {"dflash": DFlashDrafterConfig, "domino": DominoDrafterConfig, "dspark": DSparkDrafterConfig}
# checkpoint kind -> drafter family
KINDS = {"dflash": "dflash", "domino": "domino", "dspark_deepseek": "dspark"}
# One tree shape for every row of a round: node i's parent, and the root-first paths a verifier may accept.
PARENTS = [-1, 0, 1, 0, 3, 4, 2]
PATHS = [[0], [0, 1], [0, 1, 2], [0, 1, 2, 6], [0, 3], [0, 3, 4], [0, 3, 4, 5]]


def _drafter(directory: Path, kind: str, target: Any, draft_vocab: Path | None = None) -> Any:
    family = KINDS[kind]
    config = CONFIGS[family](checkpoint=str(directory), dtype="float32",
                             draft_vocab=None if draft_vocab is None else str(draft_vocab))
    return build_block_drafter(config, BuildContext(pipeline=None, target=target), family)


@dataclass
class Request:
    """One request of the simulation: its state (shared by both runs) and its drafter rows decoded alone."""

    state: DecodeState
    alone: BlockRows


class Simulation:
    """Drives a batched `BlockRows` and one `BlockRows` per request alone through the same rounds."""

    def __init__(self, drafter: Any, seed: int) -> None:
        self.drafter = drafter
        self.rows = drafter.rows()
        self.live: list[Request] = []
        self.gen = torch.Generator().manual_seed(seed)

    def join(self, prompt_len: int) -> None:
        tokens = torch.randint(0, VOCAB - 1, (1, prompt_len + 1), generator=self.gen)  # the prompt, then its token
        state = DecodeState(tokens=tokens, prompt_len=prompt_len, sampling=SamplingParams(), seed=0)
        prefill = TargetOutput(logits=torch.zeros(1, 1, VOCAB), hidden=torch.randn(1, prompt_len, WIDTH,
                                                                                    generator=self.gen))
        self.rows.add_row(state, prefill)
        alone = self.drafter.rows()
        alone.add_row(state, prefill)
        self.live.append(Request(state, alone))

    def keep(self, rows: list[int]) -> None:
        self.rows.keep_rows(rows)
        self.live = [self.live[r] for r in rows]

    def round(self, drafting: list[int]) -> None:
        """Propose for ``drafting`` (checked against each row alone), then commit a verdict for every row."""
        proposal = self.rows.propose(drafting, [self.live[r].state for r in drafting])
        assert proposal.batch_size == len(drafting)
        for i, r in enumerate(drafting):
            request = self.live[r]
            alone = request.alone.propose([0], [request.state])
            assert torch.equal(proposal.root[i : i + 1], request.state.root)
            # The same candidates in the same order; tokens of exactly tied log-probs may trade places.
            law = alone.logits[0]  # [L, V]
            torch.testing.assert_close(law.gather(-1, proposal.tokens[i]), law.gather(-1, alone.tokens[0]),
                                       atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(proposal.logprobs[i], alone.logprobs[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(proposal.logits[i], alone.logits[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(proposal.features[i], alone.features[0], atol=1e-5, rtol=1e-5)
        self.commit(drafting)

    def commit(self, drafting: list[int]) -> int:
        """Commit a round's verdict for every row; returns the host reads of the batched commit."""
        b, n = len(self.live), len(PARENTS)
        paths = [PATHS[int(torch.randint(0, len(PATHS), (1,), generator=self.gen))] if r in drafting else [0]
                 for r in range(b)]  # a row that did not draft verifies its root alone
        width = max(len(p) for p in paths)
        nodes = torch.tensor([p + [-1] * (width - len(p)) for p in paths])  # [B, D + 1]
        result = VerifyResult(accepted_nodes=nodes, num_accepted=torch.tensor([len(p) - 1 for p in paths]),
                              bonus_token=torch.randint(0, VOCAB - 1, (b,), generator=self.gen))
        tree = DraftTree.stack([DraftTree.from_lists([int(req.state.root[0]), *range(1, n)], PARENTS)
                                for req in self.live])
        out = TargetOutput(logits=torch.zeros(b, n, VOCAB), hidden=torch.randn(b, n, WIDTH, generator=self.gen))
        for req, path in zip(self.live, paths, strict=True):  # the loop appends every row's tokens first
            emitted = torch.randint(0, VOCAB - 1, (1, len(path)), generator=self.gen)
            req.state.tokens = torch.cat([req.state.tokens, emitted], dim=1)
        with HostSyncCounter() as syncs:
            self.rows.commit([req.state for req in self.live], tree, result, out)
        for row, req in enumerate(self.live):
            one = slice(row, row + 1)
            req.alone.commit([req.state], tree.select_rows([row]),
                             VerifyResult(nodes[one], result.num_accepted[one], result.bonus_token[one]),
                             TargetOutput(logits=out.logits[one], hidden=out.hidden[one]))
        return syncs.total


@pytest.mark.parametrize("kind", list(KINDS))
def test_batched_rows_propose_what_each_row_proposes_alone(make_checkpoint, hf_target: Any, kind: str) -> None:
    sim = Simulation(_drafter(make_checkpoint(kind, block_size=5), kind, hf_target), seed=3)
    sim.join(5)
    sim.join(2)
    sim.round([0, 1])
    sim.round([1])  # row 0 does not draft: it commits its root alone
    sim.join(9)  # joins with a longer prompt than the cached rows
    sim.round([0, 2])
    sim.round([0, 1, 2])
    sim.keep([2, 0])  # the middle row leaves, the others swap places
    sim.round([1])
    sim.round([0, 1])
    sim.join(3)
    sim.round([0, 1, 2])
    sim.round([2, 0])
    sim.keep([0, 1])  # the last row leaves
    sim.round([0, 1])
    sim.round([1])
    sim.round([0, 1])
    lengths = sim.rows.context_lengths()
    assert lengths == [req.alone.context_lengths()[0] for req in sim.live]
    assert len(set(lengths)) == len(lengths)  # the rows really are ragged


def test_rounds_nobody_drafts_cost_the_drafter_nothing_until_it_drafts_again(make_checkpoint, hf_target: Any,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain rounds keep their taps pending (no drafter pass); the next proposal extends every row in ONE pass and
    equals each row's proposal alone; rows leaving take their pending taps with them; pending is bounded."""
    from specframe_diffusion.drafters import block_rows

    sim = Simulation(_drafter(make_checkpoint("dflash", block_size=5), "dflash", hf_target), seed=4)
    for length in (4, 7, 2):
        sim.join(length)
    sim.round([0, 1, 2])
    extends: list[int] = []  # positions per extend of the batched rows' cache (the rows alone share the backbone)
    backbone = sim.rows.backbone
    original = type(backbone).extend

    def counted(self: Any, taps: torch.Tensor, cache: Any, *args: Any, **kwargs: Any) -> None:
        if cache is sim.rows.cache:
            extends.append(int(taps.shape[1]))
        original(self, taps, cache, *args, **kwargs)

    monkeypatch.setattr(type(backbone), "extend", counted)
    before = sim.rows.cache.lengths
    for _ in range(3):
        sim.commit([])  # plain rounds: every row commits its root alone
    sim.commit([1])  # a round whose tree one row drafted (its taps are pending too)
    assert extends == [] and sim.rows.cache.lengths == before
    assert sim.rows.context_lengths() == [req.state.cached_len for req in sim.live]
    sim.keep([2, 1])  # row 0 leaves with its pending taps
    sim.round([0, 1])  # ONE extend of everything pending, then proposals equal to each row's alone
    assert len(extends) == 1
    assert sim.rows.context_lengths() == [req.alone.context_lengths()[0] for req in sim.live]
    monkeypatch.setattr(block_rows, "MAX_PENDING", 3)
    extends.clear()
    assert len(sim.rows._pending) == 1  # the drafted round's own commit
    sim.commit([])
    sim.commit([])
    assert len(extends) == 1 and not sim.rows._pending  # the third pending round flushed them all
    sim.commit([])
    sim.keep([])  # every row leaves with taps pending (a batch ends), then a new request starts
    sim.join(5)
    sim.round([0])


def test_batched_rows_with_a_reduced_draft_vocabulary(make_checkpoint, hf_target: Any, tmp_path: Path) -> None:
    mapping = save_draft_vocab(DraftVocab.from_target_ids(list(range(0, VOCAB, 3)), VOCAB),
                               tmp_path / "map.safetensors")
    sim = Simulation(_drafter(make_checkpoint("domino", block_size=5), "domino", hf_target, mapping), seed=5)
    for length in (4, 7, 1):
        sim.join(length)
    sim.round([0, 1, 2])
    sim.round([0, 2])
    sim.keep([1, 2])
    sim.round([0, 1])


def test_one_request_api_runs_on_one_native_row(make_checkpoint, hf_target: Any) -> None:
    """begin / propose / commit of the drafter are its rows' methods with one row (one implementation)."""
    drafter = _drafter(make_checkpoint("dflash", block_size=5), "dflash", hf_target)
    gen = torch.Generator().manual_seed(9)
    state = DecodeState(tokens=torch.randint(0, VOCAB - 1, (1, 7), generator=gen), prompt_len=6,
                        sampling=SamplingParams(), seed=0)
    prefill = TargetOutput(logits=torch.zeros(1, 1, VOCAB), hidden=torch.randn(1, 6, WIDTH, generator=gen))
    drafter.begin(state, prefill)
    rows = drafter.rows()
    rows.add_row(state, prefill)
    single, native = drafter.propose(state), rows.propose([0], [state])
    assert torch.equal(single.tokens, native.tokens) and torch.equal(single.logprobs, native.logprobs)
    assert isinstance(drafter._rows, BlockRows) and drafter._rows.cache.lengths == [6]


def _sync_counts(drafter: Any, rows_count: int) -> list[int]:
    """Host reads of each propose and commit over three rounds of ``rows_count`` rows (a subset drafting once)."""
    sim = Simulation(drafter, seed=1)
    for r in range(rows_count):
        sim.join(3 + 2 * r)
    counts = []
    for drafting in (list(range(rows_count)), list(range(0, rows_count, 2)), list(range(rows_count))):
        with HostSyncCounter() as syncs:
            sim.rows.propose(drafting, [sim.live[r].state for r in drafting])
        counts.append(syncs.total)
        for req in (sim.live[r] for r in drafting):  # keep the alone runs in step
            req.alone.propose([0], [req.state])
        counts.append(sim.commit(drafting))
    return counts


def test_propose_and_commit_read_the_host_the_same_few_times_for_any_row_count(make_checkpoint,
                                                                                hf_target: Any) -> None:
    drafter = _drafter(make_checkpoint("domino", block_size=5), "domino", hf_target)
    assert _sync_counts(drafter, 1) == _sync_counts(drafter, 4) == [0] * 6


def test_rows_out_of_step_are_generation_errors(make_checkpoint, hf_target: Any) -> None:
    sim = Simulation(_drafter(make_checkpoint("dflash", block_size=4), "dflash", hf_target), seed=2)
    sim.join(3)
    sim.join(4)
    with pytest.raises(GenerationError, match=r"asked to propose for rows \[2\]"):
        sim.rows.propose([2], [sim.live[0].state])
    sim.live[1].state.tokens = torch.cat([sim.live[1].state.tokens, torch.tensor([[1]])], dim=1)
    with pytest.raises(GenerationError, match=r"holds context up to position 4 but the target has 5"):
        sim.rows.propose([1], [sim.live[1].state])
    with pytest.raises(GenerationError, match=r"holds 2 row\(s\) but the round committed 1 state"):
        sim.rows.commit([sim.live[0].state], DraftTree.root_only(torch.tensor([1])),
                        VerifyResult(torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long),
                                     torch.zeros(1, dtype=torch.long)),
                        TargetOutput(logits=torch.zeros(1, 1, VOCAB), hidden=torch.zeros(1, 1, WIDTH)))


# ------------------------------------------------------------------------------------------ the cache
def test_cache_plan_worked_example() -> None:
    """The module docstring's example: lengths [5, 2]; a block of 4, then 3 and 1 committed context positions."""
    cpu = torch.device("cpu")
    cache = DraftKVCache(num_layers=1, rows=2)
    cache.lengths = [5, 2]
    block = cache.plan(None, 4, None, cpu)
    assert block.slots.tolist() == [[5, 6, 7, 8], [2, 3, 4, 5]] and block.width == 9 and block.index is None
    assert block.mask[:, 0, 0].sum(dim=1).tolist() == [9, 6]
    entries = torch.arange(2 * 4, dtype=torch.float32).view(2, 1, 4, 1)  # entry e of row b holds 4 b + e
    cache.write(0, block, entries, entries)
    seen, _ = cache.read(0, block)
    assert seen.shape == (2, 1, 9, 1) and seen[0, 0, 5:9, 0].tolist() == [0, 1, 2, 3]
    assert seen[1, 0, 2:6, 0].tolist() == [4, 5, 6, 7]
    assert cache.lengths == [5, 2]  # the block is scratch
    context = cache.plan(None, 3, [3, 1], cpu)
    cache.write(0, context, -entries[:, :, :3], -entries[:, :, :3])
    cache.advance(context)
    assert cache.lengths == [8, 3]
    assert cache.keys[0][0, 0, 5:8, 0].tolist() == [0, -1, -2] and cache.keys[0][1, 0, 2, 0].item() == -4
    one = cache.plan([1], 2, None, cpu)  # one row of two: its own slots, read through an index
    assert one.slots.tolist() == [[3, 4]] and one.mask is None and one.index.tolist() == [1]


def test_cache_single_row_is_one_slice_and_grows_in_place() -> None:
    cpu = torch.device("cpu")
    cache = DraftKVCache(num_layers=1)
    plan = cache.plan(None, 40, None, cpu)
    assert plan.start == 0 and plan.mask is None and plan.slots is None and plan.positions.tolist() == list(range(40))
    first = torch.randn(1, 2, 40, 4)
    cache.write(0, plan, first, first)
    cache.advance(plan)
    block = cache.plan(None, 30, None, cpu)  # capacity 64 -> 128
    assert block.start == 40 and block.mask is None
    more = torch.randn(1, 2, 30, 4)
    cache.write(0, block, more, more)
    seen, _ = cache.read(0, block)
    assert cache.keys[0].shape[2] == 128 and seen.data_ptr() == cache.keys[0].data_ptr()  # a view of the cache
    assert torch.equal(seen, torch.cat([first, more], dim=2))
    assert cache.lengths == [40]


def test_backbone_refuses_inputs_that_do_not_match_the_cache_rows(make_checkpoint, hf_target: Any) -> None:
    backbone = _drafter(make_checkpoint("dflash", block_size=4), "dflash", hf_target).backbone
    cache = backbone.new_cache(rows=2)
    with pytest.raises(ValueError, match=r"3 input row\(s\) for 2 cache row\(s\)"):
        backbone(torch.zeros(3, 1, WIDTH), torch.zeros(3, 4, HIDDEN), cache)
    with pytest.raises(ValueError, match=r"2 input row\(s\) for 1 cache row\(s\) \(rows \[1\]"):
        backbone.run_block(torch.zeros(2, 4, HIDDEN), cache, rows=[1])
