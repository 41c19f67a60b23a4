"""Correction heads and correctors: checkpoint names, the two GRU forms, batching, formulas, normalisation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from specframe_trees.correctors import GRUCorrector, MarkovCorrector
from specframe_trees.heads import DominoGRUHead, GRUHeadSizes, MarkovHead, MarkovHeadSizes
from trees_testkit import HIDDEN, VOCAB, small_gru, small_markov

from specframe.builtin.identity import IdentityCorrector
from specframe.errors import CheckpointError, GenerationError
from specframe.testing.strategies import proposals
from specframe.types import DraftProposal

SETTINGS = settings(max_examples=25, deadline=None)


def _proposal(seed: int = 0, *, b: int = 2, length: int = 4, k: int = 5, logits: bool = True) -> DraftProposal:
    g = torch.Generator().manual_seed(seed)
    full = torch.randn(b, length, VOCAB, generator=g, dtype=torch.float64) * 2
    lp = torch.log_softmax(full, dim=-1)
    values, order = torch.sort(lp, dim=-1, descending=True, stable=True)
    return DraftProposal(
        root=torch.randint(VOCAB, (b,), generator=g),
        tokens=order[..., :k],
        logprobs=values[..., :k].float(),
        logits=full.float() if logits else None,
        features=torch.randn(b, length, HIDDEN, generator=g),
    )


# --------------------------------------------------------------------------------- checkpoint layout
def test_gru_head_has_the_checkpoint_names_and_shapes() -> None:
    head = DominoGRUHead(GRUHeadSizes(hidden_size=6, gru_hidden=4, emb_dim=3, vocab_size=10))
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert shapes == {
        "prefix_gru.weight_ih_l0": (12, 6),
        "prefix_gru.weight_hh_l0": (12, 4),
        "embed_proj.0.weight": (3, 10),
        "embed_proj.2.weight": (10, 3),
    }


@pytest.mark.parametrize(("variant", "extra"), [
    ("vanilla", {}),
    ("gated", {"gate_proj.weight": (4, 10), "gate_proj.bias": (4,)}),
    ("rnn", {"joint_proj.weight": (12, 14), "joint_proj.bias": (12,)}),
])
def test_markov_head_has_the_checkpoint_names_and_shapes(variant: str, extra: dict) -> None:
    head = MarkovHead(MarkovHeadSizes(vocab_size=10, rank=4, hidden_size=6, variant=variant))
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert shapes == {"markov_w1.weight": (10, 4), "markov_w2.weight": (10, 4), **extra}


def test_heads_never_touch_the_global_rng_and_are_seeded() -> None:
    before = torch.get_rng_state()
    a, b, c = small_gru(seed=1), small_gru(seed=1), small_gru(seed=2)
    m = small_markov("rnn", seed=3)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(a.head.w2, b.head.w2) and torch.equal(a.embed_weight, b.embed_weight)
    assert not torch.equal(a.head.w2, c.head.w2)
    assert m.head.joint_proj.weight.abs().sum() > 0


def test_meta_head_loads_a_state_dict_by_assignment() -> None:
    sizes = GRUHeadSizes(hidden_size=6, gru_hidden=4, emb_dim=3, vocab_size=10)
    source = DominoGRUHead(sizes, generator=torch.Generator().manual_seed(5))
    target = DominoGRUHead(sizes, device="meta")
    target.load_state_dict(source.state_dict(), strict=True, assign=True)
    assert torch.equal(target.w_ih, source.w_ih) and target.w_ih.device.type == "cpu"


# ------------------------------------------------------------------------------------ GRU forms
def test_written_out_gru_cell_equals_nn_gru() -> None:
    head = DominoGRUHead(GRUHeadSizes(hidden_size=7, gru_hidden=5, emb_dim=3, vocab_size=11), dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    state = torch.randn(4, 5, generator=g, dtype=torch.float64)
    x = torch.randn(4, 7, generator=g, dtype=torch.float64)
    torch.testing.assert_close(head.gru_cell(state, head.input_gates(x)), head.gru_step(state, x))


@pytest.mark.parametrize("normalize", ["candidates", "full_vocab"])
def test_low_rank_form_equals_direct_form(normalize: str) -> None:
    fast = small_gru(normalize=normalize, low_rank=True)
    direct = small_gru(normalize=normalize, low_rank=False)
    p = _proposal()
    s_fast, s_direct = fast.init_state(p), direct.init_state(p)
    torch.testing.assert_close(s_fast, s_direct)
    tokens = p.root[:, None]
    for depth in range(1, p.depth + 1):
        lp_fast = fast.child_logprobs(p, depth, tokens, s_fast)
        torch.testing.assert_close(lp_fast, direct.child_logprobs(p, depth, tokens, s_direct))
        tokens = p.tokens[:, depth - 1, [0, 2, 2]]  # 3 children, two with the same token
        s_fast = fast.advance(p, depth, s_fast[:, [0, 0, 0]], tokens)
        s_direct = direct.advance(p, depth, s_direct[:, [0, 0, 0]], tokens)
        torch.testing.assert_close(s_fast, s_direct)


def test_gru_corrector_matches_the_domino_formula_along_a_path() -> None:
    """final_i = base_i + embed_proj([z_i ; s_i]), s_i = GRU over [root, d_1 .. d_i] from zero."""
    corr = small_gru(pure_prefix_len=1)
    p = _proposal(b=1)
    head = corr.head
    path = [int(p.tokens[0, d, d % 3]) for d in range(p.depth)]
    sequence = torch.tensor([[int(p.root[0]), *path]])
    states, _ = head.prefix_gru(F.embedding(sequence, corr.embed_weight))  # [1, 1 + L, G]
    state = corr.init_state(p)
    node = p.root[:, None]
    for depth in range(1, p.depth + 1):
        slot = depth - 1
        got = corr.child_logprobs(p, depth, node, state)[0, 0]
        cand = p.tokens[0, slot]
        logits = p.logprobs[0, slot].double()
        if slot >= 1:  # slot 0 is the pure draft slot
            logits = logits + head.correction(p.features[0, slot][None].double(), states[0, slot][None])[0, cand]
        torch.testing.assert_close(got, torch.log_softmax(logits, dim=-1))
        node = torch.tensor([[path[slot]]])
        state = corr.advance(p, depth, state, node)
        torch.testing.assert_close(state[0, 0], states[0, depth])


@pytest.mark.parametrize("make", [
    lambda: small_gru(), lambda: small_gru(low_rank=False), lambda: small_gru(normalize="full_vocab"),
    lambda: small_markov("vanilla"), lambda: small_markov("gated"), lambda: small_markov("rnn"),
    lambda: small_markov("rnn", normalize="full_vocab"),
], ids=["gru", "gru_direct", "gru_full", "markov_vanilla", "markov_gated", "markov_rnn", "markov_rnn_full"])
def test_batched_frontier_equals_one_node_at_a_time(make) -> None:
    corr = make()
    p = _proposal()
    root_state = corr.init_state(p)
    kids = p.tokens[:, 0, [1, 0, 3, 1]]  # [B, 4]
    parents = root_state[:, [0, 0, 0, 0]]
    states = corr.advance(p, 1, parents, kids)  # [B, 4, S]
    batched = corr.child_logprobs(p, 2, kids, states)  # [B, 4, K]
    for m in range(4):
        one_state = corr.advance(p, 1, root_state, kids[:, m : m + 1])
        torch.testing.assert_close(one_state, states[:, m : m + 1])
        torch.testing.assert_close(corr.child_logprobs(p, 2, kids[:, m : m + 1], one_state), batched[:, m : m + 1])


# ---------------------------------------------------------------------------------- Markov formulas
def test_markov_vanilla_bias_uses_the_previous_token_even_at_slot_zero() -> None:
    corr = small_markov("vanilla")
    p = _proposal()
    head = corr.head
    state = corr.init_state(p)
    got = corr.child_logprobs(p, 1, p.root[:, None], state)[:, 0]  # [B, K]
    bias = head.markov_w2(head.markov_w1(p.root))  # [B, V]
    expected = torch.log_softmax(p.logprobs[:, 0].double() + bias.gather(1, p.tokens[:, 0]), dim=-1)
    torch.testing.assert_close(got, expected)


def test_markov_rnn_follows_its_recurrence() -> None:
    corr = small_markov("rnn")
    head = corr.head
    p = _proposal(b=1)
    r = head.sizes.rank
    s = torch.zeros(r, dtype=torch.float64)
    prev = int(p.root[0])
    state = corr.init_state(p)
    node = p.root[:, None]
    for depth in range(1, p.depth + 1):
        slot = depth - 1
        e = head.markov_w1.weight[prev]
        gate, cand, out = head.joint_proj(torch.cat([s, e, p.features[0, slot].double()])).chunk(3)
        bias = head.markov_w2.weight[p.tokens[0, slot]] @ torch.tanh(out)
        expected = torch.log_softmax(p.logprobs[0, slot].double() + bias, dim=-1)
        torch.testing.assert_close(corr.child_logprobs(p, depth, node, state)[0, 0], expected)
        g = torch.sigmoid(gate)
        s = g * s + (1 - g) * torch.tanh(cand)
        prev = int(p.tokens[0, slot, 1])
        node = torch.tensor([[prev]])
        state = corr.advance(p, depth, state, node)
        torch.testing.assert_close(state[0, 0, :r], s)


# ---------------------------------------------------------------------------------- normalisation
@SETTINGS
@given(proposals(masked=True))
def test_candidate_normalisation_sums_to_one_and_keeps_masks(p: DraftProposal) -> None:
    for corr in (small_gru(pure_prefix_len=0), small_markov("gated")):
        state = corr.init_state(p)
        lp = corr.child_logprobs(p, 1, p.root[:, None], state)[:, 0]  # [B, K]
        finite_base = torch.isfinite(p.logprobs[:, 0])
        assert not bool(torch.isnan(lp).any())
        assert torch.equal(torch.isfinite(lp), finite_base)
        for b in range(p.batch_size):
            if bool(finite_base[b].any()):
                assert math.isclose(float(torch.logsumexp(lp[b], dim=0)), 0.0, abs_tol=1e-9)


def test_full_vocab_normalisation_is_over_the_whole_vocabulary() -> None:
    corr = small_gru(normalize="full_vocab", pure_prefix_len=0)
    p = _proposal()
    state = corr.init_state(p)
    lp = corr.child_logprobs(p, 1, p.root[:, None], state)[:, 0]  # [B, K]
    full = p.logits[:, 0].double() + corr.head.correction(p.features[:, 0].double(), state[:, 0])
    torch.testing.assert_close(lp, torch.log_softmax(full, dim=-1).gather(1, p.tokens[:, 0]))
    assert bool((torch.logsumexp(lp, dim=-1) < 0).all())  # K < V candidates hold less than all the mass


def test_identity_broadcasts_the_base_logprobs() -> None:
    p = _proposal()
    lp = IdentityCorrector().child_logprobs(p, 3, torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 4, 0))
    assert lp.shape == (2, 4, 5)
    assert torch.equal(lp, p.logprobs[:, 2, None, :].expand(2, 4, 5))


# --------------------------------------------------------------------------------------- errors
def test_missing_inputs_give_clear_errors() -> None:
    p = _proposal(logits=False)
    no_features = DraftProposal(root=p.root, tokens=p.tokens, logprobs=p.logprobs)
    with pytest.raises(GenerationError, match=r"needs proposal\.features"):
        small_gru().init_state(no_features)
    gru_full = small_gru(normalize="full_vocab", pure_prefix_len=0)
    with pytest.raises(GenerationError, match=r"full_vocab needs proposal\.logits"):
        gru_full.child_logprobs(p, 1, p.root[:, None], gru_full.init_state(p))
    big = DraftProposal(root=p.root, tokens=p.tokens + VOCAB, logprobs=p.logprobs, features=p.features)
    with pytest.raises(GenerationError, match="vocabulary of 16"):
        small_markov().init_state(big)
    wide = DraftProposal(root=p.root, tokens=p.tokens, logprobs=p.logprobs, features=torch.zeros(2, 4, 3))
    with pytest.raises(GenerationError, match="width 8"):
        small_markov("gated").init_state(wide)


def test_constructor_rejects_a_mismatched_embedding_table() -> None:
    head = DominoGRUHead(GRUHeadSizes(hidden_size=6, gru_hidden=4, emb_dim=3, vocab_size=10))
    with pytest.raises(CheckpointError, match=r"expects \[10, 6\]"):
        GRUCorrector(head, torch.zeros(10, 7))
    assert isinstance(small_markov(), MarkovCorrector)
