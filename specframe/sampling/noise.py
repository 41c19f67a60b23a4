"""Position-keyed randomness: every uniform a round draws is a pure function of (request seed, stream, absolute
position, index), computed on the device with a counter-based hash.

Why. Plain decoding at temperature ``T > 0`` draws the token at absolute position ``t`` by inverse-CDF sampling
with the uniform ``u(seed, TARGET, t)``. The WALK verifier draws the target's sample at a tree node whose children
would sit at position ``t`` with that same uniform, so the token it emits at ``t`` is the token plain decoding emits
at ``t`` for the same seed, whatever the drafter, the tree, the budget, the batch size and the batch-mates
(greedy decoding is the ``T = 0`` case). Rejection verifiers stay lossless in law; their draws use other streams
keyed by the node they decide at, so a seed reproduces them token for token whenever the verified tree's shape
is the same (a fixed budget; see ``docs/concepts/sampling.md``).

Why exact. Each emitted token at position ``t`` is ``F_t^{-1}(u_t)`` with ``F_t`` the target's processed law given
the emitted prefix and ``u_t`` uniform and independent of every other position's uniform and of anything the
drafter saw. Uniforms a round evaluates beyond the position where it stops are discarded and never influence a
later state (trees are built from the drafter's outputs only), so the emitted sequence is exactly plain
decoding's sequence for the seed, whose law is the target's.

Hash: SplitMix64's finaliser (a bijection of 64-bit words) chained over the key's parts, on int64 tensors with
wrap-around multiplication; the top 53 bits give a float64 in ``[0, 1)``.

Worked example: ``uniforms(seeds=[7], stream=TARGET, positions=[[12, 13]])`` returns two float64 values that
depend only on (7, TARGET, 12) and (7, TARGET, 13): the same numbers in any batch, on any round.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specframe.sampling import gumbel_from_uniforms

#: Streams: independent families of draws.
TARGET = 1  # the target's own samples (plain decoding, WALK, bonus tokens)
ACCEPT = 2  # rejection tests of a node's children
RESIDUAL = 3  # residual samples after a rejection
DRAFT = 4  # draws of sampled tree builders

_M1 = -0x40A7B892E31B1A47  # 0xBF58476D1CE4E5B9 as a signed 64-bit integer
_M2 = -0x6B2FB644ECCEEE15  # 0x94D049BB133111EB as a signed 64-bit integer
_GOLDEN = -0x61C8864680B583EB  # 0x9E3779B97F4A7C15 as a signed 64-bit integer


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 words (torch's ``>>`` is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:  # int64, same shape
    """SplitMix64's finaliser: a bijection of 64-bit words with full avalanche."""
    x = x ^ _shift_right(x, 30)
    x = x * _M1
    x = x ^ _shift_right(x, 27)
    x = x * _M2
    return x ^ _shift_right(x, 31)


def hash_key(*parts: torch.Tensor | int) -> torch.Tensor:  # int64, the broadcast shape of the parts
    """One 64-bit word per key; parts are combined in order (so ``(a, b)`` and ``(b, a)`` differ)."""
    first, *rest = parts
    if not isinstance(first, torch.Tensor):
        raise TypeError("the first part of a key must be a tensor (it places the result on its device)")
    return extend_key(mix64(first.long() + _GOLDEN), *rest)


def extend_key(h: torch.Tensor, *parts: torch.Tensor | int) -> torch.Tensor:  # int64
    """The word of a key whose leading parts hashed to ``h``, continued with ``parts``:
    ``extend_key(hash_key(a, b), c) == hash_key(a, b, c)``, so a prefix shared by many keys is hashed once."""
    for part in parts:
        value = part.long().to(h.device) if isinstance(part, torch.Tensor) else int(part)
        h = mix64((h + _GOLDEN) ^ value)
    return h


def hash_device(device: torch.device | str) -> torch.device:
    """Where the noise is hashed for stages on ``device``: the device itself, or the host when the device has no
    float64 (``mps``). The uniforms are then the same numbers as on any other device, handed to the stage in
    float32 (a draw can differ from the float64 one only where a uniform falls within 2^-24 of a CDF step)."""
    dev = torch.device(device)
    return torch.device("cpu") if dev.type == "mps" else dev


def to_unit(h: torch.Tensor) -> torch.Tensor:  # float64 in [0, 1)
    """The top 53 bits of each word as a float64 in ``[0, 1)``."""
    return _shift_right(h, 11).double() * (2.0**-53)


