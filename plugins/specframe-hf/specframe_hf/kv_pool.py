"""`KVPool`: the lean engine's key/value memory, a pool of fixed-size blocks reserved once, with a block table per row.

Storage: one tensor ``[L, 2, H_kv, NB * S, D]`` (layer, key/value, head, physical slot, head dim) holding ``NB``
blocks of ``S`` slots (``block_size``, 16 by default). Block ``k`` is the physical slots ``[k * S, (k + 1) * S)``.
Row ``b`` owns the blocks of its table ``tables[b]``; its logical slot ``i`` (= its position ``i``) lives at::

    physical(b, i) = tables[b][i // S] * S + i % S

Committed positions are the logical slots ``[0, lengths[b])``; a round writes its ``N`` tree entries at the
logical slots ``[lengths[b], lengths[b] + N)`` (the slot layout the lean forward reads, :mod:`specframe_hf.decoder`).

Life of a row (vLLM's KV-cache space, reserved up front the way a single-process engine can afford):

* **admission** (:meth:`admit`) takes the blocks of the row's whole reservation (prompt, decoded tokens, one tree)
  from the free list, a contiguous run of blocks when one is free (first fit), so that the lean forward reads the
  row as a view; else any free blocks (the forward then gathers the row through its table). :meth:`fits` says
  whether a reservation fits now, :meth:`ever_fits` whether it fits in an empty pool: the decode loop admits a
  request only when it fits, waits for departures when it does not, and refuses one that never can, so no round
  runs out of memory mid-batch. A prompt prefilled in chunks (:mod:`specframe_hf.chunked_prefill`) takes its blocks
  the same way (:meth:`reserve`) but becomes a row only after its last chunk (:meth:`attach`; :meth:`release`
  gives them back if it never does), so rounds of the rows in flight never see it;
* **rounds** allocate nothing: writes and reads index the pool through the tables;
* **commit** (:meth:`commit`) moves only the accepted nodes' entries, within the row's own blocks, in one indexed
  copy for every layer and row (a chain moves nothing);
* **departure** (:meth:`keep_rows`) returns the departing rows' blocks to the free list; no byte of the pool is
  read or written, so nothing of the other rows is copied.

Worked example (``S = 4``, 6 blocks; row 0 reserves 10 slots, row 1 reserves 6 slots)::

    admit(10) -> tables [[0, 1, 2]]            free [3, 4, 5]      (row 0 is the contiguous run of slots 0..11)
    admit(6)  -> tables [[0, 1, 2], [3, 4]]    free [5]
    row 1 at length 5 runs a tree of 3 nodes: logical slots 5, 6, 7 -> physical 17, 18, 19 (its second block,
                                               block 4 = physical 16..19)
    commit path [0, 2] -> node 2 (physical 19) moves to logical 6 (physical 18); length 7
    keep_rows([1])      -> tables [[3, 4]]     free [0, 1, 2, 5]   (nothing copied)
    admit(12) -> blocks 0, 1, 2 form a free run of 3: tables [[3, 4], [0, 1, 2]]

Budget: ``blocks`` fixed at construction (:meth:`for_memory` sizes it from bytes, the ``kv_memory`` option) and
the pool never grows; ``blocks=None`` (no budget set) sizes the pool on first use from the capacities the decode
loop announces (:meth:`plan`) and grows it, at admission only, when a row does not fit. ``allocations`` counts
every allocation of the storage, ``moved_bytes`` the bytes commits have copied, for tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: Slots per block (vLLM's CPU backend uses 16 or more; a tree's commit moves within a row's blocks).
BLOCK_SIZE = 16


class KVPool:
    """See the module docstring."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device, *,
                 blocks: int | None = None, block_size: int = BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1, got {block_size}")
        self.layers, self.kv_heads, self.head_dim = layers, kv_heads, head_dim
        self.dtype, self.device = dtype, torch.device(device)
        self.block_size = block_size
        self.fixed = blocks is not None  # a budget was set: the pool never grows
        self.buffer: torch.Tensor | None = None  # [L, 2, H_kv, NB * S, D]
        self.tables: list[list[int]] = []  # block ids per row, logical order
        self.lengths: list[int] = []  # committed positions per row
        self.runs: list[int | None] = []  # per row, the physical slot of its slot 0 when its blocks are contiguous
        self.free: list[int] = []  # free block ids, ascending
        self.scratch: int | None = None  # a block no row owns, for the padding of bucketed forwards
        self.allocations = 0
        self.moved_bytes = 0
        if blocks is not None:
            if blocks < 1:
                raise ValueError(f"a KV pool needs at least one block, got {blocks}")
            self._allocate(blocks)

    @classmethod
    def for_memory(cls, memory: int, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype,
                   device: torch.device, *, block_size: int = BLOCK_SIZE) -> KVPool:
        """A fixed pool of as many blocks as ``memory`` bytes hold (at least one)."""
        per_block = 2 * layers * kv_heads * head_dim * block_size * torch.empty((), dtype=dtype).element_size()
        return cls(layers, kv_heads, head_dim, dtype, device, blocks=max(1, memory // per_block),
                   block_size=block_size)

    # ----------------------------------------------------------------------------------- sizes
    @property
    def rows(self) -> int:
        return len(self.lengths)

    @property
    def total_blocks(self) -> int:
        return 0 if self.buffer is None else int(self.buffer.shape[3]) // self.block_size

    @property
    def capacity(self) -> int:
        """Slots reserved by the row with the largest reservation (0 without rows)."""
        return max((len(t) for t in self.tables), default=0) * self.block_size

    @property
    def bytes_per_slot(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * torch.empty((), dtype=self.dtype).element_size()

    def blocks_for(self, slots: int) -> int:
        return -(-max(int(slots), 1) // self.block_size)

    def fits(self, slots: int, rows: int = 1) -> bool:
        """Whether ``rows`` rows reserving ``slots`` each can be admitted now (a growable pool always can)."""
        return not self.fixed or rows * self.blocks_for(slots) <= len(self.free)

    def ever_fits(self, slots: int) -> bool:
        """Whether a row reserving ``slots`` fits in this pool once every other row has left (the scratch block
        is no row's)."""
        return not self.fixed or self.blocks_for(slots) <= self.total_blocks - (self.scratch is not None)

    # ----------------------------------------------------------------------------------- rows in / out
    def plan(self, reservations: Sequence[int], scratch: bool = False) -> None:
        """Size a growable pool for rows of these reservations in flight together, and the scratch block with
        ``scratch`` (no-op on a fixed pool, or when the pool holds them already)."""
        if self.fixed:
            return
        need = sum(self.blocks_for(s) for s in reservations) + (scratch and self.scratch is None)
        used = self.total_blocks - len(self.free)
        if need > len(self.free):
            self._grow(used + need)

    def admit(self, slots: int) -> int:
        """Append a row reserving ``slots`` logical slots (length 0); returns its row index. A fixed pool that
        lacks the blocks raises `MemoryError` (callers ask :meth:`fits` first); a growable pool grows."""
        return self.attach(self.reserve(slots), 0)

    def reserve(self, slots: int) -> list[int]:
        """Take the blocks of a reservation of ``slots`` logical slots for a row not yet among the rows (a prompt
        prefilled in chunks, :class:`specframe_hf.slot_rows.ChunkedPrefill`); :meth:`attach` makes it a row,
        :meth:`release` gives the blocks back. Raises like :meth:`admit`."""
        count = self.blocks_for(slots)
        if count > len(self.free):
            if self.fixed:
                raise MemoryError(f"the KV pool has {len(self.free)} free blocks of {self.total_blocks}; "
                                  f"a row of {slots} slots needs {count}")
            self._grow(self.total_blocks - len(self.free) + count)
        return self._take(count)

    def attach(self, table: list[int], length: int) -> int:
        """Append a row owning the reserved blocks ``table`` with ``length`` committed slots; its row index."""
        self.tables.append(table)
        self.runs.append(self._run_of(table))
        self.lengths.append(length)
        return self.rows - 1

    def release(self, table: list[int]) -> None:
        """Return the blocks of a reservation that never became a row to the free list."""
        self.free = sorted(self.free + table)

    def extend(self, row: int, slots: int) -> None:
        """Make row ``row`` hold at least ``slots`` logical slots (a round past the row's reservation: only rows
        admitted without one). Raises `MemoryError` on a full fixed pool."""
        count = self.blocks_for(slots) - len(self.tables[row])
        if count <= 0:
            return
        if count > len(self.free):
            if self.fixed:
                raise MemoryError(f"the KV pool has {len(self.free)} free blocks; row {row} needs {count} more")
            self._grow(self.total_blocks - len(self.free) + count)
        self.tables[row] += self._take(count)
        self.runs[row] = self._run_of(self.tables[row])

    def take_scratch(self) -> int:
        """The scratch block (taken from the free blocks on first use, at admission): where a bucketed forward
        writes its padding entries (:mod:`specframe_hf.captured`)."""
        if self.scratch is None:
            if not self.free:
                if self.fixed:
                    raise MemoryError("the KV pool has no free block for the scratch block")
                self._grow(self.total_blocks + 1)
            self.scratch = self._take(1)[0]
        return self.scratch

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows``, in this order; the others' blocks return to the free list (nothing is copied)."""
        rows = list(rows)
        kept = set(rows)
        for r in range(self.rows):
            if r not in kept:
                self.free += self.tables[r]
        self.free.sort()
        self.tables = [self.tables[r] for r in rows]
        self.runs = [self.runs[r] for r in rows]
        self.lengths = [self.lengths[r] for r in rows]

    def clear(self) -> None:
        """Forget every row (the storage is kept for the next requests)."""
        self.keep_rows([])

    # ----------------------------------------------------------------------------------- addressing
    def run(self, row: int) -> int | None:
        """The physical slot of row ``row``'s logical slot 0 when its blocks are one contiguous run, else None."""
        return self.runs[row]

    def _run_of(self, table: list[int]) -> int | None:
        first = table[0]
        return first * self.block_size if table == list(range(first, first + len(table))) else None

    def run_of(self, table: list[int]) -> int | None:
        """:meth:`run` of a reservation ``table`` (a row's or one not yet attached)."""
        return self._run_of(table)

    def physical(self, row: int, start: int, count: int) -> list[int]:
        """The physical slots of row ``row``'s logical slots ``[start, start + count)``."""
        return self.slots_of(self.tables[row], start, count)

    def slots_of(self, table: list[int], start: int, count: int) -> list[int]:
        """The physical slots of logical slots ``[start, start + count)`` through the block table ``table``."""
        s = self.block_size
        return [table[i // s] * s + i % s for i in range(start, start + count)]

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``i``'s key and value storage ``[H_kv, NB * S, D]`` (views)."""
        assert self.buffer is not None, "admit a row first"
        return self.buffer[i, 0], self.buffer[i, 1]

    def read(self, row: int, count: int) -> torch.Tensor:
        """Row ``row``'s entries at its logical slots ``[0, count)``, every layer: ``[L, 2, H_kv, count, D]`` (a
        copy; for tests and inspection)."""
        assert self.buffer is not None, "admit a row first"
        index = torch.tensor(self.physical(row, 0, count), dtype=torch.long, device=self.device)
        return self.buffer.index_select(3, index)

    # ----------------------------------------------------------------------------------- commit
    def commit(self, paths: Sequence[Sequence[int]]) -> None:
        """Keep each row's accepted path ``paths[b]`` (node indices, root first) of the round just written:
        node ``p_i`` (logical slot ``lengths[b] + p_i``) moves to logical slot ``lengths[b] + i`` when
        ``p_i != i``. Every source is at or after its destination and sources are read before anything is
        written (advanced indexing copies), so the move is exact."""
        src: list[int] = []
        dst: list[int] = []
        for b, path in enumerate(paths):
            base = self.lengths[b]
            for i, node in enumerate(path):
                if node != i:
                    src += self.physical(b, base + node, 1)
                    dst += self.physical(b, base + i, 1)
        if src:
            assert self.buffer is not None
            moves = torch.tensor(src + dst, dtype=torch.long, device=self.device)  # one host-to-device copy
            s, d = moves[: len(src)], moves[len(src) :]
            self.buffer[:, :, :, d] = self.buffer[:, :, :, s]
            self.moved_bytes += len(src) * self.bytes_per_slot
        self.lengths = [n + len(p) for n, p in zip(self.lengths, paths, strict=True)]

    # ----------------------------------------------------------------------------------- storage
    def _take(self, count: int) -> list[int]:
        """``count`` free blocks: the first contiguous run of that length when there is one, else the lowest."""
        free = self.free
        start = 0
        for i in range(1, len(free) + 1):
            if i == len(free) or free[i] != free[i - 1] + 1:  # free[start:i] is a run
                if i - start >= count:
                    taken = free[start : start + count]
                    del free[start : start + count]
                    return taken
                start = i
        taken = free[:count]
        del free[:count]
        return taken

    def _allocate(self, blocks: int) -> None:
        self.buffer = torch.zeros(self.layers, 2, self.kv_heads, blocks * self.block_size, self.head_dim,
                                  dtype=self.dtype, device=self.device)
        self.free = list(range(blocks))
        self.allocations += 1

    def _grow(self, blocks: int) -> None:
        """A growable pool holds at least ``blocks`` blocks after this (at least 1.5x the old size, so a series of
        admissions reallocates O(log) times); rows keep their blocks, so their tables stay valid."""
        old = self.buffer
        have = self.total_blocks
        if old is None:
            self._allocate(blocks)
            return
        new = max(blocks, have + have // 2)
        fresh = torch.zeros(self.layers, 2, self.kv_heads, new * self.block_size, self.head_dim, dtype=self.dtype,
                            device=self.device)
        fresh[:, :, :, : have * self.block_size] = old
        self.buffer = fresh
        self.free = sorted(self.free + list(range(have, new)))
        self.allocations += 1
