"""The 2026 parent-conditioned stages: DFlash2's path selector, LiLiCorr's lattice reranker and the PCTree builder.

Formulas are checked against references written here from the papers' equations (explicit loops, float64), not
against the modules' own helpers.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from specframe_trees.builders import DARTreeBuilder, DARTreeConfig, PCTreeBuilder, PCTreeConfig
from specframe_trees.heads import LatticeHead, LatticeHeadSizes, PathSelectorHead, PathSelectorSizes
from trees_testkit import HIDDEN, VOCAB, ctx, small_lilicorr, small_markov, small_path_selector

from specframe.builtin.chain import ChainBuilder, ChainConfig
from specframe.tree import check_tree
from specframe.types import DraftProposal


def _proposal(seed: int = 0, *, b: int = 2, length: int = 4, k: int = 5) -> DraftProposal:
    g = torch.Generator().manual_seed(seed)
    full = torch.randn(b, length, VOCAB, generator=g, dtype=torch.float64) * 2
    lp = torch.log_softmax(full, dim=-1)
    values, order = torch.sort(lp, dim=-1, descending=True, stable=True)
    return DraftProposal(root=torch.randint(VOCAB, (b,), generator=g), tokens=order[..., :k],
                         logprobs=values[..., :k].float(), logits=full.float(),
                         features=torch.randn(b, length, HIDDEN, generator=g))


# ------------------------------------------------------------------------------------ path selector
def test_path_selector_has_the_dflash2_checkpoint_names_and_shapes() -> None:
    head = PathSelectorHead(PathSelectorSizes(vocab_size=10, rank=4, hidden_size=6))
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert shapes == {"predecessor_codebook": (10, 4), "successor_codebook": (10, 4),
                      "hidden_projection.weight": (4, 6)}
    assert head.num_parameters() == {"hidden_projection": 24, "codebooks": 80}


def test_path_selector_scores_are_unary_plus_the_bilinear_term() -> None:
    """S_t(a, b) = U_t(b) + <A[a] * H h_t, B[b]>, softmax over the first top_k candidates, for every frontier node."""
    p = _proposal(1)
    corr = small_path_selector(top_k=3)
    head = corr.head
    frontier = torch.tensor([[3, 7], [0, 11]])
    lp = corr.child_logprobs(p, 2, frontier, torch.zeros(2, 2, 0))  # [B, M, K]
    a_book, b_book, proj = head.predecessor_codebook, head.successor_codebook, head.hidden_projection.weight
    for b in range(2):
        for m in range(2):
            scores = []
            for c in range(3):
                bilinear = sum(float(a_book[frontier[b, m], i]) * float(proj[i] @ p.features[b, 1].double())
                               * float(b_book[p.tokens[b, 1, c], i]) for i in range(head.sizes.rank))
                scores.append(float(p.logprobs[b, 1, c]) + bilinear)
            expected = torch.log_softmax(torch.tensor(scores, dtype=torch.float64), dim=0)
            assert torch.allclose(lp[b, m, :3].double(), expected, atol=1e-9)
            assert bool(torch.isinf(lp[b, m, 3:]).all())  # past top_k: not in the lattice


def test_path_selector_depth_one_uses_the_root_as_predecessor() -> None:
    p = _proposal(2)
    corr = small_path_selector(top_k=None)
    first = corr.child_logprobs(p, 1, p.root[:, None], corr.init_state(p))
    again = corr.child_logprobs(p, 1, p.root[:, None].clone(), corr.init_state(p))
    other = corr.child_logprobs(p, 1, (p.root[:, None] + 1) % VOCAB, corr.init_state(p))
    assert torch.equal(first, again) and not torch.allclose(first, other)


def test_path_selector_full_vocabulary_normalisation() -> None:
    p = _proposal(3)
    corr = small_path_selector(top_k=None, normalize="full_vocab")
    frontier = torch.tensor([[4], [9]])
    lp = corr.child_logprobs(p, 3, frontier, torch.zeros(2, 1, 0))[:, 0]  # [B, K]
    ctx_vec = corr.head.context(frontier[:, 0], p.features[:, 2].double())  # [B, r]
    full = torch.log_softmax(p.logits[:, 2].double() + ctx_vec @ corr.head.successor_codebook.T, dim=-1)
    assert torch.allclose(lp.double(), full.gather(1, p.tokens[:, 2]), atol=1e-9)


def test_path_selector_over_a_draft_vocabulary_shares_one_row_outside_it() -> None:
    draft = torch.tensor([1, 4, 6, 9])
    sizes = PathSelectorSizes(vocab_size=VOCAB, rank=3, hidden_size=HIDDEN, codebook_rows=5)
    head = PathSelectorHead(sizes, generator=torch.Generator().manual_seed(3), init_std=0.5, draft_ids=draft,
                            dtype=torch.float64).requires_grad_(False)
    assert head.rows_of(torch.tensor([1, 4, 6, 9, 0, 15])).tolist() == [0, 1, 2, 3, 4, 4]
    h = torch.randn(1, 1, HIDDEN, dtype=torch.float64)
    outside_a, outside_b = head.context(torch.tensor([[0]]), h), head.context(torch.tensor([[15]]), h)
    assert torch.equal(outside_a, outside_b)  # every predecessor outside the vocabulary shares the last row
    scores = head.candidate_scores(head.context(torch.tensor([[4]]), h), torch.tensor([[6, 2]]))
    assert float(scores[0, 0, 1]) == 0.0 and float(scores[0, 0, 0]) != 0.0  # no transition term outside it
    full = head.full_scores(head.context(torch.tensor([[4]]), h))[0, 0]
    assert torch.allclose(full[[6, 2]], scores[0, 0])
    with pytest.raises(ValueError, match="need 4 codebook rows"):
        head.set_vocabulary(torch.tensor([1, 2, 3]))


def test_path_selector_is_seeded_and_leaves_the_global_rng_alone() -> None:
    before = torch.get_rng_state()
    a, b, c = small_path_selector(seed=1), small_path_selector(seed=1), small_path_selector(seed=2)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(a.head.successor_codebook, b.head.successor_codebook)
    assert not torch.equal(a.head.successor_codebook, c.head.successor_codebook)
    meta = PathSelectorHead(a.head.sizes, device="meta")
    meta.load_state_dict(a.head.state_dict(), strict=True, assign=True)
    assert torch.equal(meta.predecessor_codebook, a.head.predecessor_codebook)


# ------------------------------------------------------------------------------------ lattice (LiLiCorr)
def _reference_lattice(head: LatticeHead, embeds: torch.Tensor, logprobs: torch.Tensor, hidden: torch.Tensor,
                       anchor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """LiLiCorr's factors for one block, written out: per-head attention loops, RMSNorm by its formula."""
    sd = {k: v.double() for k, v in head.state_dict().items()}
    sz = head.sizes
    s, k, _ = embeds.shape
    h = sz.hidden_size

    def lin(x: torch.Tensor, name: str) -> torch.Tensor:
        return x @ sd[f"{name}.weight"].T + sd[f"{name}.bias"]

    def rms(x: torch.Tensor, name: str) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + sz.rms_norm_eps) * sd[f"{name}.weight"]

    lp = logprobs.double()
    feats = torch.stack([lp, lp.exp(), lp - lp.max(-1, keepdim=True).values,
                         (torch.arange(k) / max(k - 1, 1)).double().expand(s, k),
                         F.one_hot(torch.zeros(s, dtype=torch.long), k).double()], dim=-1)
    norm = F.layer_norm(feats, (5,), sd["feature_mlp.0.weight"], sd["feature_mlp.0.bias"])
    mlp = lin(F.silu(lin(norm, "feature_mlp.1")), "feature_mlp.3")
    x = lin(embeds.double(), "token_proj") + lin(hidden.double(), "pass_hidden_proj")[:, None] + mlp
    x = x + sd["slot_embedding"][0, 0, :s] + sd["rank_embedding"][0, 0, :, :k]
    x = x.reshape(s * k, h)
    slot = torch.arange(s).repeat_interleave(k)
    heads, dh = sz.num_heads, h // sz.num_heads
    for i in range(sz.num_layers):
        pre = f"layers.{i}."
        y = rms(x, pre + "attn_norm")
        qkv = y @ sd[pre + "attn.in_proj_weight"].T + sd[pre + "attn.in_proj_bias"]
        q, kk, v = qkv.split(h, dim=-1)
        out = torch.zeros_like(x)
        for n in range(heads):
            cols = slice(n * dh, (n + 1) * dh)
            bias = sd["relative_slot_bias"][n, slot[:, None] - slot[None, :] + sz.block_size - 1]
            bias = bias + (slot[:, None] == slot[None, :]) * sd["same_slot_bias"][n]
            att = torch.softmax(q[:, cols] @ kk[:, cols].T / math.sqrt(dh) + bias, dim=-1)
            out[:, cols] = att @ v[:, cols]
        x = x + out @ sd[pre + "attn.out_proj.weight"].T + sd[pre + "attn.out_proj.bias"]
        x = x + lin(F.silu(lin(rms(x, pre + "mlp_norm"), pre + "mlp.0")), pre + "mlp.2")
    x = rms(x, "output_norm").reshape(s, k, h)
    a = rms(lin(anchor.double(), "context_proj"), "anchor_norm")
    y = F.silu(lin(torch.cat([x, a.expand_as(x), x * a], dim=-1), "factor_input_proj"))
    out_vec, in_vec = F.normalize(lin(y, "out_head"), dim=-1), F.normalize(lin(y, "in_head"), dim=-1)
    anchor_out = F.normalize(lin(a, "anchor_out_head"), dim=-1)
    start = sz.logit_scale * (in_vec[0] @ anchor_out)
    pair = sz.logit_scale * torch.einsum("sif,sjf->sij", out_vec[:-1], in_vec[1:])
    return start, pair


