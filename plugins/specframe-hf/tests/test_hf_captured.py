"""Capture-ready verify rounds (``target: {capture: compile}``): bucketed shapes, one ``torch.compile(fullgraph=True,
dynamic=False)`` graph per bucket without graph breaks, the same scores as the per-row forward, and a
continuous-batching run that compiles at most once per bucket.

Dynamo's graph capture is checked with a counting backend (``torch._dynamo.testing.CompileCounter``): ``fullgraph``
raises on any graph break whatever the backend, and inductor's code generation takes minutes on these CPUs
(``benchmarks/accelerator_check.py`` runs the inductor / CUDA-graph path on a GPU)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from specframe_hf.captured import LADDER, bucket
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids, random_tree_parents
from torch._dynamo.testing import CompileCounter

from specframe.decode.request import Request
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost
from specframe.tree import DraftTree

ATOL = 1e-4


def test_the_bucket_ladder() -> None:
    assert [bucket(n) for n in (0, 1, 2, 3, 5, 8, 9, 64, 65)] == [1, 1, 2, 4, 8, 8, 16, 64, 128]
    assert LADDER[:5] == (1, 2, 4, 8, 16)


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_each_bucket_compiles_once_without_graph_breaks_and_scores_like_the_per_row_forward(tiny_model,
                                                                                          family) -> None:
    """Trees of 3 to 6 nodes over rows that join and leave: every round's logits and taps equal the per-row
    forward's, and dynamo compiled one full graph per bucket (rows, nodes, blocks) it ran."""
    model = tiny_model(family)
    counter = CompileCounter()
    captured = HFTarget.from_model(model, capture="compile", capture_backend=counter).ragged_batch(taps=(0, 1))
    plain = HFTarget.from_model(model).ragged_batch(taps=(0, 1))
    for rows in (captured, plain):
        for i in range(3):
            rows.add_row(torch.tensor([random_ids(5 + 4 * i, seed=i)]), capacity=60)
    for r, n in enumerate((3, 4, 5, 6, 3)):
        if r == 3:
            for rows in (captured, plain):
                rows.keep_rows([2, 0])
        b = len(plain.lengths)
        tree = DraftTree.stack([DraftTree.from_lists(random_ids(n, seed=10 * r + i),
                                                     random_tree_parents(n, seed=10 * r + i)) for i in range(b)])
        got, want = captured.forward_tree(tree), plain.forward_tree(tree)
        assert torch.allclose(got.logits, want.logits, atol=ATOL) and torch.allclose(got.hidden, want.hidden,
                                                                                    atol=ATOL)
        paths = [tree.path_to(i, n - 1)[:2] for i in range(b)]
        for rows in (captured, plain):
            rows.commit(tree, None, paths)
    assert captured.bucketed is not None
    assert captured.bucketed.shapes == {(4, 4, 4), (4, 8, 4), (2, 8, 4), (2, 4, 4)}
    assert counter.frame_count == len(captured.bucketed.shapes)


def test_captured_rows_offer_budget_auto_the_node_counts_that_fill_a_bucket(tiny_model) -> None:
    model = tiny_model("llama")
    captured = HFTarget.from_model(model, capture="compile", capture_backend=CompileCounter()).ragged_batch()
    assert HFTarget.from_model(model).ragged_batch().node_buckets is None  # exact shapes: any count
    buckets = captured.node_buckets
    assert buckets is not None and buckets[:4] == (1, 3, 7, 15)
    assert all(bucket(k + 1) == k + 1 for k in buckets)  # root + k nodes fill their bucket: no padding node


#: Greedy speculative decoding with the prompt-lookup drafter: chains of up to 5 nodes.
CONFIG: dict[str, Any] = {"drafter": {"type": "ngram", "num_speculative_tokens": 4}, "corrector": {"type": "identity"},
                          "tree_builder": {"type": "chain"}, "pruner": {"type": "none"}, "verifier": {"type": "greedy"},
                          "budget": 4, "sampling": {"temperature": 0.0}, "generation": {"stop_at_eos": False}}


def test_a_continuous_batching_run_compiles_at_most_once_per_bucket(tiny_model) -> None:
    """64 requests of different lengths through 8 rows (rows leave and join throughout, the batch shrinks at the
    end): the outputs equal
    the per-row forward's, and every bucket the run met was compiled once."""
    model = tiny_model("llama")
    host = PluginHost(allowlist=["hf", "trees", "verifiers"])
    prompts = [Request(random_ids(4 + i % 7, seed=100 + i), max_new_tokens=4 + (5 * i) % 23) for i in range(64)]
    counter = CompileCounter()
    target = HFTarget.from_model(model, capture="compile", capture_backend=counter)
    captured = Pipeline.from_dict(CONFIG, target=target, host=host).generate_batch(prompts, batch_size=8)
    plain = Pipeline.from_dict(CONFIG, target=HFTarget.from_model(model), host=host).generate_batch(
        prompts, batch_size=8)
    assert [r.tokens for r in captured] == [r.tokens for r in plain]
    shapes = target.bucket_shapes
    assert {rows for rows, _, _ in shapes} >= {8, 4, 2, 1}  # the batch shrank through every rows bucket
    assert counter.frame_count == len(shapes) <= 12
