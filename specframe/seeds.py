"""Request seeds: their range.

A seed is a whole number with ``0 <= seed <= MAX_SEED`` (``2**63 - 1``, the largest non-negative int64). Anything
else (a negative or larger number, a bool, a float) is refused with a :class:`~specframe.errors.GenerationError`
where a seed enters: the pipeline's ``seed:`` field (through its config bound), ``--seed``,
``generate(seed=...)`` and a ``Request``'s seed (checked per request, so a bad one refuses that request alone).
Every random draw of a request is keyed by its seed through a bijective hash (:mod:`specframe.sampling.noise`), so
distinct seeds never share draws: seed ``2**63 - 1`` and seed ``0`` sample differently.
"""

from __future__ import annotations

import operator

from specframe.errors import GenerationError

#: Largest seed accepted.
MAX_SEED = 2**63 - 1


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