def test_lattice_head_matches_the_written_out_reference() -> None:
    corr = small_lilicorr(hidden_size=6, num_heads=2)  # token_proj is a Linear (D != h)
    p = _proposal(4, k=4)
    scores = corr._round.get(p)
    for b in range(2):
        embeds = corr.embed_weight[p.tokens[b]]  # [S, k, D]
        start, pair = _reference_lattice(corr.head, embeds, p.logprobs[b], p.features[b], corr.embed_weight[p.root[b]])
        assert torch.allclose(scores.start[b].double(), start, atol=1e-5)
        assert torch.allclose(scores.pair[b].double(), pair, atol=1e-5)


def test_lattice_unary_option_adds_the_drafters_log_probs() -> None:
    p = _proposal(4, k=4)
    plain, unary = small_lilicorr(), small_lilicorr(unary=True)
    a, b = plain._round.get(p), unary._round.get(p)
    lp = p.logprobs.double()
    assert torch.allclose(b.start.double(), a.start.double() + lp[:, 0], atol=1e-6)
    assert torch.allclose(b.pair.double(), a.pair.double() + lp[:, 1:, None, :], atol=1e-6)


def test_lattice_head_has_the_public_parameter_names() -> None:
    sizes = LatticeHeadSizes(model_hidden_size=8, hidden_size=4, num_layers=2, num_heads=2, mlp_ratio=2.0,
                             num_slots=3, block_size=3, candidate_topk=5, factor_dim=2)
    shapes = {k: tuple(v.shape) for k, v in LatticeHead(sizes).state_dict().items()}
    assert shapes["slot_embedding"] == (1, 1, 3, 1, 4) and shapes["rank_embedding"] == (1, 1, 1, 5, 4)
    assert shapes["relative_slot_bias"] == (2, 5) and shapes["same_slot_bias"] == (2,)
    assert shapes["layers.1.attn.in_proj_weight"] == (12, 4) and shapes["layers.0.mlp.0.weight"] == (8, 4)
    assert shapes["factor_input_proj.weight"] == (4, 12) and shapes["anchor_out_head.weight"] == (2, 4)
    assert shapes["feature_mlp.0.weight"] == (5,) and shapes["token_proj.weight"] == (4, 8)
    same_width = LatticeHead(LatticeHeadSizes(**{**sizes.__dict__, "hidden_size": 8})).state_dict()
    assert not any(k.startswith("token_proj") for k in same_width)  # Identity when h == D