@dataclass(frozen=True)
class RoundNoise:
    """The uniforms of one round for ``B`` rows: row ``b`` has request seed ``seeds[b]`` and its root token at
    absolute position ``roots[b]`` (so a node at depth ``d`` predicts the token at ``roots[b] + d + 1``)."""

    seeds: torch.Tensor  # [B] int64, on the target's device
    roots: torch.Tensor  # [B] int64 absolute position of each row's root token
    #: Where the stages use the uniforms, when the hash runs elsewhere (a device without float64); None: here.
    use_device: torch.device | None = None
    #: (stream, rows) -> ``hash_key(seed, stream)`` per row ``[rows]``: the prefix every key of a stream shares in a
    #: round, hashed once (a tree-rejection round draws from a stream once per depth and sibling).
    _prefixes: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict, init=False, repr=False,
                                                          compare=False)

    @classmethod
    def for_rows(cls, seeds: list[int], roots: list[int], device: torch.device | str) -> RoundNoise:
        """The round's noise for rows of these request seeds and root positions, hashed on ``device`` (on the
        host for a device without float64, such as Apple's ``mps``: :func:`hash_device`)."""
        dev = hash_device(device)
        return cls(seeds=torch.tensor(seeds, dtype=torch.long, device=dev),
                   roots=torch.tensor(roots, dtype=torch.long, device=dev),
                   use_device=None if dev == torch.device(device) else torch.device(device))

    @classmethod
    def from_seed(cls, seed: int, *, root: int = 0, device: torch.device | str = "cpu") -> RoundNoise:
        """Noise for any number of independent rows, all with their root at ``root``: row ``b``'s request seed is
        derived from ``(seed, b)``. Statistical tests and the conformance kit run many rounds as the rows of one
        batch this way; the decode loop gives every row its own request seed (:meth:`for_rows`)."""
        return cls(seeds=torch.tensor(int(seed), dtype=torch.long, device=device),
                   roots=torch.tensor(root, dtype=torch.long, device=device))

    def rows(self, index: list[int]) -> RoundNoise:
        """The noise of a subset of rows ``index``, e.g. the rows that draft this round."""
        idx = torch.tensor(index, dtype=torch.long, device=self.seeds.device)
        seeds = self._row_seeds(max(index) + 1).index_select(0, idx)
        roots = self.roots.index_select(0, idx) if self.roots.dim() else self.roots.expand(len(index))
        return RoundNoise(seeds, roots, self.use_device)

    def _row_seeds(self, rows: int) -> torch.Tensor:  # [rows] int64
        if self.seeds.dim():
            return self.seeds
        return hash_key(torch.arange(rows, dtype=torch.long, device=self.seeds.device), self.seeds)

    def uniforms(self, stream: int, depth: torch.Tensor, *keys: torch.Tensor | int) -> torch.Tensor:
        """Float64 uniforms ``[B, ...]`` for draws predicting position ``roots + depth + 1`` (``depth`` ``[B, ...]``),
        further keyed by ``keys`` (node and sibling indices; each broadcastable to ``depth``)."""
        view = (-1,) + (1,) * (depth.dim() - 1)
        roots = self.roots.view(view) if self.roots.dim() else self.roots
        position = roots + depth.long().to(self.roots.device) + 1
        keys = tuple(k.to(self.roots.device) if isinstance(k, torch.Tensor) else k for k in keys)
        u = to_unit(extend_key(self._stream_prefix(stream, int(depth.shape[0])).view(view), position, *keys))
        if self.use_device is not None:  # hashed on the host for a device without float64: float32 there
            return u.to(torch.float32).to(self.use_device)
        return u

    def _stream_prefix(self, stream: int, rows: int) -> torch.Tensor:  # [rows] int64
        """``hash_key(seed, stream)`` of each row, computed once per round and stream."""
        prefix = self._prefixes.get((stream, rows))
        if prefix is None:
            prefix = hash_key(self._row_seeds(rows), stream)
            self._prefixes[(stream, rows)] = prefix
        return prefix

    def gumbel(self, stream: int, depth: torch.Tensor, node: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Gumbel noise ``[B, M, K]`` (float64) for the candidate ``tokens`` ``[B, M, K]`` (token ids) of the children
        of nodes ``node`` ``[B, M]`` at ``depth`` ``[B, M]``: one key per (node, token id), for drawing without
        replacement by Gumbel-top-k among the candidates.

        Keyed by the token id, not its rank, so the draws are those a Gumbel-top-k over the whole vocabulary
        would make with this noise (a law supported on the candidates never picks another token), at ``K``
        hashes per node instead of ``V``."""
        return gumbel_from_uniforms(self.uniforms(stream, depth[..., None], node.long()[..., None], tokens.long()))
