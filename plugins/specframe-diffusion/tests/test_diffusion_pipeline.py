"""Full pipelines on published-layout checkpoints: greedy output equals plain decoding at every tree builder.

Two tiny Qwen3 targets: a *two-way* one (greedy tokens alternate 300/301; drafts hit often, so rounds accept
varying numbers of tokens through varying tree nodes) and an untouched random one (diverse tokens, drafts
rarely hit). Plain decoding is an argmax loop over full forwards of the HF model, independent of the adapter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from diffusion_testkit import TARGET_LAYERS, VOCAB, plain_greedy, write_published_checkpoint
from specframe_hf.testing import TWO_WAY_TOKENS
from specframe_hf.testing import two_way_lm as make_two_way

from specframe.draft_vocab import DraftVocab, save_draft_vocab
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost
from specframe.testing.frozen_budget import freeze_auto_budget

pytestmark = pytest.mark.slow

PLUGINS = ["diffusion", "hf", "trees", "verifiers"]
PROMPT = torch.tensor([[5, 6, 7, 8, 9, 10]])
NEW_TOKENS = 16

# layout -> (checkpoint kind, config overrides, drafter type, corrector)
LAYOUTS = {
    "dflash": ("dflash", {"block_size": 6}, "dflash", {"type": "identity"}),
    "domino": ("domino", {"block_size": 6}, "domino", {"type": "ar"}),
    "dspark_deepseek": ("dspark_deepseek", {"block_size": 5}, "dspark", {"type": "markov"}),
    "dspark_zlab_rnn": ("dspark_zlab", {"block_size": 5, "head_type": "rnn"}, "dspark", {"type": "markov"}),
    "dflash_deepseek": ("dflash_deepseek", {"block_size": 5}, "dflash", {"type": "identity"}),
}
BUILDERS = {
    "chain": ({"type": "chain"}, None),
    "heap": ({"type": "heap"}, None),
    "heap_sequential": ({"type": "heap_sequential"}, None),
    "dartree_fixed": ({"type": "dartree", "mode": "fixed"}, None),
    "dartree_pruned": ({"type": "dartree", "mode": "pruned", "width": 3}, {"type": "deferred_topb"}),
    "chain_then_heap": ({"type": "chain_then_heap"}, None),
}


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return PluginHost(allowlist=PLUGINS)


@pytest.fixture(scope="module")
def targets() -> dict[str, Any]:
    from specframe_hf.testing import tiny_causal_lm

    two_way = make_two_way(tiny_causal_lm("qwen3", seed=7, num_layers=TARGET_LAYERS))
    random = tiny_causal_lm("qwen3", seed=8, num_layers=TARGET_LAYERS)
    return {name: (m, plain_greedy(m, PROMPT, NEW_TOKENS)) for name, m in
            (("two_way", two_way), ("random", random))}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, targets: dict[str, Any]) -> dict[tuple[str, str], Path]:
    out = {}
    for target_name, (model, _) in targets.items():
        for layout, (kind, overrides, _, _) in LAYOUTS.items():
            directory = tmp_path_factory.mktemp(f"{layout}-{target_name}")
            write_published_checkpoint(directory, kind, seed=21, target=model, **overrides)
            out[(target_name, layout)] = directory
    return out


def run(host: PluginHost, model: Any, checkpoint: Path, layout: str, builder: str, budget: int,
        draft_vocab: Path | None = None) -> Any:
    from specframe_hf import HFTarget

    _, _, drafter, corrector = LAYOUTS[layout]
    tree_builder, pruner = BUILDERS[builder]
    config = {
        "name": f"{layout}-{builder}",
        "budget": budget,
        "drafter": {"type": drafter, "checkpoint": str(checkpoint), "top_k": 4,
                    "draft_vocab": None if draft_vocab is None else str(draft_vocab)},
        "corrector": {"type": "identity"} if builder == "heap" else corrector,
        "tree_builder": tree_builder,
        "pruner": pruner or {"type": "none"},
        "verifier": {"type": "auto"},
        "generation": {"stop_at_eos": False},
        "metrics": {"check_trees": True, "stage_timing": False},
    }
    pipe = Pipeline.from_dict(config, target=HFTarget.from_model(model), host=host)
    return pipe.generate(PROMPT, max_new_tokens=NEW_TOKENS)


@pytest.mark.parametrize("builder", list(BUILDERS))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_greedy_output_equals_plain_decoding(host, targets, checkpoints, layout: str, builder: str) -> None:
    model, expected = targets["two_way"]
    result = run(host, model, checkpoints[("two_way", layout)], layout, builder, budget=10)
    assert result.tokens == expected
    accepted = [r.accepted for r in result.rounds]
    assert 1 + sum(accepted) + len(accepted) >= NEW_TOKENS  # prefill token, then accepted drafts + a bonus
    if builder != "chain":
        assert max(accepted) >= 1, accepted  # trees hit on the two-way target


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_greedy_equality_on_a_random_target(host, targets, checkpoints, layout: str) -> None:
    model, expected = targets["random"]
    result = run(host, model, checkpoints[("random", layout)], layout, "dartree_pruned", budget=8)
    assert result.tokens == expected


@pytest.mark.parametrize("keep", ["both", "one"])
@pytest.mark.parametrize("layout", ["dflash", "domino", "dspark_deepseek"])
def test_greedy_equality_with_a_reduced_draft_vocabulary(host, targets, checkpoints, tmp_path: Path, layout: str,
                                                         keep: str) -> None:
    """Drafts only from a subset (with both two-way tokens, or without 301): the output is still plain decoding's."""
    model, expected = targets["two_way"]
    others = [t for t in torch.randperm(VOCAB, generator=torch.Generator().manual_seed(1)).tolist()
              if t not in TWO_WAY_TOKENS][:150]
    ids = [*others, *(TWO_WAY_TOKENS if keep == "both" else TWO_WAY_TOKENS[:1])]
    mapping = save_draft_vocab(DraftVocab.from_target_ids(ids, VOCAB), tmp_path / "map.safetensors")
    result = run(host, model, checkpoints[("two_way", layout)], layout, "dartree_pruned", budget=10,
                 draft_vocab=mapping)
    assert result.tokens == expected
    accepted = [r.accepted for r in result.rounds]
    if keep == "both":
        assert max(accepted) >= 1, accepted


