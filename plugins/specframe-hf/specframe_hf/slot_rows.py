"""`SlotRows`: the decode loop's rows over the paged KV pool, run by the lean decoder forward.

The engine path of the ``hf`` adapter for the Llama family (:mod:`specframe_hf.decoder` says which models take it;
others use :class:`specframe_hf.rows.HFRows` over transformers' own forward). Per round, for ``B`` rows of lengths
``lengths[b]`` and a tree of ``N`` nodes per row::

    forward_tree(tree [B, N]):  node j of row b is written at its logical slot lengths[b] + j (a physical slot
                                through the row's block table, specframe_hf.kv_pool), at position
                                lengths[b] + depth; each row attends over its own lengths[b] + c_b slots, masked
                                only in its tree block (specframe_hf.paged_attention); rows that run fewer nodes
                                than N (selective batching) run only those
    commit(tree, accepted, paths): the accepted entries move within each row's blocks (a chain: none move); the
                                host paths come from the round's one device-to-host read, so commit reads nothing

A row's whole reservation (its prompt, the loop's token cap and one tree) is taken from the pool when it joins
(:meth:`SlotRows.room` tells the decode loop whether it fits now, later or never), so rounds never allocate cache
memory; a departure frees blocks and copies nothing. ``cache.allocations`` counts allocations of the pool. A single
request is one row. A prompt longer than ``prefill_chunk`` joins in chunks between rounds (:meth:`SlotRows.begin_row`,
:mod:`specframe_hf.chunked_prefill`): its blocks are reserved at once, it becomes a row after its last chunk.

Example (a pool of 16-slot blocks, two rows)::

    rows.add_row(prompt_a [1, 20], capacity=60)   # 4 blocks, prefilled: length 20
    rows.add_row(prompt_b [1, 7], capacity=40)    # 3 blocks: length 7
    rows.forward_tree(tree [2, 4])                # T = 8 tokens, row 0 over 24 slots, row 1 over 11
    rows.commit(tree, accepted, [[0, 2], [0]])    # lengths [22, 8]; row 0's node 2 moved to slot 21
    rows.keep_rows([1])                           # row 0's 4 blocks are free again; nothing copied
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from specframe.errors import ContractError, GenerationError
from specframe.tree import DraftTree
from specframe.types import TargetOutput
from specframe_hf.captured import LADDER, BucketedVerify, bucket
from specframe_hf.chunked_prefill import ChunkedPrefill
from specframe_hf.decoder import DecoderForward
from specframe_hf.kv_pool import KVPool
from specframe_hf.paged_attention import RowRead, tree_mask
from specframe_hf.runner import ModelRunner

#: Slots reserved beyond a prompt when the caller does not say how many tokens the row will decode.
DEFAULT_ROOM = 256
#: Prompt tokens per forward of a joining row's chunked prefill (the ``prefill_chunk`` option's default).
PREFILL_CHUNK = 512


class SlotRows:
    """See the module docstring. ``taps`` are returned with every forward's output; ``kv_memory``: the pool's
    budget in bytes (None: sized from the capacities the decode loop announces, :meth:`plan`); ``bucketed``:
    verify rounds run at bucketed shapes through it (compiled once per bucket; :mod:`specframe_hf.captured`),
    None: the per-row forward; ``prefill_chunk``: the decode loop prefills a joining prompt longer than this in
    chunks of this many tokens, one per decode round (:meth:`begin_row`, :mod:`specframe_hf.chunked_prefill`)."""

    def __init__(self, runner: ModelRunner, taps: Sequence[int] = (), *,
                 compiled: DecoderForward | None = None, kv_memory: int | None = None,
                 bucketed: BucketedVerify | None = None, prefill_chunk: int = PREFILL_CHUNK) -> None:
        if prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be at least 1, got {prefill_chunk}")
        self.prefill_chunk = prefill_chunk
        self._joining: list[ChunkedPrefill] = []  # prompts being prefilled in chunks, their blocks reserved
        self.runner = runner
        self.decoder = compiled or DecoderForward(runner.model)  # a torch.compile'd forward when the target has one
        self.vocab_size = runner.vocab_size
        self.max_length = runner.max_length
        self.device = runner.device
        self.taps = runner.taps.check(taps)
        self.kv_memory = kv_memory
        layers, heads, dim = int(runner.model.config.num_hidden_layers), self.decoder.num_kv_heads, \
            self.decoder.head_dim
        self.cache = KVPool(layers, heads, dim, runner.dtype, runner.device) if kv_memory is None else \
            KVPool.for_memory(kv_memory, layers, heads, dim, runner.dtype, runner.device)
        if bucketed is not None and (bucketed.block_size != self.cache.block_size or bucketed.taps != self.taps):
            raise ValueError("a bucketed forward serves rows of its own block size and taps")
        self.bucketed = bucketed
        if bucketed is not None and self.cache.fixed:
            self.cache.take_scratch()  # the budget's first block: admissions then see only what rows can use
        self._pending = 0  # nodes of the tree run but not yet committed
        #: Rows that decode plainly in a round with tree rows cost one token each (:func:`packing`).
        self.selective_batching = bucketed is None
        self.forward_tokens = 0  # tokens the last forward_tree ran through the token-wise layers

    def close(self) -> None:
        for job in list(self._joining):
            job.cancel()
        self.cache.clear()
        self._pending = 0

    @property
    def lengths(self) -> list[int]:
        return list(self.cache.lengths)

    @property
    def batch_size(self) -> int:
        return self.cache.rows

    @property
    def node_buckets(self) -> tuple[int, ...] | None:
        """Draft node counts (root excluded) a row may verify so the round fills a capture bucket exactly: a tree of
        k nodes runs at N = k + 1 padded to a power of two (:data:`specframe_hf.captured.LADDER`), so k = 1, 3, 7,
        15, ... waste no padding; ``budget: auto`` rounds its per-row counts down to these. None without capture
        (every count runs at its exact shape)."""
        return None if self.bucketed is None else tuple(n - 1 for n in LADDER if n > 1)

    @property
    def kv_allocations(self) -> int:
        """Allocations of the KV pool so far (:class:`specframe.testing.counters.RoundCounters` reads it)."""
        return self.cache.allocations

    # ---------------------------------------------------------------------------------- admission
    def _slots(self, length: int, capacity: int | None) -> int:
        """Slots a row of ``length`` prompt tokens reserves for ``capacity`` positions in all."""
        slots = max(length + 1, capacity if capacity is not None else length + DEFAULT_ROOM)
        return min(slots, self.max_length + 1) if self.max_length is not None else slots

    def plan(self, capacities: Sequence[int]) -> None:
        """The decode loop's announcement: at most rows of these capacities are in flight together. A pool without
        a ``kv_memory`` budget is sized for them once, before the first admission."""
        self.cache.plan([self._slots(1, c) for c in capacities], scratch=self.bucketed is not None)

    def room(self, capacity: int) -> bool | GenerationError:
        """Whether a request of ``capacity`` positions (prompt, decoded tokens, one tree) can join now (True),
        after some rows leave (False), or never: the error that refuses it."""
        slots = self._slots(1, capacity)
        if self.cache.fits(slots):
            return True
        if self.cache.ever_fits(slots):
            return False
        need = slots * self.cache.bytes_per_slot
        have = (self.cache.total_blocks - (self.cache.scratch is not None)) * self.cache.block_size
        return GenerationError(
            f"the request needs {slots} KV slots ({need / 2**20:.1f} MiB: its prompt, max_new_tokens and one tree) "
            f"but target.kv_memory holds {have} slots in all",
            hint=f"raise target.kv_memory to at least {-(-need // 2**20)} MiB (e.g. '{-(-need // 2**30)}GiB'), or "
                 "lower max_new_tokens or shorten the prompt")

    # ---------------------------------------------------------------------------------- rows in / out
    def add_row(self, input_ids: torch.Tensor, capacity: int | None = None) -> TargetOutput:
        """Prefill ``input_ids`` ``[R, P]`` (usually R = 1) alone and append the rows; ``capacity``: slots the row
        needs in all (prompt, decoded tokens and one tree; default: the prompt plus ``DEFAULT_ROOM``). Logits
        ``[R, 1, V]`` float32 at the last position, taps ``[R, P, n_taps * H]``. A pool without room raises
        `GenerationError` (the decode loop asks :meth:`room` first)."""
        length = self.runner.check_prompt_ids(input_ids)
        count = int(input_ids.shape[0])
        self._pending = 0
        slots = self._slots(length, capacity)
        first = self.cache.rows
        try:
            if not self.cache.fits(slots, rows=count):
                room = self.room(slots)
                raise room if isinstance(room, GenerationError) else GenerationError(
                    f"the KV pool has no room for a row of {slots} slots now",
                    hint="admit it after other rows leave, or raise target.kv_memory")
            if self.bucketed is not None:
                self.cache.take_scratch()  # before the row's blocks: rounds then allocate nothing
            rows = [self.cache.admit(slots) for _ in range(count)]
            physical = [p for r in rows for p in self.cache.physical(r, 0, length)]
            slot_t = torch.tensor(physical, dtype=torch.long, device=self.device)  # [R * P], the one copy
            reads = []
            for i, r in enumerate(rows):  # a scattered row reads its prompt back through the slots it wrote
                start = self.cache.run(r)
                reads.append(RowRead(first=i * length, count=length, width=length, start=start, causal=True,
                                     index=None if start is not None else slot_t[i * length : (i + 1) * length],
                                     mask=None))
            ids = input_ids.to(self.device).reshape(-1)
            positions = torch.arange(length, device=self.device).repeat(count)
            last = torch.arange(count, device=self.device) * length + length - 1
            kv = [self.cache.layer(i) for i in range(self.cache.layers)]
            with torch.inference_mode():
                logits, hidden = self.decoder.forward(ids, positions, kv, slot_t, reads, last, taps=self.taps)
        except BaseException:
            self.cache.keep_rows(range(first))  # a failed prefill leaves nothing behind
            raise
        for r in rows:
            self.cache.lengths[r] = length
        hidden = None if hidden is None else hidden.view(count, length, -1)
        return TargetOutput(logits=logits.view(count, 1, -1), hidden=hidden)

    def begin_row(self, input_ids: torch.Tensor, capacity: int | None = None) -> ChunkedPrefill:
        """Reserve a joining row's blocks for ``input_ids`` ``[1, P]`` (``capacity`` as :meth:`add_row`) and return
        the chunked prefill that fills them, ``prefill_chunk`` tokens per :meth:`ChunkedPrefill.step`; the row is
        appended after its last chunk. Raises `GenerationError` like :meth:`add_row` when the pool has no room."""
        length = self.runner.check_prompt_ids(input_ids)
        if int(input_ids.shape[0]) != 1:
            raise ValueError(f"begin_row prefills one prompt, got {int(input_ids.shape[0])}")
        slots = self._slots(length, capacity)
        if not self.cache.fits(slots):
            room = self.room(slots)
            raise room if isinstance(room, GenerationError) else GenerationError(
                f"the KV pool has no room for a row of {slots} slots now",
                hint="admit it after other rows leave, or raise target.kv_memory")
        if self.bucketed is not None:
            self.cache.take_scratch()  # before the row's blocks, as add_row
        job = ChunkedPrefill(self, input_ids, self.cache.reserve(slots), self.prefill_chunk)
        self._joining.append(job)
        return job

    def joined(self, job: ChunkedPrefill) -> None:
        """``job`` finished or was cancelled: it no longer holds a reservation outside the rows."""
        self._joining.remove(job)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (in this order); the others leave and their blocks are free again."""
        self._pending = 0
        self.cache.keep_rows(rows)

    # ------------------------------------------------------------------------------------- rounds
    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Logits ``[B, N, V]`` float32 after each node of each row's tree; nothing is committed."""
        if not self.cache.rows:
            raise GenerationError("forward_tree was called before prefill", hint="prefill the prompt first")
        if tree.batch_size != self.cache.rows:
            raise GenerationError(f"the tree has {tree.batch_size} rows but the cache holds {self.cache.rows}",
                                  hint="keep one tree row per prefilled sequence")
        tree = tree.to(self.device)
        b, n = tree.batch_size, tree.capacity
        lengths = self.cache.lengths
        longest = max(lengths)
        if self.max_length is not None and longest + n - 1 >= self.max_length \
                and longest + tree.max_depth >= self.max_length:
            raise GenerationError(
                f"a tree of depth {tree.max_depth} on {longest} cached tokens runs past the "
                f"{self.runner.model_type} target's context of {self.max_length}",
                hint="trim the tree to the remaining context (the pipeline does this automatically)")
        for r, length in enumerate(lengths):  # rows admitted with their reservation never need more
            try:
                self.cache.extend(r, length + n)
            except MemoryError as exc:
                raise GenerationError(f"row {r} outgrew its KV reservation and the pool is full ({exc})",
                                      hint="pass each row's capacity to add_row, or raise target.kv_memory") \
                    from None
        if self.bucketed is not None:
            return self._forward_bucketed(tree)
        packed = packing(tree.row_nodes, n, self.device)
        counts = row_counts(tree.row_nodes, n) if packed is not None and tree.row_nodes is not None else [n] * b
        visible = tree.visibility() if n > 1 else None  # [B, N, N] bool, ancestor-or-self
        # One host-to-device copy per round: the new entries' physical slots [T], the lengths [B], and the
        # gather index of each row whose blocks are not one contiguous run.
        physical: list[int] = []
        gathers: list[int] = []
        starts = [self.cache.run(r) for r in range(b)]
        for r, (length, c) in enumerate(zip(lengths, counts, strict=True)):
            physical += self.cache.physical(r, length, c)
            if starts[r] is None:
                gathers += self.cache.tables[r]
        t = len(physical)
        host = torch.tensor(physical + lengths + gathers, dtype=torch.long, device=self.device)
        slot_t, length_t = host[:t], host[t : t + b]  # [T], [B]
        reads, first, offset = [], 0, t + b
        size = self.cache.block_size
        span = torch.arange(size, device=self.device)  # [S]
        for r, (length, c) in enumerate(zip(lengths, counts, strict=True)):
            mask = None if c == 1 or visible is None else \
                tree_mask(visible[r, :c, :c], length, self.decoder.groups, self.runner.dtype)
            index = None
            if starts[r] is None:  # the row's slots from its block table, on the device
                table = host[offset : offset + len(self.cache.tables[r])]
                offset += len(table)
                index = (table[:, None] * size + span).reshape(-1)[: length + c]
            reads.append(RowRead(first=first, count=c, width=length + c, start=starts[r], index=index, mask=mask))
            first += c
        positions = tree.depth + length_t[:, None]  # [B, N]
        if packed is None:
            ids, flat_positions = tree.tokens.reshape(-1), positions.reshape(-1)
        else:
            ids, flat_positions = tree.tokens.reshape(-1)[packed], positions.reshape(-1)[packed]
        self.forward_tokens = first
        kv = [self.cache.layer(i) for i in range(self.cache.layers)]
        with torch.inference_mode():
            logits, hidden = self.decoder.forward(ids, flat_positions, kv, slot_t, reads, None, taps=self.taps)
        if packed is None:
            logits = logits.view(b, n, -1)
            hidden = None if hidden is None else hidden.view(b, n, -1)
        else:  # padding positions: zeros, which no verifier reads
            logits = logits.new_zeros(b * n, logits.shape[-1]).index_copy_(0, packed, logits).view(b, n, -1)
            if hidden is not None:
                hidden = hidden.new_zeros(b * n, hidden.shape[-1]).index_copy_(0, packed, hidden).view(b, n, -1)
        self._pending = n
        return TargetOutput(logits=logits, hidden=hidden)

    def _forward_bucketed(self, tree: DraftTree) -> TargetOutput:
        """The round padded to its bucket and run by the captured forward (:mod:`specframe_hf.captured`)."""
        assert self.bucketed is not None
        b, n = tree.batch_size, tree.capacity
        lengths = self.cache.lengths
        rb, nb = bucket(b), bucket(n)
        mb = bucket(max(len(t) for t in self.cache.tables))
        size = self.cache.block_size
        scratch = self.cache.take_scratch()
        pad_slot = scratch * size
        # One host-to-device copy: write slots [Rb, Nb], block tables [Rb, Mb], lengths [Rb].
        slots: list[int] = []
        tables: list[int] = []
        for r in range(rb):
            if r < b:
                slots += self.cache.physical(r, lengths[r], n) + [pad_slot] * (nb - n)
                tables += self.cache.tables[r] + [scratch] * (mb - len(self.cache.tables[r]))
            else:
                slots += [pad_slot] * nb
                tables += [scratch] * mb
        host = torch.tensor(slots + tables + lengths + [0] * (rb - b), dtype=torch.long, device=self.device)
        slot_t = host[: rb * nb].view(rb, nb)
        table_t = host[rb * nb : rb * nb + rb * mb].view(rb, mb)
        length_t = host[rb * nb + rb * mb :]  # [Rb]
        ids = torch.zeros(rb, nb, dtype=torch.long, device=self.device)
        ids[:b, :n] = tree.tokens
        positions = torch.zeros(rb, nb, dtype=torch.long, device=self.device)
        positions[:b, :n] = tree.depth + length_t[:b, None]
        visible = torch.eye(nb, dtype=torch.bool, device=self.device).repeat(rb, 1, 1)  # [Rb, Nb, Nb]
        visible[:b, :n, :n] = tree.visibility()
        kv = [self.cache.layer(i) for i in range(self.cache.layers)]
        self.bucketed.shapes.add((rb, nb, mb))
        self.forward_tokens = rb * nb
        with torch.inference_mode():
            logits, hidden = self.bucketed.step(ids, positions, kv, slot_t, table_t, length_t, visible)
        self._pending = n
        return TargetOutput(logits=logits[:b, :n], hidden=None if hidden is None else hidden[:b, :n])

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor,
               paths: Sequence[Sequence[int]] | None = None) -> None:
        """Per row, keep the entries of the accepted path: ``paths[b]`` (host node indices, root first) when the
        caller read them already, else ``accepted_nodes`` ``[B, D + 1]`` (root first, increasing, -1 padded), read
        and checked here."""
        if self._pending == 0:
            raise GenerationError("commit was called without a pending forward_tree",
                                  hint="call forward_tree(tree) and then commit(tree, accepted_nodes)")
        if tree.capacity != self._pending:
            raise GenerationError(f"commit got a tree of {tree.capacity} nodes but the last forward_tree ran "
                                  f"{self._pending}", hint="commit the tree that was just verified")
        if paths is None:
            paths = read_paths(accepted_nodes, self.cache.rows, self._pending)
        elif len(paths) != self.cache.rows:
            raise ContractError(f"commit got {len(paths)} paths for {self.cache.rows} rows", stage="verifier")
        with torch.inference_mode():
            self.cache.commit(paths)
        self._pending = 0


