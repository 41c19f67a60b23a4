"""`DraftTree`: the one tree type every builder returns and every verifier and target consumes.

Layout (batch-first, fixed capacity N per batch row):

* node 0 is the root (the last committed token, not yet in the target's cache);
* nodes are topologically ordered: ``parent[i] < i`` for every valid non-root node;
* valid nodes form a contiguous prefix ``0 .. num_nodes - 1``; padding has ``parent = -1``, ``valid = False``.

Worked example (one row)::

    root(7) ─┬─ a(3) ── c(9)        tokens = [7, 3, 5, 9]
             └─ b(5)                parent = [-1, 0, 0, 1]
                                    depth  = [0, 1, 1, 2]

    ancestor_mask (row i sees j) = [[1,0,0,0],
                                    [1,1,0,0],
                                    [1,0,1,0],
                                    [1,1,0,1]]
    first_child  = [1, 3, -1, -1]   next_sibling = [-1, 2, -1, -1]
    leaf_paths   = [[0, 2, -1], [0, 1, 3]]
    positions(base_len=10) = [10, 11, 11, 12]

Derived views (ancestor mask, positions, left-child/right-sibling arrays, root-to-leaf paths) are computed
from ``parent`` and ``depth``; they are never stored, so they cannot disagree with the tree.

Draft laws at their own size: a sampled tree records the law each node's children were drawn from as
*candidate laws* ``child_ids`` / ``child_probs`` ``[B, N, K]``: the K candidate token ids and their
probabilities, q being zero off them. Nothing of the vocabulary's size is stored, so selecting rows, cutting
subtrees and merging a round's rows copy ``K`` values per node, not ``V``. ``child_q`` is the dense view
``[B, N, V]`` (built when read; for tests and checks), and a dense law handed to the constructor as ``child_q=``
is kept as a candidate law whose candidates are the whole vocabulary. Example (V = 4, K = 2)::

    child_ids   = [[[2, 0]]]            child_probs = [[[0.7, 0.3]]]
    child_q     = [[[0.3, 0, 0.7, 0]]]  (zeros, then each candidate's probability added at its id)

A candidate listed twice carries its probability once (the other copies 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch


@dataclass(frozen=True, init=False)
class DraftTree:
    """A batch of draft trees. See the module docstring for the layout and an example.

    The constructor takes the fields below, and ``child_q=``, a dense law ``[B, N, V]`` that replaces
    ``child_ids`` / ``child_probs`` (its candidates are the whole vocabulary).
    """

    tokens: torch.Tensor  # [B, N] int64, token id of each node (node 0 = root)
    parent: torch.Tensor  # [B, N] int64, parent index, -1 for the root and padding
    depth: torch.Tensor  # [B, N] int64, 0 for the root
    logq: torch.Tensor  # [B, N] float32, the node's own draft log-prob given its parent (0 at the root)
    score: torch.Tensor  # [B, N] float32, path score the builder ranked the node by (0 at the root)
    valid: torch.Tensor  # [B, N] bool, contiguous prefix of True per row
    #: The law each node's children were sampled from (sampled trees; None for deterministic ones), as candidate
    #: token ids and their probabilities; q is zero off the candidates (see the module docstring).
    child_ids: torch.Tensor | None = None  # [B, N, K] int64
    child_probs: torch.Tensor | None = None  # [B, N, K] float32 (float64 from a float64 corrector)
    #: V, the length of the dense view :attr:`child_q` (None without laws).
    child_vocab: int | None = field(default=None, compare=False)
    #: Host-side upper bounds on the deepest node and on the children of any node, when the builder knows them
    #: (None: unknown). Verifiers size their loops by them instead of reading the tree back to the host.
    depth_bound: int | None = field(default=None, compare=False)
    width_bound: int | None = field(default=None, compare=False)
    #: Per row, a host-side bound on its nodes: row ``b``'s valid nodes lie in its first ``row_nodes[b]`` slots
    #: (None: the whole capacity). The decode loop sets it when rows decoding plainly share a round with rows
    #: verifying trees, so a target can skip the padding in its token-wise work (selective batching).
    row_nodes: tuple[int, ...] | None = field(default=None, compare=False)
    #: :meth:`visibility`, computed on first use (a tree is immutable; `replace` never copies it).
    _visibility: torch.Tensor | None = field(default=None, init=False, repr=False, compare=False)

    def __init__(self, tokens: torch.Tensor, parent: torch.Tensor, depth: torch.Tensor, logq: torch.Tensor,
                 score: torch.Tensor, valid: torch.Tensor, child_ids: torch.Tensor | None = None,
                 child_probs: torch.Tensor | None = None, child_vocab: int | None = None,
                 depth_bound: int | None = None, width_bound: int | None = None,
                 row_nodes: tuple[int, ...] | None = None, *, child_q: torch.Tensor | None = None) -> None:
        if child_q is not None:  # a dense law [B, N, V]: every token is a candidate (a view, nothing copied)
            b, n, v = child_q.shape
            child_ids = torch.arange(v, device=child_q.device).expand(b, n, v)
            child_probs, child_vocab = child_q, v
        if (child_ids is None) != (child_probs is None) or (child_ids is not None and child_vocab is None):
            raise ValueError("a draft law needs child_ids, child_probs and child_vocab together (or child_q)")
        values = (tokens, parent, depth, logq, score, valid, child_ids, child_probs, child_vocab, depth_bound,
                  width_bound, row_nodes)
        for name, value in zip(_FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    # ----------------------------------------------------------------------------------- construction
    @classmethod
    def from_lists(
        cls,
        tokens: list[int],
        parents: list[int],
        *,
        logq: list[float] | None = None,
        score: list[float] | None = None,
        device: str | torch.device = "cpu",
    ) -> DraftTree:
        """Build a one-row tree from Python lists (``parents[0]`` must be -1). Depths are derived."""
        n = len(tokens)
        if len(parents) != n:
            raise ValueError(f"tokens has {n} entries but parents has {len(parents)}")
        depth = [0] * n
        for i in range(1, n):
            p = parents[i]
            if not 0 <= p < i:
                raise ValueError(f"node {i} has parent {p}; parents must precede their children")
            depth[i] = depth[p] + 1
        lq = logq if logq is not None else [0.0] * n
        if score is None:
            sc = [0.0] * n
            for i in range(1, n):
                sc[i] = sc[parents[i]] + lq[i]
        else:
            sc = score
        children = [0] * n
        for p in parents[1:]:
            children[p] += 1
        return cls(
            tokens=torch.tensor([tokens], dtype=torch.long, device=device),
            parent=torch.tensor([parents], dtype=torch.long, device=device),
            depth=torch.tensor([depth], dtype=torch.long, device=device),
            logq=torch.tensor([lq], dtype=torch.float32, device=device),
            score=torch.tensor([sc], dtype=torch.float32, device=device),
            valid=torch.ones(1, n, dtype=torch.bool, device=device),
            depth_bound=max(depth),
            width_bound=max(children),
        )

    @classmethod
    def root_only(cls, root: torch.Tensor) -> DraftTree:
        """The trivial tree of plain decoding: the root and nothing else. ``root`` is ``[B]``."""
        b = root.shape[0]
        dev = root.device
        return cls(
            tokens=root.long().view(b, 1),
            parent=torch.full((b, 1), -1, dtype=torch.long, device=dev),
            depth=torch.zeros(b, 1, dtype=torch.long, device=dev),
            logq=torch.zeros(b, 1, dtype=torch.float32, device=dev),
            score=torch.zeros(b, 1, dtype=torch.float32, device=dev),
            valid=torch.ones(b, 1, dtype=torch.bool, device=dev),
            depth_bound=0,
            width_bound=0,
        )

    @classmethod
    def stack(cls, rows: list[DraftTree]) -> DraftTree:
        """Concatenate one-row trees along the batch axis, padding to the largest capacity."""
        n = max(r.capacity for r in rows)

        def pad(t: torch.Tensor, value: float | int | bool, k: int | None = None) -> torch.Tensor:
            if k is not None and k > t.shape[2]:  # candidate laws of different K: pad with zero-probability ids
                t = torch.cat([t, t.new_full((*t.shape[:2], k - t.shape[2]), value)], dim=2)
            extra = n - t.shape[1]
            if extra == 0:
                return t
            filler = torch.full((t.shape[0], extra, *t.shape[2:]), value, dtype=t.dtype, device=t.device)
            return torch.cat([t, filler], dim=1)

        ids = probs = vocab = None
        if all(r.child_ids is not None for r in rows):
            k = max(r.child_ids.shape[2] for r in rows)  # type: ignore[union-attr]
            ids = torch.cat([pad(r.child_ids, 0, k) for r in rows])  # type: ignore[arg-type]
            probs = torch.cat([pad(r.child_probs, 0.0, k) for r in rows])  # type: ignore[arg-type]
            vocab = max(r.child_vocab for r in rows)  # type: ignore[type-var]
        return cls(
            tokens=torch.cat([pad(r.tokens, 0) for r in rows]),
            parent=torch.cat([pad(r.parent, -1) for r in rows]),
            depth=torch.cat([pad(r.depth, 0) for r in rows]),
            logq=torch.cat([pad(r.logq, float("-inf")) for r in rows]),
            score=torch.cat([pad(r.score, float("-inf")) for r in rows]),
            valid=torch.cat([pad(r.valid, False) for r in rows]),
            child_ids=ids,
            child_probs=probs,
            child_vocab=vocab,
            depth_bound=_max_bound([r.depth_bound for r in rows]),
            width_bound=_max_bound([r.width_bound for r in rows]),
        )

    # ------------------------------------------------------------------------------------ basic facts
    @property
    def child_q(self) -> torch.Tensor | None:  # [B, N, V]
        """The dense view of the draft laws (None without them), built on each read: for tests and checks,
        never for the decode loop's per-round work."""
        if self.child_ids is None or self.child_probs is None or self.child_vocab is None:
            return None
        b, n, _ = self.child_ids.shape
        dense = self.child_probs.new_zeros(b, n, self.child_vocab)
        return dense.scatter_add_(2, self.child_ids, self.child_probs)

    @property
    def batch_size(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def capacity(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def num_nodes(self) -> torch.Tensor:  # [B] int64, valid nodes including the root
        return self.valid.sum(dim=1)

    @property
    def max_depth(self) -> int:
        """The deepest valid node (reads the device)."""
        return int(torch.where(self.valid, self.depth, torch.zeros_like(self.depth)).max().item())

    def depth_limit(self) -> int:
        """An upper bound on the deepest node: ``depth_bound`` when the builder set it (no read), else
        :attr:`max_depth`."""
        return self.depth_bound if self.depth_bound is not None else self.max_depth

    def width_limit(self) -> int:
        """An upper bound on the children of any node: ``width_bound`` when set (no read), else counted."""
        if self.width_bound is not None:
            return self.width_bound
        return int(self.sibling_rank().max().item()) + 1

    def to(self, device: str | torch.device) -> DraftTree:
        """This tree on ``device`` (itself when it is there already, so its :meth:`visibility` is kept)."""
        if all(t.device == torch.device(device) for t in (self.tokens, self.parent, self.valid)):
            return self
        return replace(
            self,
            tokens=self.tokens.to(device),
            parent=self.parent.to(device),
            depth=self.depth.to(device),
            logq=self.logq.to(device),
            score=self.score.to(device),
            valid=self.valid.to(device),
            child_ids=None if self.child_ids is None else self.child_ids.to(device),
            child_probs=None if self.child_probs is None else self.child_probs.to(device),
        )

    def row(self, b: int) -> DraftTree:
        """Row ``b`` as a one-row tree trimmed to its valid nodes."""
        n = int(self.num_nodes[b])
        return DraftTree(
            tokens=self.tokens[b : b + 1, :n],
            parent=self.parent[b : b + 1, :n],
            depth=self.depth[b : b + 1, :n],
            logq=self.logq[b : b + 1, :n],
            score=self.score[b : b + 1, :n],
            valid=self.valid[b : b + 1, :n],
            child_ids=None if self.child_ids is None else self.child_ids[b : b + 1, :n],
            child_probs=None if self.child_probs is None else self.child_probs[b : b + 1, :n],
            child_vocab=self.child_vocab,
        )

    # ----------------------------------------------------------------------------------- derived views
    def ancestor_mask(self) -> torch.Tensor:  # [B, N, N] bool: [b, i, j] = j is i or an ancestor of i
        """Which nodes each node may attend to in tree attention (itself and its ancestors).

        The reflexive-transitive closure of the parent relation by repeated squaring: ``ceil(log2 N)`` batched
        products whose count depends only on the capacity, so no value is read back to the host.
        """
        b, n = self.parent.shape
        dev = self.parent.device
        eye = torch.eye(n, dtype=torch.float32, device=dev).expand(b, n, n)  # [B, N, N]
        has_parent = (self.parent >= 0) & self.valid  # [B, N]
        up = torch.zeros(b, n, n, dtype=torch.float32, device=dev)
        up.scatter_(2, self.parent.clamp(min=0).unsqueeze(-1), has_parent.unsqueeze(-1).float())  # child -> parent
        reach = eye + up  # paths of length <= 1
        span = 1
        while span < n:  # after the step paths of length <= 2 * span are covered
            reach = (reach + torch.bmm(reach, reach)).clamp(max=1.0)
            span *= 2
        return (reach > 0) & self.valid.unsqueeze(-1)

    def visibility(self) -> torch.Tensor:  # [B, N, N] bool
        """The round's tree-attention relation, computed once per tree: ``[b, i, j]`` = node ``j`` is node ``i``
        or one of its ancestors; a padding node sees only itself (so no query row is all hidden). The target's
        mask and the verifier's walk share it."""
        if self._visibility is None:
            eye = torch.eye(self.capacity, dtype=torch.bool, device=self.parent.device)
            object.__setattr__(self, "_visibility", self.ancestor_mask() | eye)
        assert self._visibility is not None
        return self._visibility

    def positions(self, base_len: torch.Tensor | int) -> torch.Tensor:  # [B, N] int64
        """Position ids for tree attention: committed length + depth (the root sits at ``base_len``)."""
        if isinstance(base_len, int):
            return self.depth + base_len
        return self.depth + base_len.view(-1, 1).to(self.depth.device)

    def sibling_rank(self) -> torch.Tensor:  # [B, N] int64
        """Position of each node among its parent's children (0 = first created); -1 for the root and padding."""
        n = self.parent.shape[1]
        same_parent = self.parent[:, :, None] == self.parent[:, None, :]  # [B, N, N]: [b, i, j] i, j siblings
        earlier = torch.ones(n, n, dtype=torch.bool, device=self.parent.device).tril(-1)  # [i, j]: j < i
        rank = (same_parent & earlier & self.valid[:, None, :]).sum(dim=2)
        is_child = self.valid & (self.parent >= 0)
        return torch.where(is_child, rank, torch.full_like(rank, -1))

    def select_rows(self, index: torch.Tensor | list[int]) -> DraftTree:
        """Rows ``index`` (``[R]``) at full capacity (no trimming, so no value is read back to the host)."""
        idx = torch.as_tensor(index, dtype=torch.long, device=self.tokens.device)
        return replace(
            self,
            tokens=self.tokens.index_select(0, idx),
            parent=self.parent.index_select(0, idx),
            depth=self.depth.index_select(0, idx),
            logq=self.logq.index_select(0, idx),
            score=self.score.index_select(0, idx),
            valid=self.valid.index_select(0, idx),
            child_ids=None if self.child_ids is None else self.child_ids.index_select(0, idx),
            child_probs=None if self.child_probs is None else self.child_probs.index_select(0, idx),
        )

    def first_child_next_sibling(self) -> tuple[torch.Tensor, torch.Tensor]:  # ([B, N], [B, N]) int64
        """Left-child/right-sibling arrays; children are listed in increasing node index."""
        b, n = self.parent.shape
        first = torch.full((b, n), -1, dtype=torch.long)
        nxt = torch.full((b, n), -1, dtype=torch.long)
        parent = self.parent.cpu().tolist()
        valid = self.valid.cpu().tolist()
        for r in range(b):
            last_child: dict[int, int] = {}
            for i in range(1, n):
                if not valid[r][i]:
                    break
                p = parent[r][i]
                if p in last_child:
                    nxt[r, last_child[p]] = i
                else:
                    first[r, p] = i
                last_child[p] = i
        return first.to(self.parent.device), nxt.to(self.parent.device)

    def children(self) -> list[list[list[int]]]:
        """``children()[b][i]`` lists the child node indices of node ``i`` in row ``b``, in index order."""
        out: list[list[list[int]]] = []
        parent = self.parent.cpu().tolist()
        counts = self.num_nodes.cpu().tolist()
        for r in range(self.batch_size):
            kids: list[list[int]] = [[] for _ in range(counts[r])]
            for i in range(1, counts[r]):
                kids[parent[r][i]].append(i)
            out.append(kids)
        return out

    def path_to(self, b: int, node: int) -> list[int]:
        """Node indices from the root to ``node`` (inclusive) in row ``b``."""
        path = []
        parent = self.parent[b].tolist()
        while node != -1:
            path.append(node)
            node = parent[node]
        return path[::-1]

    def leaf_paths(self) -> torch.Tensor:  # [B, P, D + 1] int64, -1 padded
        """Root-to-leaf node paths ("retrieve paths"), leaves in increasing node index."""
        first, _ = self.first_child_next_sibling()
        paths_per_row: list[list[list[int]]] = []
        for r in range(self.batch_size):
            n = int(self.num_nodes[r])
            leaves = [i for i in range(n) if int(first[r, i]) == -1]
            paths_per_row.append([self.path_to(r, leaf) for leaf in leaves])
        p = max(len(ps) for ps in paths_per_row)
        d = max(len(path) for ps in paths_per_row for path in ps)
        out = torch.full((self.batch_size, p, d), -1, dtype=torch.long)
        for r, ps in enumerate(paths_per_row):
            for k, path in enumerate(ps):
                out[r, k, : len(path)] = torch.tensor(path, dtype=torch.long)
        return out.to(self.parent.device)

    # --------------------------------------------------------------------------------------- subtrees
    def subtree(self, keep: torch.Tensor, *, capacity: int | None = None) -> DraftTree:
        """Keep an ancestor-closed node set and re-index it, preserving topological order.

        Args:
            keep: ``[B, N]`` bool; must contain the root and every kept node's parent.
            capacity: the largest kept count of a row, when the caller built ``keep`` ancestor-closed and
                knows it (then nothing is checked or read back to the host); None: check and count here.

        Raises:
            ValueError: if a row's kept set is not ancestor-closed or drops the root (checked when ``capacity``
                is None).
        """
        keep = keep & self.valid
        counts = keep.sum(dim=1)  # [B]
        if capacity is None:
            if not bool(keep[:, 0].all()):
                raise ValueError("subtree must keep the root (node 0) of every row")
            parent_kept = torch.gather(keep, 1, self.parent.clamp(min=0))
            orphan = keep & ~parent_kept
            orphan[:, 0] = False
            if bool(orphan.any()):
                b, i = (int(x) for x in orphan.nonzero()[0])
                raise ValueError(f"node set is not ancestor-closed: row {b} keeps node {i} but not its parent")
            capacity = int(counts.max().item())
        m = capacity
        new_index = torch.cumsum(keep.long(), dim=1) - 1  # [B, N], new index of each kept node
        order = torch.argsort((~keep).long(), dim=1, stable=True)[:, :m]  # [B, M] old indices, kept first
        valid = torch.arange(m, device=keep.device)[None, :] < counts[:, None]  # [B, M]

        def take(t: torch.Tensor) -> torch.Tensor:
            idx = order if t.dim() == 2 else order[..., None].expand(-1, -1, t.shape[-1])
            return torch.gather(t, 1, idx)

        old_parent = take(self.parent)
        new_parent = torch.gather(new_index, 1, old_parent.clamp(min=0))
        new_parent = torch.where((old_parent >= 0) & valid, new_parent, torch.full_like(new_parent, -1))
        return DraftTree(
            tokens=torch.where(valid, take(self.tokens), torch.zeros_like(take(self.tokens))),
            parent=new_parent,
            depth=torch.where(valid, take(self.depth), torch.zeros_like(take(self.depth))),
            logq=torch.where(valid, take(self.logq), torch.full_like(take(self.logq), float("-inf"))),
            score=torch.where(valid, take(self.score), torch.full_like(take(self.score), float("-inf"))),
            valid=valid,
            child_ids=None if self.child_ids is None else take(self.child_ids),  # [B, M, K]: K per node, not V
            child_probs=None if self.child_probs is None else take(self.child_probs),
            child_vocab=self.child_vocab,
            depth_bound=self.depth_bound,
            width_bound=self.width_bound,
        )


#: The constructor's fields, in order.
_FIELDS = ("tokens", "parent", "depth", "logq", "score", "valid", "child_ids", "child_probs", "child_vocab",
           "depth_bound", "width_bound", "row_nodes")


def _max_bound(bounds: list[int | None]) -> int | None:
    """The largest bound, or None when any is unknown."""
    return None if any(b is None for b in bounds) else max(b for b in bounds if b is not None)
