"""Validating a pipeline mapping: stage types, field schemas, unset ``${VAR}``, then cross-stage checks from
capabilities, and finally the budget bound (:func:`specframe.config.bounds.bound_budget`).

Each failure becomes one :class:`~specframe.errors.ConfigError` that names the file and line (or the
``--set`` override) of the offending value and says how to fix it. Whatever building and running the pipeline
would refuse because of a config value is refused here, so ``specframe validate`` passing means ``run`` will
not fail on the file's values (missing model files are still found only when the stages are built).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from specframe.config.base import BOOLEAN_NUMBER
from specframe.config.bounds import bound_budget
from specframe.config.loader import unresolved_variables
from specframe.config.pipeline import STAGE_FIELDS, PipelineConfigBase, build_pipeline_model
from specframe.errors import ConfigError, did_you_mean
from specframe.registry import (
    ComponentRegistry,
    CorrectorCapabilities,
    DrafterCapabilities,
    PrunerCapabilities,
    TargetCapabilities,
    TreeBuilderCapabilities,
    VerifierCapabilities,
)

if TYPE_CHECKING:
    from specframe.plugins import PluginHost

Provenance = dict[tuple[str, ...], str]


def _where(provenance: Provenance, path: tuple[str, ...], default: str) -> str:
    for cut in range(len(path), 0, -1):
        if path[:cut] in provenance:
            return provenance[path[:cut]]
    return default


def _error_sources(provenance: Provenance, path: tuple[str, ...], data: dict[str, Any], message: str,
                   default: str) -> str:
    """Where an error at ``path`` comes from. An error raised for a whole section (a check across its fields)
    names the sources of the fields its message mentions (``--set drafter.min_ngram=5, p.yaml:9``), not the
    line that opened the section."""
    section: Any = data
    for key in path:
        section = section.get(key) if isinstance(section, dict) else None
    if isinstance(section, dict):
        keys = [(*path, key) for key in section if isinstance(key, str)]
        named = [provenance[k] for k in keys
                 if k in provenance and re.search(rf"(?<![\w.]){re.escape(k[-1])}(?!\w)", message)]
        if named:
            return ", ".join(dict.fromkeys(named))
    return _where(provenance, path, default)


def _check_stage_types(data: dict[str, Any], registry: ComponentRegistry, provenance: Provenance,
                       source: str) -> None:
    for field, kind in STAGE_FIELDS.items():
        if field not in data or data[field] is None:
            continue
        section = data[field]
        if isinstance(section, str):
            section = data[field] = {"type": section}
        where = _where(provenance, (field,), source)
        if not isinstance(section, dict):
            raise ConfigError(f"'{field}' must be a mapping with a `type:` key, found {section!r}", where=where,
                              hint=f"write e.g. `{field}: {{type: ...}}`")
        if "type" not in section:
            names = registry.names(kind) + (["auto"] if kind == "verifier" else [])
            raise ConfigError(f"'{field}' has no `type:`", where=where,
                              hint=f"available {kind} types: {', '.join(names) or '(none installed)'}")
        name = section["type"]
        if kind == "verifier" and name == "auto":
            continue
        if (kind, name) not in registry:
            names = registry.names(kind) + (["auto"] if kind == "verifier" else [])
            raise ConfigError(
                f"unknown {field} type '{name}'{did_you_mean(str(name), names)}",
                where=_where(provenance, (field, "type"), where),
                hint=f"available {kind} types: {', '.join(names) or '(none installed)'}; "
                     "`specframe components` lists them with the plugin providing each"
                     + (f"; {registry.unavailable}" if registry.unavailable else ""),
            )


def _translate(exc: ValidationError, data: dict[str, Any], model: type[PipelineConfigBase],
               provenance: Provenance, source: str) -> ConfigError:
    lines = []
    first_where = source
    for i, err in enumerate(exc.errors()):
        loc = [str(x) for x in err["loc"]]
        if err["type"] == BOOLEAN_NUMBER:  # raised for the whole section; name the field
            loc.append(str(err["ctx"]["field"]))
        # Discriminated unions insert the tag (``tree_builder.dartree.width``); drop it.
        if len(loc) >= 2 and loc[0] in STAGE_FIELDS and isinstance(data.get(loc[0]), dict) \
                and data[loc[0]].get("type") == loc[1]:
            loc.pop(1)
        path = tuple(loc)
        dotted = ".".join(loc)
        where = _error_sources(provenance, path, data, str(err["msg"]), source)
        if i == 0:
            first_where = where
        kind = err["type"]
        if kind == "extra_forbidden":
            allowed = _allowed_fields(data, model, path[:-1])
            msg = f"unknown field '{dotted}'{did_you_mean(path[-1], allowed)}"
            if allowed:
                msg += f"; allowed: {', '.join(allowed)}"
        elif kind == "missing":
            msg = f"missing required field '{dotted}'"
            if len(path) == 1 and path[0] in STAGE_FIELDS:
                msg = f"missing required stage '{dotted}'"
        else:
            value = err.get("input")
            text = str(err["msg"]).removeprefix("Value error, ")  # a validator's own sentence
            shown = "" if isinstance(value, dict) or "got " in text else f" (got {value!r})"
            msg = f"{dotted}: {text}{shown}"
        lines.append(msg if where == first_where or i == 0 else f"{msg}  [{where}]")
    return ConfigError("; ".join(lines) if len(lines) == 1 else "invalid pipeline:\n  " + "\n  ".join(lines),
                       where=first_where,
                       hint="`specframe schema` prints every field; `specframe components` lists stage types")


def _allowed_fields(data: dict[str, Any], model: type[PipelineConfigBase], path: tuple[str, ...]) -> list[str]:
    """Field names allowed at ``path`` (a stage section or a nested top-level section)."""
    if not path:
        return sorted(model.model_fields)
    if path[0] in STAGE_FIELDS and len(path) == 1:
        return []  # filled by the caller through the registry-specific config below
    sub = model.model_fields.get(path[0])
    annotation = getattr(sub, "annotation", None)
    fields = getattr(annotation, "model_fields", None)
    return sorted(fields) if fields else []


def stage_field_names(registry: ComponentRegistry, kind: str, name: str) -> list[str]:
    return sorted(registry.get(kind, name).spec.config.model_fields)


def validate_pipeline(data: dict[str, Any], host: PluginHost, *, provenance: Provenance | None = None,
                      source: str = "<pipeline>", has_target_object: bool = False) -> PipelineConfigBase:
    """Validate a pipeline mapping against the registry; return the resolved config (``auto`` resolved)."""
    provenance = provenance or {}
    registry = host.registry
    data = dict(data)
    _check_stage_types(data, registry, provenance, source)
    model = build_pipeline_model(registry)
    try:
        config = model.model_validate(data)
    except ValidationError as exc:
        raise _improve_stage_hints(_translate(exc, data, model, provenance, source), data, registry) from None
    if config.target is None and not has_target_object:
        raise ConfigError("missing required stage 'target'", where=source,
                          hint="add e.g. `target: {type: hf, model: /path/to/model}`")
    check_variables(config, provenance, source)
    config = resolve_auto_verifier(config, registry, provenance, source)
    problems = cross_stage_problems(config, registry, has_target_object=has_target_object)
    problems += host.validate_pipeline(config)
    if problems:
        raise ConfigError("contradictory stages:\n  " + "\n  ".join(problems), where=source,
                          hint="change one of the stages named above (or set allow_lossy: true where it says so)")
    return bound_budget(config, where=_where(provenance, ("budget",), source))


def check_variables(config: PipelineConfigBase, provenance: Provenance, source: str) -> None:
    """Refuse a ``${VAR}`` left unexpanded (the variable is unset and has no ``:-default``), as running would."""
    unresolved = unresolved_variables(config.model_dump(mode="json"))
    if unresolved:
        field, var = unresolved[0]
        raise ConfigError(f"{field} uses ${{{var}}} but the environment variable {var} is not set",
                          where=_where(provenance, tuple(field.split(".")), source),
                          hint=f"export {var}=... before using this pipeline, or write ${{{var}:-default}}")


def _improve_stage_hints(err: ConfigError, data: dict[str, Any], registry: ComponentRegistry) -> ConfigError:
    """Add the allowed fields of a stage's component to 'unknown field' messages."""
    for field, kind in STAGE_FIELDS.items():
        section = data.get(field)
        if not isinstance(section, dict) or "type" not in section or (kind, section["type"]) not in registry:
            continue
        allowed = [f for f in stage_field_names(registry, kind, section["type"]) if f != "type"]
        prefix = f"unknown field '{field}."
        if prefix in err.message:
            bad = err.message.split(prefix, 1)[1].split("'", 1)[0]
            err.message = err.message.replace(
                f"{prefix}{bad}'", f"{prefix}{bad}'{did_you_mean(bad, allowed)} for {field} type "
                f"'{section['type']}' (allowed: {', '.join(allowed) or 'none'})", 1)
    return err


