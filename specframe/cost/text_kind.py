"""What kind of text a request is, from its prompt alone: signatures that let `budget: auto` recognise requests
like earlier ones.

A drafter trained on math and code pays on math and code and not on chat; a controller that averages every
earlier request cannot tell them apart. The signature of a prompt is a small, fixed-size vector of hashed token
counts: each token id falls into one of :data:`SIGNATURE_SIZE` buckets (a multiplicative hash), the counts are
square-root damped (so one repeated token does not dominate) and the vector is scaled to unit length. Two prompts
of the same kind (code stubs, word problems, chat questions) share tokens (``def``, digits, ``$``, question
words), so their signatures point the same way.

Every prompt of a pipeline also shares its chat template (a system prompt, role markers), which would make all
signatures alike; :func:`neighbours` therefore compares signatures **centred** on the mean of the remembered
ones, so what every prompt has in common cancels and what sets a kind apart remains.

Worked example (4 buckets for readability): ids ``[5, 5, 9]`` with buckets ``5 -> 1`` and ``9 -> 3`` count
``[0, 2, 0, 1]``, damped ``[0, 1.41, 0, 1]``, unit length ``[0, 0.82, 0, 0.58]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Buckets of a signature (small: the memory keeps many signatures and is rewritten after every request).
SIGNATURE_SIZE = 64
_HASH = 2654435761  # Knuth's multiplicative hash constant (spreads neighbouring ids over the buckets)


def bucket(token_id: int, size: int = SIGNATURE_SIZE) -> int:
    """The bucket of a token id: the high bits of its multiplicative hash (the low bits of ``id * odd`` would only
    permute the low bits of the id, putting neighbouring ids in neighbouring buckets)."""
    return (((int(token_id) * _HASH) & 0xFFFFFFFF) * size) >> 32


def prompt_signature(ids: Sequence[int], size: int = SIGNATURE_SIZE) -> tuple[float, ...]:
    """The unit-length signature of a prompt's token ids (see the module docstring); all zeros for no ids."""
    counts = [0] * size
    for token in ids:
        counts[bucket(token, size)] += 1
    damped = [math.sqrt(c) for c in counts]
    norm = math.sqrt(sum(v * v for v in damped))
    return tuple(round(v / norm, 4) if norm else 0.0 for v in damped)


def neighbours(signature: Sequence[float], remembered: Sequence[Sequence[float]], *, min_similarity: float,
               limit: int) -> list[tuple[int, float]]:
    """Indices of the ``limit`` remembered signatures most like ``signature`` (cosine similarity of the vectors
    centred on the remembered mean, at least ``min_similarity``), with their similarities, best first."""
    if len(remembered) < 2:
        return []
    size = len(signature)
    mean = [sum(s[i] for s in remembered) / len(remembered) for i in range(size)]
    query = [signature[i] - mean[i] for i in range(size)]
    query_norm = math.sqrt(sum(v * v for v in query))
    if query_norm == 0.0:
        return []
    scored = []
    for index, other in enumerate(remembered):
        centred = [other[i] - mean[i] for i in range(size)]
        norm = math.sqrt(sum(v * v for v in centred))
        if norm == 0.0:
            continue
        cosine = sum(q * c for q, c in zip(query, centred, strict=True)) / (query_norm * norm)
        if cosine >= min_similarity:
            scored.append((index, cosine))
    scored.sort(key=lambda item: -item[1])
    return scored[:limit]
