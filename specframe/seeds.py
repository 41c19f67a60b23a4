"""Seeds of the per-request random streams: their range, and how one seed becomes four independent streams.

A seed is a whole number with ``0 <= seed <= MAX_SEED`` (``2**63 - 1``, the largest seed every
``torch.Generator`` accepts alike). Anything else (a negative or larger number, a bool, a float) is refused
with a :class:`~specframe.errors.GenerationError` where a seed enters: the pipeline's ``seed:`` field (through
its config bound), ``--seed``, ``generate(seed=...)``, a ``Request``'s seed, all of which end in
:func:`stream_seed`.

Stream ``k`` of seed ``s`` is seeded with ``splitmix64(s + (k + 1) * GAMMA mod 2**64)``: adding a constant and
the SplitMix64 finaliser are both bijections of 64-bit integers, so for every stream distinct seeds give
distinct generator seeds over the whole range (nothing wraps: seed ``2**63 - 1`` and seed ``0`` draw
differently), and the four streams of one seed differ from each other.
"""

from __future__ import annotations

import operator

from specframe.errors import GenerationError

#: Largest seed accepted.
MAX_SEED = 2**63 - 1
#: SplitMix64's increment (the odd integer nearest to 2**64 / golden ratio).
GAMMA = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def check_seed(seed: object, *, where: str = "seed") -> int:
    """``seed`` as an int if it is a whole number (an int, or an integer such as ``numpy.int64``) from 0 to
    :data:`MAX_SEED`, else a GenerationError naming ``where``."""
    try:
        value = None if isinstance(seed, bool) else operator.index(seed)  # type: ignore[arg-type]
    except TypeError:
        value = None
    if value is None or not 0 <= value <= MAX_SEED:
        raise GenerationError(f"{where} must be a whole number from 0 to {MAX_SEED} (2**63 - 1), got {seed!r}",
                              hint="seeds outside this range would wrap onto others and repeat their samples")
    return value


def splitmix64(x: int) -> int:
    """The SplitMix64 finaliser: a bijection of 64-bit integers that scatters nearby inputs."""
    z = x & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def stream_seed(seed: int, stream: int) -> int:
    """The ``torch.Generator`` seed of stream ``stream`` (0, 1, 2, ...) of a checked ``seed``."""
    return splitmix64(check_seed(seed) + (stream + 1) * GAMMA)