def resolve_auto_verifier(config: PipelineConfigBase, registry: ComponentRegistry, provenance: Provenance,
                          source: str) -> PipelineConfigBase:
    """Replace ``verifier: auto`` by greedy at temperature 0, else the first fitting lossless verifier."""
    verifier = config.verifier
    if verifier.type != "auto":
        return config
    builder = registry.get("tree_builder", config.tree_builder.type).spec.caps(TreeBuilderCapabilities)
    regime = builder.draft_regime
    greedy = config.sampling.temperature == 0.0
    candidates = []
    for rec in registry.of_kind("verifier"):
        caps = rec.spec.caps(VerifierCapabilities)
        if not caps.lossless or regime not in caps.supported_regimes:
            continue
        if (caps.greedy_only and not greedy) or (caps.chain_only and builder.produces_tree):
            continue
        candidates.append(rec)
    # Greedy-only verifiers at T = 0 (no randomness); on sampled trees, verifiers that use q (they accept
    # more than WALK, which needs the exact token); otherwise the first by name.
    candidates.sort(key=lambda r: (not r.spec.caps(VerifierCapabilities).greedy_only,
                                   r.spec.caps(VerifierCapabilities).requires_q != (regime == "sampled"),
                                   r.spec.name))
    if not candidates:
        raise ConfigError(f"verifier: auto found no lossless verifier for {regime} trees at temperature "
                          f"{config.sampling.temperature}", where=_where(provenance, ("verifier",), source),
                          hint="install a verifier plugin (specframe-verifiers) or name one explicitly")
    chosen = candidates[0].spec.config.model_validate({})
    return config.model_copy(update={"verifier": chosen})


