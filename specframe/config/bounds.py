"""Bounds on size-like fields: hard limits, and what the resolved stages can actually produce.

Hard limits (used as ``le=`` bounds by the core and plugin configs) keep a typo such as
``budget: 1000000000`` from hanging a builder or exhausting memory:

* :data:`MAX_TREE_NODES` draft nodes verified in one target forward (budget, widths, builder budgets);
* :data:`MAX_DRAFT_DEPTH` depths drafted per round; :data:`MAX_CANDIDATES` candidates per depth (larger than
  any vocabulary in use); :data:`MAX_NEW_TOKENS` tokens per request.

Within those limits, :func:`bound_budget` compares the pipeline's ``budget`` with the most draft nodes the
resolved drafter and tree builder can produce (:meth:`ComponentConfig.output_shape`, chained through the
stages): a budget above that is clamped to it, with a warning saying why when the file set it (the default
budget is clamped silently). Shapes a stage cannot know before it
is built (a checkpoint drafter's depth) are ``None`` and bound nothing.

Example: drafter ``ngram`` with ``num_speculative_tokens: 8`` (8 depths x 1 candidate) and tree builder
``chain`` produce at most 8 nodes, so ``budget: 64`` becomes 8 with a :class:`SizeWarning`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from specframe.errors import ConfigError

MAX_TREE_NODES = 4096
MAX_DRAFT_DEPTH = 1024
MAX_CANDIDATES = 1 << 18
MAX_NEW_TOKENS = 1 << 20


class SizeWarning(UserWarning):
    """A size-like field was clamped to what the stages can produce."""


@dataclass(frozen=True)
class StageShape:
    """The most a stage can produce per round; ``None`` = not known before the stage is built."""

    depth: int | None = None  # draft depths
    candidates: int | None = None  # candidates per depth
    nodes: int | None = None  # draft nodes (root excluded)


def capped_min(*values: int | None) -> int | None:
    """The smallest of the known values (None when none is known)."""
    known = [v for v in values if v is not None]
    return min(known) if known else None


def tree_nodes(depth: int | None, per_depth: list[int] | int | None) -> int | None:
    """Nodes of a tree with ``depth`` levels whose level ``d`` holds ``per_depth ** d`` nodes (or the given
    counts), capped at ``MAX_TREE_NODES + 1`` so huge shapes stay cheap to compute."""
    if depth is None or per_depth is None:
        return None
    total, level = 0, 1
    for d in range(depth):
        level = level * (per_depth if isinstance(per_depth, int) else per_depth[d])
        total += level
        if total > MAX_TREE_NODES:
            return MAX_TREE_NODES + 1
    return total


def check_max_new_tokens(value: int, *, where: str = "max_new_tokens") -> int:
    """``value`` if it is a token count from 1 to :data:`MAX_NEW_TOKENS`, else a GenerationError."""
    from specframe.errors import GenerationError

    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NEW_TOKENS:
        raise GenerationError(f"{where} must be an integer from 1 to {MAX_NEW_TOKENS}, got {value!r}",
                              hint="generation also stops at the target's context length")
    return value


def pipeline_shape(config: Any) -> StageShape:
    """The shape after drafter, corrector and tree builder of a resolved pipeline config."""
    shape = StageShape()
    for field in ("drafter", "corrector", "tree_builder"):
        section = getattr(config, field, None)
        if section is not None:
            shape = section.output_shape(shape)
    return shape


def bound_budget(config: Any, *, where: str = "budget") -> Any:
    """``config`` with ``budget`` clamped to what its stages can produce (see the module docstring).

    With ``budget: auto`` the bound applies to its upper bound, ``auto_budget.max_budget``.
    """
    if config.budget == "auto":
        return _bound_auto_budget(config, where=where)
    budget = config.budget
    if budget > MAX_TREE_NODES:
        raise ConfigError(f"budget {budget} is more than {MAX_TREE_NODES}, the most draft nodes one target forward "
                          "verifies", where=where, hint="trees of a few dozen to a few hundred nodes are typical")
    nodes = pipeline_shape(config).nodes
    if nodes is None or nodes == 0 or budget <= nodes:
        return config  # nodes == 0: nothing is drafted (plain decoding), the budget is unused
    if "budget" in config.model_fields_set:  # the default budget is clamped silently
        warnings.warn(SizeWarning(
            f"{where}: budget {budget} is more than the {nodes} draft nodes drafter '{config.drafter.type}' and "
            f"tree_builder '{config.tree_builder.type}' can produce per round; using budget {nodes}"), stacklevel=2)
    return config.model_copy(update={"budget": nodes})


def _bound_auto_budget(config: Any, *, where: str) -> Any:
    """``budget: auto``: clamp ``auto_budget.max_budget`` to the draft nodes the stages can produce."""
    auto = config.auto_budget
    nodes = pipeline_shape(config).nodes
    if nodes is None or nodes == 0 or auto.max_budget <= nodes:
        return config
    if "max_budget" in auto.model_fields_set:
        warnings.warn(SizeWarning(
            f"{where}: auto_budget.max_budget {auto.max_budget} is more than the {nodes} draft nodes drafter "
            f"'{config.drafter.type}' and tree_builder '{config.tree_builder.type}' can produce per round; using "
            f"{nodes}"), stacklevel=3)
    return config.model_copy(update={"auto_budget": auto.model_copy(update={"max_budget": nodes})})
