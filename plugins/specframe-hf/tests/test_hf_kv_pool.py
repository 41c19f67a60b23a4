"""The paged KV pool: block tables, departures that copy nothing, commits within a row's blocks, rows whose blocks
are not contiguous, and the attention over it against the dense-mask SDPA oracle."""

from __future__ import annotations

import pytest
import torch
from specframe_hf.kv_pool import KVPool
from specframe_hf.paged_attention import RowRead, paged_attention, tree_mask
from specframe_hf.target import HFTarget
from specframe_hf.testing import causal_logits, random_ids, random_tree_parents
from torch.nn import functional as F

from specframe.tree import DraftTree

ATOL = 1e-4


def small_pool(blocks: int, block_size: int = 4) -> KVPool:
    return KVPool(2, 2, 8, torch.float32, torch.device("cpu"), blocks=blocks, block_size=block_size)


def test_the_worked_example_of_the_module_docstring() -> None:
    pool = small_pool(6)
    assert pool.admit(10) == 0 and pool.tables == [[0, 1, 2]] and pool.free == [3, 4, 5]
    assert pool.admit(6) == 1 and pool.tables == [[0, 1, 2], [3, 4]] and pool.free == [5]
    pool.lengths = [0, 5]
    assert pool.physical(1, 5, 3) == [17, 18, 19]
    assert pool.buffer is not None
    pool.buffer[:, :, :, 19] = 7.0
    pool.commit([[0], [0, 2]])
    assert pool.lengths == [1, 7] and torch.all(pool.buffer[:, :, :, 18] == 7.0)
    assert pool.moved_bytes == pool.bytes_per_slot
    pool.keep_rows([1])
    assert pool.tables == [[3, 4]] and pool.free == [0, 1, 2, 5]
    pool.admit(12)
    assert pool.tables == [[3, 4], [0, 1, 2]] and pool.run(1) == 0 and pool.allocations == 1


def test_a_fixed_pool_says_what_fits_and_never_grows() -> None:
    pool = small_pool(4)
    pool.admit(8)
    assert pool.fits(8) and not pool.fits(9) and pool.ever_fits(16) and not pool.ever_fits(17)
    pool.admit(8)
    with pytest.raises(MemoryError):
        pool.admit(1)
    assert pool.allocations == 1
    scratched = small_pool(4)
    scratched.take_scratch()  # the bucketed forward's padding block is no row's
    assert scratched.fits(12) and not scratched.fits(13) and not scratched.ever_fits(13)
    growable = KVPool(2, 2, 8, torch.float32, torch.device("cpu"), block_size=4)
    growable.plan([8, 8])
    assert growable.allocations == 1 and growable.total_blocks == 4
    growable.plan([8, 8])  # already sized: nothing allocated
    assert growable.allocations == 1


def test_a_departure_copies_nothing_and_frees_its_blocks(tiny_model) -> None:
    """Three rows decode a round; the middle one leaves: no byte of the pool changes, nothing is allocated, the
    others keep their blocks and entries, and the next row reuses the freed blocks."""
    rows = HFTarget.from_model(tiny_model("llama")).ragged_batch()
    for i, n in enumerate((5, 9, 7)):
        rows.add_row(torch.tensor([random_ids(n, seed=i)]), capacity=40)
    tree = DraftTree.stack([DraftTree.from_lists(random_ids(4, seed=9), [-1, 0, 0, 2])] * 3)
    rows.forward_tree(tree)
    rows.commit(tree, None, [[0, 2, 3], [0, 1], [0]])
    pool = rows.cache
    before = pool.buffer.clone()
    ptr, allocations, tables = pool.buffer.data_ptr(), pool.allocations, [list(t) for t in pool.tables]
    kept = {r: pool.read(r, pool.lengths[r]) for r in (0, 2)}
    free = len(pool.free)
    rows.keep_rows([2, 0])
    assert torch.equal(pool.buffer, before) and pool.buffer.data_ptr() == ptr and pool.allocations == allocations
    assert pool.tables == [tables[2], tables[0]] and len(pool.free) == free + len(tables[1])
    assert torch.equal(pool.read(0, pool.lengths[0]), kept[2]) and torch.equal(pool.read(1, pool.lengths[1]), kept[0])
    rows.add_row(torch.tensor([random_ids(6, seed=5)]), capacity=40)
    assert pool.tables[2] == tables[1] and pool.allocations == allocations


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_rows_whose_blocks_are_scattered_score_like_the_causal_forward(tiny_model, family, attn) -> None:
    """A fixed pool of 4-slot blocks where a joining row gets the hole another row left plus the blocks at the end
    (no contiguous run is free): its prefill, tree rounds and commits go through its block table (a gather), and
    every node of every row scores as the causal forward of its committed sequence and path does."""
    model = tiny_model(family, attn)
    rows = HFTarget.from_model(model).ragged_batch()
    rows.cache = KVPool(rows.cache.layers, rows.cache.kv_heads, rows.cache.head_dim, torch.float32,
                        torch.device("cpu"), blocks=12, block_size=4)
    prompts = {0: random_ids(5, seed=1), 1: random_ids(6, seed=2), 2: random_ids(3, seed=3)}
    for p in prompts.values():
        rows.add_row(torch.tensor([p]), capacity=12)
    rows.keep_rows([0, 2])  # row 1 leaves: blocks 3, 4, 5 free, and 9, 10, 11 at the end
    committed = [prompts[0], prompts[2], random_ids(9, seed=4)]
    out = rows.add_row(torch.tensor([committed[2]]), capacity=16)
    assert rows.cache.tables[2] == [3, 4, 5, 9] and rows.cache.run(2) is None
    assert torch.allclose(out.logits[0, 0], causal_logits(model, committed[2])[-1], atol=ATOL)
    gen = torch.Generator().manual_seed(0)
    for r in range(2):
        trees = [DraftTree.from_lists(random_ids(3, seed=10 * r + b), random_tree_parents(3, seed=10 * r + b))
                 for b in range(3)]
        logits = rows.forward_tree(DraftTree.stack(trees)).logits
        paths = []
        for b, tree in enumerate(trees):
            tokens = tree.tokens[0].tolist()
            for node in range(3):
                ref = causal_logits(model, committed[b] + [tokens[j] for j in tree.path_to(0, node)])[-1]
                assert torch.allclose(logits[b, node], ref, atol=ATOL), (r, b, node)
            path = tree.path_to(0, int(torch.randint(0, 3, (1,), generator=gen)))
            paths.append(path)
            committed[b] = committed[b] + [tokens[j] for j in path]
        rows.commit(DraftTree.stack(trees), None, paths)
    assert rows.lengths == [len(c) for c in committed] and rows.cache.allocations == 1