def cross_stage_problems(config: Any, registry: ComponentRegistry, *, has_target_object: bool = False) -> list[str]:
    """Contradictions between stages, found from declared capabilities only."""
    specs = {field: registry.get(kind, getattr(config, field).type).spec
             for field, kind in STAGE_FIELDS.items() if getattr(config, field, None) is not None}
    problems = []
    builder = specs["tree_builder"].caps(TreeBuilderCapabilities)
    verifier = specs["verifier"].caps(VerifierCapabilities)
    drafter = specs["drafter"].caps(DrafterCapabilities)
    b_name, v_name = config.tree_builder.type, config.verifier.type
    regime = builder.draft_regime
    temperature = config.sampling.temperature
    if regime not in verifier.supported_regimes and not config.allow_lossy:
        problems.append(f"verifier '{v_name}' is not exact for {regime} trees, which tree_builder '{b_name}' "
                        f"builds (it supports: {', '.join(sorted(verifier.supported_regimes))})")
    if verifier.requires_q and regime != "sampled":
        problems.append(f"verifier '{v_name}' needs the draft law of sampled children, but tree_builder "
                        f"'{b_name}' builds deterministic trees; use a sampled builder or verifier 'walk'")
    if verifier.chain_only and builder.produces_tree:
        problems.append(f"verifier '{v_name}' handles chains only, but tree_builder '{b_name}' can branch; "
                        "use a chain builder or a tree verifier")
    pruner = specs["pruner"].caps(PrunerCapabilities) if "pruner" in specs else None
    if verifier.requires_q and regime == "sampled" and pruner is not None and not pruner.keeps_child_prefix:
        problems.append(f"pruner '{config.pruner.type}' may drop a sampled sibling in the middle of a child list, "
                        f"which breaks verifier '{v_name}' (siblings are tried in sampling order); use pruner "
                        "'none' and set the size with the builder")
    if temperature > 0 and verifier.greedy_only and not config.allow_lossy:
        problems.append(f"verifier '{v_name}' is exact only at temperature 0 but sampling.temperature is "
                        f"{temperature}; use verifier 'walk' (or `auto`), or set allow_lossy: true")
    if not verifier.lossless and not config.allow_lossy:
        problems.append(f"verifier '{v_name}' is not lossless; set allow_lossy: true to use it anyway")
    corrector = specs["corrector"].caps(CorrectorCapabilities) if "corrector" in specs else None
    c_name = config.corrector.type if corrector is not None else ""
    if corrector is not None and corrector.needs_logits and not drafter.emits_logits:
        problems.append(f"corrector '{c_name}' needs full draft logits, which drafter "
                        f"'{config.drafter.type}' does not emit")
    if corrector is not None and corrector.needs_features and not drafter.emits_features:
        problems.append(f"corrector '{c_name}' needs per-depth drafter features, which drafter "
                        f"'{config.drafter.type}' does not emit")
    if builder.needs_logits and not drafter.emits_logits:
        problems.append(f"tree_builder '{b_name}' needs full draft logits, which drafter "
                        f"'{config.drafter.type}' does not emit")
    if getattr(config, "auto", False):
        for field in ("tree_builder", "pruner"):
            own = getattr(getattr(config, field, None), "budget", None)
            if own is not None:
                problems.append(
                    f"budget: auto chooses the verified size each round, but {field} "
                    f"'{getattr(config, field).type}' fixes its own size ({field}.budget: {own}), which the "
                    f"verifier '{v_name}' would then always get; remove {field}.budget and set the upper bound "
                    "with auto_budget.max_budget")
    target = specs["target"].caps(TargetCapabilities) if "target" in specs else None
    if drafter.needs_target_hidden and target is not None and not target.exposes_taps:
        problems.append(f"drafter '{config.drafter.type}' conditions on the target's hidden states, but "
                        f"target '{config.target.type}' cannot expose them")
    for field, needs in (("drafter", drafter), ("corrector", corrector)):
        if needs is not None and needs.needs_target_embeddings and target is not None and not target.shares_embeddings:
            problems.append(f"{field} '{getattr(config, field).type}' shares the target's embedding and LM head, but "
                            f"target '{config.target.type}' does not offer them (SharedEmbeddings)")
    return problems


def load_pipeline_config(path: str, overrides: tuple[str, ...] | list[str] = (), *, host: PluginHost,
                         has_target_object: bool = False,
                         sweep: Sequence[tuple[str, str]] = ()) -> tuple[PipelineConfigBase, Provenance]:
    """Read, merge, override, expand and validate a pipeline file.

    ``sweep``: a sweep point's overrides, applied after ``overrides``, each with the origin its messages name
    (``(override, "--sweep budget=0")``)."""
    from specframe.config.loader import apply_override, expand_env, load_file

    data, provenance = load_file(path)
    data.pop("sweep", None)
    for override in overrides:
        data = apply_override(data, override, provenance)
    for override, origin in sweep:
        data = apply_override(data, override, provenance, origin=origin)
    data = expand_env(data)
    config = validate_pipeline(data, host, provenance=provenance, source=str(path),
                               has_target_object=has_target_object)
    return config, provenance
