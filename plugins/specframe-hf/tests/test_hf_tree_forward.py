"""Tree forward: every node's logits equal a causal forward over the prompt and that node's own path."""

from __future__ import annotations

import pytest
import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import causal_hidden, causal_logits, random_ids, random_tree_parents

from specframe.tree import DraftTree

ATOL = 1e-4  # fp32; observed differences are ~5e-6


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral"])
def test_every_node_matches_its_own_causal_path(tiny_model, family, attn):
    model = tiny_model(family, attn)
    target = HFTarget.from_model(model)
    prompt = random_ids(19, seed=3)
    out = target.prefill(torch.tensor([prompt]))
    assert out.logits.shape == (1, 1, 512) and out.logits.dtype == torch.float32
    assert torch.allclose(out.logits[0, 0], causal_logits(model, prompt)[-1], atol=ATOL)
    parents = [-1, 0, 0, 1, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10]
    tokens = random_ids(len(parents), seed=4)
    tree = DraftTree.from_lists(tokens, parents)
    logits = target.forward_tree(tree).logits  # [1, N, V]
    assert logits.shape == (1, len(parents), 512)
    for node in range(len(parents)):
        path = [tokens[j] for j in tree.path_to(0, node)]
        ref = causal_logits(model, prompt + path)[-1]
        assert torch.allclose(logits[0, node], ref, atol=ATOL), f"node {node} ({family}, {attn})"
    assert target.cache_len == len(prompt)  # nothing committed yet


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_tree_taps_equal_hidden_states_of_each_path(tiny_model, attn):
    model = tiny_model("qwen3", attn)
    target = HFTarget.from_model(model, taps=(0,))
    prompt = random_ids(11, seed=5)
    pre = target.prefill(torch.tensor([prompt]))
    assert pre.hidden is not None and pre.hidden.shape == (1, 11, 64)
    assert torch.allclose(pre.hidden[0], causal_hidden(model, prompt, (0,)), atol=ATOL)
    parents = random_tree_parents(9, seed=6)
    tokens = random_ids(9, seed=7)
    tree = DraftTree.from_lists(tokens, parents)
    hidden = target.forward_tree(tree).hidden  # [1, N, H]
    for node in range(9):
        path = [tokens[j] for j in tree.path_to(0, node)]
        ref = causal_hidden(model, prompt + path, (0,))[-1]
        assert torch.allclose(hidden[0, node], ref, atol=ATOL), f"node {node}"


def test_taps_concatenate_in_request_order_and_last_layer_is_before_the_final_norm(tiny_model):
    """Taps (1, 0): layer 1 first. ``output_hidden_states`` applies the final norm to the last layer; taps do not."""
    model = tiny_model("llama")
    target = HFTarget.from_model(model, taps=(1, 0))
    prompt = random_ids(9, seed=16)
    hidden = target.prefill(torch.tensor([prompt])).hidden[0]  # [P, 2H]
    last_raw, first = hidden[:, :64], hidden[:, 64:]
    assert torch.allclose(first, causal_hidden(model, prompt, (0,)), atol=ATOL)
    with torch.no_grad():
        normed = model.model.norm(last_raw)
    assert torch.allclose(normed, causal_hidden(model, prompt, (1,)), atol=ATOL)
    assert not torch.allclose(last_raw, normed, atol=1e-2)


def test_root_only_tree_is_one_decode_step(tiny_model):
    model = tiny_model("llama")
    target = HFTarget.from_model(model)
    prompt = random_ids(8, seed=8)
    target.prefill(torch.tensor([prompt]))
    logits = target.forward_tree(DraftTree.root_only(torch.tensor([17]))).logits
    assert torch.allclose(logits[0, 0], causal_logits(model, [*prompt, 17])[-1], atol=ATOL)


def test_batched_trees_with_padding_match_per_row_paths(tiny_model):
    """Two rows with trees of different sizes: padding nodes neither break nor leak into real nodes."""
    model = tiny_model("qwen3")
    target = HFTarget.from_model(model)
    prompts = [random_ids(10, seed=9), random_ids(10, seed=10)]
    target.prefill(torch.tensor(prompts))
    rows = [
        DraftTree.from_lists(random_ids(6, seed=11), random_tree_parents(6, seed=12)),
        DraftTree.from_lists(random_ids(3, seed=13), [-1, 0, 1]),
    ]
    tree = DraftTree.stack(rows)
    logits = target.forward_tree(tree).logits  # [2, 6, V]
    for b, row in enumerate(rows):
        toks = row.tokens[0].tolist()
        for node in range(row.capacity):
            path = [toks[j] for j in row.path_to(0, node)]
            ref = causal_logits(model, prompts[b] + path)[-1]
            assert torch.allclose(logits[b, node], ref, atol=ATOL), f"row {b} node {node}"
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("engine", ["auto", "transformers"])
@pytest.mark.parametrize(("dtype", "atol"), [(torch.bfloat16, 0.25), (torch.float16, 0.05)])
def test_half_precision_tree_forward_tracks_the_causal_forward(tiny_model, dtype, atol, engine):
    """bf16 / fp16 run through the same code (mask in the model's dtype); logits come back as float32."""
    model = tiny_model("llama").to(dtype)
    try:
        target = HFTarget.from_model(model, engine=engine)
        prompt = random_ids(12, seed=14)
        target.prefill(torch.tensor([prompt]))
        tokens = random_ids(5, seed=15)
        tree = DraftTree.from_lists(tokens, [-1, 0, 0, 1, 2])
        logits = target.forward_tree(tree).logits
        assert logits.dtype == torch.float32
        if engine == "transformers":
            assert target.rows.mask.dtype == dtype
        else:
            assert target.rows.cache.buffer.dtype == dtype
        for node in range(5):
            path = [tokens[j] for j in tree.path_to(0, node)]
            ref = causal_logits(model, prompt + path)[-1]
            assert (logits[0, node] - ref).abs().max() < atol, f"node {node}"
    finally:
        model.to(torch.float32)
