"""Cross-stage checks for the diffusion components (``specframe_validate_pipeline``), before anything is loaded.

* ``ar`` / ``markov`` without their own ``checkpoint`` read the drafter's; a drafter without a checkpoint (say
  ``ngram``) leaves them with none.
* ``ar`` expects a Domino checkpoint and ``markov`` a DSpark one; when they share the drafter's checkpoint the
  drafter type says which family it is, so ``dflash`` + ``ar`` is caught here rather than at load time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

HEAD_FAMILY = {"ar": "domino", "markov": "dspark"}


def pipeline_problems(config: Any) -> Iterator[str]:
    """Yield one sentence per problem, naming the fields and the fix."""
    corrector = getattr(config, "corrector", None)
    drafter = getattr(config, "drafter", None)
    c_type, d_type = getattr(corrector, "type", None), getattr(drafter, "type", None)
    if c_type not in HEAD_FAMILY or getattr(corrector, "checkpoint", None):
        return
    family = HEAD_FAMILY[c_type]
    if not getattr(drafter, "checkpoint", None):
        yield (f"corrector.type: {c_type} reads its head from the drafter's checkpoint, but drafter.type: "
               f"{d_type} has none; set corrector.checkpoint to a {family} checkpoint directory")
    elif d_type in ("dflash", "domino", "dspark") and d_type != family:
        yield (f"corrector.type: {c_type} needs a {family} checkpoint, but it would read drafter.checkpoint, "
               f"which drafter.type: {d_type} requires to be a {d_type} checkpoint; use drafter.type: {family}, "
               "corrector.type: identity, or set corrector.checkpoint")
