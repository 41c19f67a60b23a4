"""Commit: compacting the cache to the accepted path equals a fresh prefill of the committed sequence."""

from __future__ import annotations

import pytest
import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import causal_hidden, causal_logits, committed_kv, random_ids, random_tree_parents

from specframe.errors import ContractError, GenerationError
from specframe.tree import DraftTree

ATOL = 1e-4


def run_rounds(target: HFTarget, prompt: list[int], rounds: int, seed: int) -> tuple[list[int], int, torch.Tensor]:
    """Drive random trees and accepted paths; return (committed ids, next root, committed taps).

    Even rounds accept the whole path to the last node (rarely a prefix of the block, so entries must move);
    odd rounds accept a random cut of the path to a random node.
    """
    gen = torch.Generator().manual_seed(seed)
    taps = [target.prefill(torch.tensor([prompt])).hidden]
    committed = list(prompt)
    moved = 0  # rounds whose accepted path is not a prefix of the tree block
    root = int(torch.randint(0, 512, (1,), generator=gen))
    for r in range(rounds):
        n = int(torch.randint(1, 12, (1,), generator=gen))
        tokens = [root, *random_ids(n - 1, seed=seed * 100 + r)]
        tree = DraftTree.from_lists(tokens, random_tree_parents(n, seed=seed * 100 + r))
        out = target.forward_tree(tree)
        if r % 2 == 0:
            path = tree.path_to(0, n - 1)
        else:
            path = tree.path_to(0, int(torch.randint(0, n, (1,), generator=gen)))
            path = path[: int(torch.randint(1, len(path) + 1, (1,), generator=gen))]
        moved += path != list(range(len(path)))
        accepted = torch.full((1, n), -1, dtype=torch.long)
        accepted[0, : len(path)] = torch.tensor(path)
        target.commit(tree, accepted)
        if out.hidden is not None:
            taps.append(out.hidden[:, path])
        committed += [tokens[j] for j in path]
        assert target.cache_len == len(committed)
        root = int(torch.randint(0, 512, (1,), generator=gen))
    assert moved >= 2, "the rounds must exercise the copying path of the compaction"
    hidden = torch.cat(taps, dim=1) if taps[0] is not None else None
    return committed, root, hidden


ENGINES = ["auto", "transformers"]  # the lean slot path (Llama family) and transformers' forward


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_compacted_cache_equals_fresh_prefill(tiny_model, family, attn, engine):
    model = tiny_model(family, attn)
    target = HFTarget.from_model(model, engine=engine)
    committed, root, _ = run_rounds(target, random_ids(7, seed=1), rounds=6, seed=2)
    fresh = HFTarget.from_model(model, engine="transformers")
    fresh.prefill(torch.tensor([committed]))
    for (ours_k, ours_v), (theirs_k, theirs_v) in zip(committed_kv(target.rows), committed_kv(fresh.rows),
                                                      strict=True):
        assert ours_k.shape == theirs_k.shape
        assert torch.allclose(ours_k, theirs_k, atol=ATOL)
        assert torch.allclose(ours_v, theirs_v, atol=ATOL)
    step = DraftTree.root_only(torch.tensor([root]))
    ours_next = target.forward_tree(step).logits[0, 0]
    fresh_next = fresh.forward_tree(step).logits[0, 0]
    assert torch.allclose(ours_next, fresh_next, atol=ATOL)
    assert torch.allclose(ours_next, causal_logits(model, [*committed, root])[-1], atol=ATOL)


@pytest.mark.parametrize("engine", ENGINES)
def test_taps_at_committed_positions_equal_output_hidden_states(tiny_model, engine):
    model = tiny_model("qwen3")
    target = HFTarget.from_model(model, taps=(0,), engine=engine)
    committed, _, hidden = run_rounds(target, random_ids(6, seed=3), rounds=6, seed=5)
    assert hidden is not None and hidden.shape == (1, len(committed), 64)
    assert torch.allclose(hidden[0], causal_hidden(model, committed, (0,)), atol=ATOL)


