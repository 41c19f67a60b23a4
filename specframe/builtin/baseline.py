"""The autoregressive baseline: a pipeline's target decoding one token per round through the same loop.

It replaces every stage with a built-in null stage (drafter ``none``, corrector ``identity``, tree builder
``chain``, pruner ``none``) and lets the verifier resolve from the sampling settings (``auto``), so it shares
the target object, the adapter, the prompts and the decode loop with the pipeline it is compared to. It is plain:
a fixed budget (no `budget: auto` controller, no cost profile read or written), and since its drafter proposes
nothing the loop taps no layer and runs no draft, build, prune or verify stage. ``bench`` and
``run --compare-ar`` both use :func:`ar_baseline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specframe.errors import ConfigError

if TYPE_CHECKING:
    from specframe.pipeline import Pipeline

#: Method name of the baseline in bench results. Result files written before it was renamed call it ``ar``
#: (which is also Domino's corrector); readers find the baseline by the records' ``baseline`` flag, not by name.
BASELINE_NAME = "autoregressive"

#: Stage sections of the autoregressive baseline.
BASELINE_STAGES: dict[str, dict[str, Any]] = {
    "drafter": {"type": "none"},
    "corrector": {"type": "identity"},
    "tree_builder": {"type": "chain"},
    "pruner": {"type": "none"},
    "verifier": {"type": "auto"},
}


def ar_baseline(pipe: Pipeline, name: str, *, source: str = "the pipeline", hint: str = "") -> Pipeline:
    """``pipe`` with every stage replaced by the baseline's (see the module docstring), named ``name``."""
    stages = {k: dict(v) for k, v in BASELINE_STAGES.items()}
    try:
        return pipe.with_stage("drafter", stages.pop("drafter"), name=name, budget=1, **stages)
    except ConfigError as exc:
        raise ConfigError(f"cannot build the autoregressive baseline from {source}: {exc.message}",
                          hint=hint or exc.hint or "check the pipeline's sampling settings and installed verifiers "
                                           "(`specframe components`)") from None