BATCH_PROMPTS = [torch.tensor([[5, 6, 7, 8, 9, 10]]), torch.tensor([[11, 3]]),
                 torch.tensor([[4, 4, 9, 2, 8, 1, 7, 3, 12]])]
BATCH_LIMITS = [NEW_TOKENS, 5, 11]


def batch_config(checkpoint: Path, layout: str, builder: str, budget: int | str = 10) -> dict[str, Any]:
    _, _, drafter, corrector = LAYOUTS[layout]
    tree_builder, pruner = BUILDERS[builder]
    return {"budget": budget, "drafter": {"type": drafter, "checkpoint": str(checkpoint), "top_k": 4},
            "corrector": {"type": "identity"} if builder == "heap" else corrector, "tree_builder": tree_builder,
            "pruner": pruner or {"type": "none"}, "verifier": {"type": "auto"},
            "generation": {"stop_at_eos": False}, "metrics": {"check_trees": True}}


@pytest.fixture
def drafted_rows(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(rows drafting, rows in the batch) of every native batched propose while the test runs."""
    from specframe_diffusion.drafters.block_rows import BlockRows

    calls: list[tuple[int, int]] = []
    propose = BlockRows.propose

    def spy(self: BlockRows, rows: Any, states: Any) -> Any:
        calls.append((len(rows), self.batch_size))
        return propose(self, rows, states)

    monkeypatch.setattr(BlockRows, "propose", spy)
    return calls


@pytest.mark.parametrize("batch_size", [2, 3])
@pytest.mark.parametrize("builder", ["heap", "dartree_pruned"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_batched_rows_keep_their_own_draft_state(host, targets, checkpoints, drafted_rows, layout: str,
                                                 builder: str, batch_size: int) -> None:
    """The drafter's native rows draft all rows in one forward, each from its own context taps and cache: rows
    equal their plain decoding and the rounds of the request decoded alone."""
    from specframe_hf import HFTarget

    from specframe.decode.request import Request

    model, _ = targets["two_way"]
    config = batch_config(checkpoints[("two_way", layout)], layout, builder)
    pipe = Pipeline.from_dict(config, target=HFTarget.from_model(model), host=host)
    requests = [Request(p, n) for p, n in zip(BATCH_PROMPTS, BATCH_LIMITS, strict=True)]
    results = pipe.generate_batch(requests, batch_size=batch_size)
    assert max(size for _, size in drafted_rows) == batch_size  # the rows were drafted together
    for prompt, n, result in zip(BATCH_PROMPTS, BATCH_LIMITS, results, strict=True):
        assert result.tokens == plain_greedy(model, prompt, n)
        # Drafts depend on the row's own state only: the same rounds as the request decoded alone (rows sharing
        # another row's taps, cache or positions would draft differently, though still losslessly).
        alone = pipe.generate(prompt, n)
        assert [(r.nodes, r.accepted) for r in result.rounds] == [(r.nodes, r.accepted) for r in alone.rounds]
    assert any(r.accepted >= 1 for res in results for r in res.rounds)


#: A verify-time curve (ms by tokens per forward) that makes wide trees costly, so `budget: auto` drafts some rounds
#: of some rows and decodes others plainly.
STEEP = {1: 45.0, 2: 60.0, 3: 66.0, 5: 75.0, 9: 99.0, 17: 106.0, 33: 141.0}


@pytest.mark.parametrize("layout", ["dflash", "domino"])
def test_budget_auto_batches_draft_subsets_of_rows(host, targets, checkpoints, drafted_rows, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """Under `budget: auto` rows that decode a round plainly skip the draft forward; every row stays greedy-exact."""
    from specframe_hf import HFTarget

    import specframe.decode.loop as loop_module
    from specframe.decode.request import Request
    from specframe.testing.clock import TickClock

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    monkeypatch.setattr(loop_module, "StageClock", TickClock)  # stage times read the same on every machine
    model, _ = targets["random"]  # drafts rarely hit: the controller turns plain for some rows and probes again
    config = batch_config(checkpoints[("random", layout)], layout, "dartree_pruned", budget="auto")
    config["auto_budget"] = {"max_budget": 10}
    pipe = Pipeline.from_dict(config, target=HFTarget.from_model(model), host=host)
    freeze_auto_budget(pipe, STEEP)
    limits = [32, 5, 32]  # the third request joins when the second ends, out of step with the first
    requests = [Request(p, n) for p, n in zip(BATCH_PROMPTS, limits, strict=True)]
    results = pipe.generate_batch(requests, batch_size=2)
    for prompt, n, result in zip(BATCH_PROMPTS, limits, results, strict=True):
        assert result.tokens == plain_greedy(model, prompt, n)
    assert any(drafting < size for drafting, size in drafted_rows), drafted_rows  # a subset of the rows drafted