def test_lattice_children_follow_the_parents_row_of_pair_scores() -> None:
    corr = small_lilicorr()
    p = _proposal(5, k=5)
    scores = corr._round.get(p)
    first = corr.child_logprobs(p, 1, p.root[:, None], torch.zeros(2, 1, 0))
    assert torch.allclose(first[:, 0, :4], torch.log_softmax(scores.start.double(), -1).float(), atol=1e-6)
    assert bool(torch.isinf(first[..., 4]).all())  # the 5th candidate is past candidate_topk = 4
    frontier = p.tokens[:, 1, [2, 0, 4]]  # slot 1's candidates 2 and 0, and one outside the lattice
    lp = corr.child_logprobs(p, 3, frontier, torch.zeros(2, 3, 0))
    for b in range(2):
        for m, i in enumerate((2, 0)):
            assert torch.allclose(lp[b, m, :4], torch.log_softmax(scores.pair[b, 1, i].double(), -1).float(),
                                  atol=1e-6)
        assert bool(torch.isinf(lp[b, 2]).all())  # not a lattice node: no children


def test_lattice_rows_are_independent_and_dead_candidates_are_hidden() -> None:
    corr = small_lilicorr()
    p = _proposal(6, k=4)
    both = corr._round.get(p)
    alone = corr._round.get(DraftProposal(root=p.root[:1], tokens=p.tokens[:1], logprobs=p.logprobs[:1],
                                          features=p.features[:1]))
    assert torch.allclose(both.pair[:1], alone.pair, atol=1e-6)
    dead = DraftProposal(root=p.root.clone(), tokens=p.tokens.clone(), logprobs=p.logprobs.clone(),
                         features=p.features)
    dead.logprobs[:, 2, 3] = -math.inf
    one = corr._round.get(dead).pair.clone()
    dead2 = DraftProposal(root=p.root, tokens=dead.tokens.clone(), logprobs=dead.logprobs, features=p.features)
    dead2.tokens[:, 2, 3] = (dead2.tokens[:, 2, 3] + 1) % VOCAB  # another token in the dead slot
    two = corr._round.get(dead2).pair
    live = torch.ones(4, dtype=torch.bool)
    live[3] = False
    assert torch.allclose(one[:, 0], two[:, 0], atol=1e-5)  # slots 0 -> 1 do not see the dead candidate
    assert torch.allclose(one[:, 1][:, :, live], two[:, 1][:, :, live], atol=1e-5)
    lp = corr.child_logprobs(dead, 3, dead.tokens[:, 1, :1], torch.zeros(2, 1, 0))
    assert bool(torch.isinf(lp[..., 3]).all()) and bool(torch.isfinite(lp[..., :3]).all())