@pytest.mark.parametrize("engine", ENGINES)
def test_chain_prefix_commit_needs_no_copy_and_keeps_the_prefix(tiny_model, engine):
    model = tiny_model("llama")
    target = HFTarget.from_model(model, engine=engine)
    prompt = random_ids(5, seed=5)
    target.prefill(torch.tensor([prompt]))
    tokens = random_ids(4, seed=6)
    chain = DraftTree.from_lists(tokens, [-1, 0, 1, 2])
    target.forward_tree(chain)
    target.commit(chain, torch.tensor([[0, 1, -1, -1]]))
    assert target.cache_len == 7 and committed_kv(target.rows)[0][0].shape[2] == 7
    nxt = target.forward_tree(DraftTree.root_only(torch.tensor([9]))).logits[0, 0]
    assert torch.allclose(nxt, causal_logits(model, [*prompt, *tokens[:2], 9])[-1], atol=ATOL)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_second_forward_without_commit_discards_the_first_tree(tiny_model, engine):
    model = tiny_model("llama")
    target = HFTarget.from_model(model, engine=engine)
    prompt = random_ids(5, seed=7)
    target.prefill(torch.tensor([prompt]))
    target.forward_tree(DraftTree.from_lists(random_ids(3, seed=8), [-1, 0, 0]))
    logits = target.forward_tree(DraftTree.root_only(torch.tensor([4]))).logits
    assert target.cache_len == 5
    assert torch.allclose(logits[0, 0], causal_logits(model, [*prompt, 4])[-1], atol=ATOL)


def test_batch_rows_accepting_the_same_length_compact_independently(tiny_model):
    model = tiny_model("qwen3")
    target = HFTarget.from_model(model)
    prompts = [random_ids(6, seed=9), random_ids(6, seed=10)]
    target.prefill(torch.tensor(prompts))
    rows = [DraftTree.from_lists(random_ids(4, seed=11), [-1, 0, 0, 2]),
            DraftTree.from_lists(random_ids(4, seed=12), [-1, 0, 1, 1])]
    tree = DraftTree.stack(rows)
    target.forward_tree(tree)
    paths = [[0, 2, 3], [0, 1, 3]]
    target.commit(tree, torch.tensor([[*paths[0], -1], [*paths[1], -1]]))
    logits = target.forward_tree(DraftTree.root_only(torch.tensor([5, 6]))).logits
    for b in range(2):
        toks = rows[b].tokens[0].tolist()
        seq = prompts[b] + [toks[j] for j in paths[b]] + [5 + b]
        assert torch.allclose(logits[b, 0], causal_logits(model, seq)[-1], atol=ATOL)


def test_bad_commits_raise_generation_errors(tiny_model):
    target = HFTarget.from_model(tiny_model("llama"))
    target.prefill(torch.tensor([random_ids(5, seed=13)]))
    tree = DraftTree.from_lists([1, 2, 3], [-1, 0, 0])
    with pytest.raises(GenerationError, match="without a pending forward_tree"):
        target.commit(tree, torch.tensor([[0, -1, -1]]))
    target.forward_tree(tree)
    with pytest.raises(ContractError, match="root-first path"):
        target.commit(tree, torch.tensor([[1, 2, -1]]))
    with pytest.raises(GenerationError, match="tree of 2 nodes"):
        target.commit(DraftTree.from_lists([1, 2], [-1, 0]), torch.tensor([[0, 1]]))
    two_rows = HFTarget.from_model(tiny_model("llama"))
    two_rows.prefill(torch.tensor([random_ids(5, seed=14), random_ids(5, seed=15)]))
    both = DraftTree.stack([tree, tree])
    two_rows.forward_tree(both)
    with pytest.raises(GenerationError, match="different path lengths"):
        two_rows.commit(both, torch.tensor([[0, 1, -1], [0, -1, -1]]))