def dense_reference(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, pool: KVPool,
                    rows: list[tuple[int, int, list[int]]], groups: int) -> torch.Tensor:  # [T, H_q * D]
    """The oracle: every row's keys gathered and repeated per query head, padded to the longest row, one SDPA
    over a dense additive mask built from the definition (prefix visible, ancestors-or-self visible, padding
    hidden). ``rows``: (committed, nodes, parents) per row."""
    hq, d = q.shape[1], q.shape[2]
    b, n = len(rows), max(c for _, c, _ in rows)
    width = max(length + c for length, c, _ in rows)
    qd = torch.zeros(b, hq, n, d)
    kd = torch.zeros(b, hq, width, d)
    vd = torch.zeros(b, hq, width, d)
    mask = torch.full((b, 1, n, width), torch.finfo(torch.float32).min)
    first = 0
    for r, (length, c, parents) in enumerate(rows):
        index = torch.tensor(pool.physical(pool.rows - len(rows) + r, 0, length + c))
        kd[r, :, : length + c] = keys.index_select(1, index).repeat_interleave(groups, 0)
        vd[r, :, : length + c] = values.index_select(1, index).repeat_interleave(groups, 0)
        qd[r, :, :c] = q[first : first + c].transpose(0, 1)
        for i in range(n):
            mask[r, 0, i, :length] = 0.0
            j = min(i, c - 1)
            while j != -1:
                mask[r, 0, i, length + j] = 0.0
                j = parents[j]
        first += c
    out = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask)  # [B, H_q, N, D]
    return torch.cat([out[r, :, :c].transpose(0, 1).reshape(c, hq * d) for r, (_, c, _) in enumerate(rows)])


@pytest.mark.parametrize("eager", [False, True])
@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paged_attention_equals_dense_mask_sdpa(seed: int, groups: int, eager: bool) -> None:
    """Random pools (blocks handed out in a random order, so some rows are contiguous runs and some are not),
    random trees of different sizes per row, GQA groups 1, 2 and 4, SDPA and the eager formula: the paged, ragged,
    grouped attention equals SDPA over the padded batch with repeated key/value heads and a dense mask."""
    gen = torch.Generator().manual_seed(seed)
    hkv, d, size = 2, 8, 4
    pool = KVPool(1, hkv, d, torch.float32, torch.device("cpu"), blocks=40, block_size=size)
    assert pool.buffer is not None
    pool.buffer.normal_(generator=gen)
    for _ in range(20):  # fill the pool with rows of 2 blocks, then free every other one: 10 holes of 2 blocks
        pool.admit(2 * size)
    pool.keep_rows(range(0, 20, 2))
    rows: list[tuple[int, int, list[int]]] = []
    reads: list[RowRead] = []
    first = 0
    for r in range(4):  # even rows fit a hole (a contiguous run), odd rows need 3+ blocks (scattered)
        length = int(torch.randint(8, 20, (1,), generator=gen)) if r % 2 else \
            int(torch.randint(0, 6, (1,), generator=gen))
        c = int(torch.randint(1 if length else 2, 3 if r % 2 == 0 else 7, (1,), generator=gen))
        row = pool.admit(length + c)
        pool.lengths[row] = length
        parents = random_tree_parents(c, seed=seed * 10 + r)
        if length == 0:  # a prompt: causal
            parents = [-1] + list(range(c - 1))
        tree = DraftTree.from_lists(list(range(c)), parents)
        mask = None if c == 1 or length == 0 else tree_mask(tree.visibility()[0], length, groups, torch.float32)
        start = pool.run(row)
        index = None if start is not None else torch.tensor(pool.physical(row, 0, length + c))
        reads.append(RowRead(first=first, count=c, width=length + c, start=start, index=index, mask=mask,
                             causal=length == 0))
        rows.append((length, c, parents))
        first += c
    assert any(read.start is None for read in reads) and any(read.start is not None for read in reads)
    q = torch.randn(first, hkv * groups, d, generator=gen)
    keys, values = pool.layer(0)
    got = paged_attention(q, keys, values, reads, groups, d**-0.5, eager=eager)
    assert torch.allclose(got, dense_reference(q, keys, values, pool, rows, groups), atol=1e-5)