#: Selective batching pays when at least this share of a round's [B, N] positions is padding.
PACK_WHEN_PADDING = 0.25


def packing(row_nodes: Sequence[int] | None, n: int, device: torch.device) -> torch.Tensor | None:  # [T] int64
    """The flat indices of the positions that can hold nodes, when skipping the rest saves enough
    (the forward then runs those tokens only); None: run the padded batch as it is.

    Example: ``row_nodes = (3, 1, 1)``, ``n = 3`` -> ``[0, 1, 2, 3, 6]`` (5 of 9 positions)."""
    if row_nodes is None or len(row_nodes) < 2:
        return None
    counts = row_counts(row_nodes, n)
    if sum(counts) > (1 - PACK_WHEN_PADDING) * len(row_nodes) * n:
        return None
    index = [b * n + j for b, c in enumerate(counts) for j in range(c)]
    return torch.tensor(index, dtype=torch.long, device=device)


def row_counts(row_nodes: Sequence[int], n: int) -> list[int]:
    """Nodes each row runs when padding is skipped: its own count, at least the root, at most ``n``."""
    return [min(max(int(c), 1), n) for c in row_nodes]


def read_paths(accepted_nodes: torch.Tensor, rows: int, nodes: int) -> list[list[int]]:
    """Each row's accepted path as host lists (one read), checked: root first, increasing, inside the tree."""
    if accepted_nodes.dim() != 2 or accepted_nodes.shape[0] != rows:
        raise ContractError(f"accepted_nodes has shape {tuple(accepted_nodes.shape)}, expected [{rows}, D + 1]",
                            stage="verifier")
    paths = []
    for row in accepted_nodes.tolist():
        count = sum(1 for v in row if v >= 0)
        path = row[:count]
        if not check_path(path, row[count:], nodes):
            raise ContractError(f"accepted_nodes {accepted_nodes.tolist()} is not a root-first path of the tree "
                                "in every row (it must start with node 0, increase, stay inside the tree and be "
                                "padded with -1 at the end)", stage="verifier")
        paths.append(path)
    return paths


def check_path(path: Sequence[int], padding: Sequence[int], nodes: int) -> bool:
    """A root-first, increasing path of nodes below ``nodes``, followed by -1 padding only."""
    return bool(path) and path[0] == 0 and all(a < b for a, b in itertools.pairwise(path)) \
        and path[-1] < nodes and all(v == -1 for v in padding)