def test_lattice_refuses_more_slots_than_it_was_built_for() -> None:
    from specframe.errors import GenerationError

    corr = small_lilicorr(num_slots=2)
    with pytest.raises(GenerationError, match="at most 2 slots"):
        corr.child_logprobs(_proposal(7), 1, torch.zeros(2, 1, dtype=torch.long), torch.zeros(2, 1, 0))


# ------------------------------------------------------------------------------------------- PCTree
@pytest.mark.parametrize("factory", [small_markov, small_path_selector, small_lilicorr])
def test_pctree_keeps_the_dspark_chain_and_gives_each_parent_its_children(factory) -> None:  # type: ignore[no-untyped-def]
    p = _proposal(8, length=4, k=5)
    corr = factory()
    chain = ChainBuilder(ChainConfig()).build(p, corr, ctx(64))
    config = PCTreeConfig(children=(3, 2, 1), width=6, keep_spine=True)
    tree = PCTreeBuilder(config).build(p, corr, ctx(9))
    assert check_tree(tree, budget=9, monotone_scores=True) == []
    for b in range(2):
        paths = {tuple(int(tree.tokens[b, j]) for j in tree.path_to(b, i)) for i in range(int(tree.num_nodes[b]))}
        spine = tuple(chain.tokens[b, : int(chain.num_nodes[b])].tolist())
        assert all(spine[: d + 1] in paths for d in range(len(spine)))  # the whole chain is in the tree
        for node, kids in enumerate(tree.children()[b]):
            depth = int(tree.depth[b, node])
            assert len(kids) <= config.children_at(depth + 1)


def test_pctree_worked_example_from_the_docstring() -> None:
    tokens = torch.tensor([[[10, 11], [20, 21]]])
    logprobs = torch.tensor([[[-0.2, -1.8], [-0.3, -0.9]]])
    p = DraftProposal(root=torch.tensor([1]), tokens=tokens, logprobs=logprobs)
    from specframe.builtin.identity import IdentityCorrector

    tree = PCTreeBuilder(PCTreeConfig(children=(2, 1), width=4, keep_spine=True)).build(p, IdentityCorrector(), ctx(3))
    assert tree.tokens[0].tolist() == [1, 10, 11, 20] and tree.parent[0].tolist() == [-1, 0, 0, 1]
    by_score = PCTreeBuilder(PCTreeConfig(children=(2, 1), width=4, keep_spine=False)).build(
        p, IdentityCorrector(), ctx(3))
    assert sorted(by_score.score[0, 1:].tolist(), reverse=True) == pytest.approx([-0.2, -0.5, -1.8])


def test_pctree_without_the_spine_is_dartree_with_a_child_cap() -> None:
    """children >= K and keep_spine false: PCTree selects exactly the nodes DARTree pruned + a top-B keeps."""
    p = _proposal(9, length=3, k=3)
    corr = small_markov("gated")
    pc = PCTreeBuilder(PCTreeConfig(children=(3,), width=4, keep_spine=False)).build(p, corr, ctx(100))
    dart = DARTreeBuilder(DARTreeConfig(width=4)).build(p, corr, ctx(100))
    def paths(t, b):  # type: ignore[no-untyped-def]
        return sorted(tuple(int(t.tokens[b, j]) for j in t.path_to(b, i)) for i in range(int(t.num_nodes[b])))

    for b in range(2):
        assert paths(pc, b) == paths(dart, b)
