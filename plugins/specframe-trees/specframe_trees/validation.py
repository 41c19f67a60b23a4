"""Cross-stage checks for pipelines that use this plugin's stages (``specframe_validate_pipeline``).

Each check rejects a combination that would silently ignore part of the configuration:

* ``heap`` ranks by the proposal's marginals and never calls the corrector, so a path-dependent corrector
  would be ignored: use ``heap_sequential`` (exact, slow) or ``chain_then_heap`` (chain-conditioned);
* ``dartree`` in ``pruned`` mode builds up to ``width x max_depth`` nodes; without a pruner that can exceed
  the verification budget;
* a corrector with ``normalize: full_vocab`` needs the drafter's full logits.

Capabilities are read from the registry; stage configs are read by attribute, so any pipeline model with
``corrector``, ``tree_builder``, ``pruner``, ``drafter`` (each with ``type``) and ``budget`` works.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from specframe.registry import ComponentRegistry


def _capabilities(registry: ComponentRegistry, kind: str, name: str | None) -> Any:
    if name is None or (kind, name) not in registry:
        return None
    return registry.get(kind, name).spec.capabilities


def _stage_type(config: Any, stage: str) -> str | None:
    stage_config = getattr(config, stage, None)
    return getattr(stage_config, "type", None)


def pipeline_problems(config: Any, registry: ComponentRegistry) -> Iterator[str]:
    """Yield one sentence per problem (naming fields and the fix); nothing if the pipeline is fine."""
    builder = _stage_type(config, "tree_builder")
    corrector = _stage_type(config, "corrector")
    pruner = _stage_type(config, "pruner")
    corrector_caps = _capabilities(registry, "corrector", corrector)

    if builder == "heap" and corrector_caps is not None and (corrector_caps.path_dependent or corrector_caps.stateful):
        yield (
            f"tree_builder.type: heap ranks nodes by the drafter's marginals and never calls the corrector, so "
            f"corrector.type: {corrector} (path-dependent) would be ignored; use tree_builder.type: "
            "heap_sequential (per-node correction) or chain_then_heap (correction along the greedy chain), "
            "or corrector.type: identity"
        )

    if builder == "dartree" and pruner == "none":
        tree_builder = config.tree_builder
        pipeline_budget = getattr(config, "max_budget", getattr(config, "budget", None))
        budget = tree_builder.budget if tree_builder.budget is not None else pipeline_budget
        depth = tree_builder.max_depth
        too_wide = depth is None or tree_builder.width * depth > (budget or 0)
        if tree_builder.mode == "pruned" and budget is not None and too_wide:
            size = "width x proposal depth" if depth is None else f"{tree_builder.width} x {depth}"
            yield (
                f"tree_builder.type: dartree with mode: pruned builds up to {size} nodes, more than the budget "
                f"{budget}, and pruner.type: none would verify all of them; set pruner.type: deferred_topb, or "
                "tree_builder.mode: fixed"
            )

    if getattr(getattr(config, "corrector", None), "normalize", None) == "full_vocab":
        drafter = _stage_type(config, "drafter")
        drafter_caps = _capabilities(registry, "drafter", drafter)
        if drafter_caps is not None and not drafter_caps.emits_logits:
            yield (
                f"corrector.normalize: full_vocab needs the drafter's full logits, but drafter.type: {drafter} "
                "does not emit them; set corrector.normalize: candidates"
            )
