"""Request seeds: their range, and the seed of a request that names none.

A seed is a whole number with ``0 <= seed <= MAX_SEED`` (``2**63 - 1``, the largest non-negative int64). Anything
else (a negative or larger number, a bool, a float) is refused with a :class:`~specframe.errors.GenerationError`
where a seed enters: the pipeline's ``seed:`` field (through its config bound), ``--seed``,
``generate(seed=...)`` and a ``Request``'s seed (checked per request, so a bad one refuses that request alone).
Every random draw of a request is keyed by its seed through a bijective hash (:mod:`specframe.sampling.noise`), so
distinct seeds never share draws: seed ``2**63 - 1`` and seed ``0`` sample differently.

A request without a seed gets its own, as transformers', vLLM's and SGLang's users expect (independent samples
unless they fix one): :func:`fresh_seed` (fresh entropy) when the pipeline sets no ``seed:``, else
:func:`derive_seed` of the pipeline's seed and the request's index among the requests the pipeline has served
(a run of a program is then reproducible from the pipeline seed alone). Either way the seed a request used is
recorded in its `GenerationResult` (``seed``) and in bench records (``request_seed``), and passing it back as
``seed=`` replays the sample token for token.

Example::

    derive_seed(7, 0) != derive_seed(7, 1)         # the pipeline seed 7, requests 0 and 1
    derive_seed(0, "gsm8k", 1055, 0)               # a bench question's turn: the same for every method
"""

from __future__ import annotations

import hashlib
import operator
import secrets

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


def derive_seed(base: int, *parts: int | str) -> int:
    """A seed in ``[0, MAX_SEED]`` that is a pure function of ``base`` and ``parts`` (BLAKE2b of their ``repr``):
    distinct inputs give distinct seeds but for a 2**-63 chance."""
    digest = hashlib.blake2b(repr((int(base), *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & MAX_SEED


def fresh_seed() -> int:
    """A seed in ``[0, MAX_SEED]`` from the operating system's entropy."""
    return secrets.randbits(63)
