"""The methods of a bench run: pipeline files × sweep points, one shared target, and the AR baseline.

The first pipeline builds the target; every other method reuses that object, and, when its drafter section
equals the previous method's, every unchanged stage (so a budget sweep loads its drafter once). All methods
must name the same target.

The autoregressive baseline (:func:`specframe.builtin.baseline.ar_baseline`) is the first method; it shares
the target: the same loop, adapter and prompts, one token per round.

The reference ``hf_generate`` (:mod:`specframe.reference`: transformers' own ``generate()`` on the same target
object) follows its *partner*, the baseline (else the first pipeline), whose prompts, sampling settings and
token count per prompt it takes; it is added when the target offers ``generate()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specframe.bench.sweep import SweepPoint, expand_sweep, parse_sweep
from specframe.builtin.baseline import BASELINE_NAME, ar_baseline
from specframe.config.loader import config_hash, load_file
from specframe.config.validate import load_pipeline_config
from specframe.errors import ConfigError
from specframe.interfaces import TargetModel
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost
from specframe.reference import REFERENCE_NAME, supports_reference


@dataclass
class Method:
    """One pipeline under test."""

    name: str  # label in result files and reports
    pipeline: Pipeline
    base_name: str  # the file's `name:` (equal to `name` outside sweeps)
    source: str  # pipeline file, or "baseline"
    sweep: dict[str, Any] = field(default_factory=dict)
    baseline: bool = False
    reference: bool = False  # transformers' generate() (specframe.reference), not a pipeline run
    partner: str | None = None  # the reference's partner method: its prompts and token counts

    @property
    def target_hash(self) -> str:
        return target_hash(self.pipeline)


def target_hash(pipe: Pipeline) -> str:
    target = getattr(pipe.config, "target", None)
    return config_hash({"target": target.model_dump(mode="json") if target is not None else None})


def _reusable(previous: Pipeline, config: Any) -> Pipeline | None:
    """``previous`` if its stages may be shared with a pipeline of ``config``, else None.

    ``Pipeline.from_config(reuse=...)`` shares every stage whose section is unchanged. Factories may also read
    other sections through ``BuildContext.pipeline`` (a checkpoint head reads the drafter's checkpoint path),
    so sharing is limited to pipelines with the same drafter section; sweeps over budgets, widths, pruners or
    β still build the drafter once.
    """
    return previous if previous.config.drafter == config.drafter else None


def _method_name(base: str, point: SweepPoint) -> str:
    return f"{base}[{point.label}]" if point.values else base


def build_methods(paths: Sequence[str | Path], *, host: PluginHost, overrides: Sequence[str] = (),
                  cli_sweep: Mapping[str, list[Any]] | None = None, target: TargetModel | None = None,
                  baseline_name: str | None = BASELINE_NAME, reference: bool = True) -> list[Method]:
    """Build every (file, sweep point) pipeline on one target, then the baseline (first) unless disabled, then
    the ``hf_generate`` reference right after its partner when ``reference`` and the target offers it."""
    if not paths:
        raise ConfigError("no pipeline file given", hint="specframe bench PIPELINE.yaml [MORE.yaml ...]")
    methods: list[Method] = []
    for path in paths:
        data, provenance = load_file(path)
        sweep = parse_sweep(data.get("sweep"), where=provenance.get(("sweep",), str(path)))
        sweep.update(cli_sweep or {})
        file_sweep = provenance.get(("sweep",), str(path))
        for point in expand_sweep(sweep):
            shared = methods[0].pipeline.target if methods else target
            origins = [f"--sweep {label}" if key in (cli_sweep or {}) else f"{file_sweep} (sweep: {label})"
                       for key, label in point.labels()]
            config, _ = load_pipeline_config(str(path), overrides, host=host, has_target_object=shared is not None,
                                             sweep=list(zip(point.overrides(), origins, strict=True)))
            reuse = _reusable(methods[-1].pipeline, config) if methods else None
            pipe = Pipeline.from_config(config, target=shared, host=host, reuse=reuse)
            name = _method_name(config.name, point)
            if methods and target is None and target_hash(pipe) != methods[0].target_hash:
                raise ConfigError(f"{path} ({name}) uses a different target than {methods[0].source} "
                                  f"({methods[0].name})",
                                  hint="a bench run compares methods on one target; run one bench per target "
                                       "(they may append to the same --output file)")
            methods.append(Method(name=name, pipeline=pipe, base_name=config.name, source=str(path),
                                  sweep=dict(point.values)))
    if baseline_name is not None:
        methods.insert(0, build_baseline(methods[0], baseline_name))
    if reference and supports_reference(methods[0].pipeline):
        methods.insert(1, build_reference(methods[0]))
    seen: dict[str, str] = {}
    for method in methods:
        if method.name in seen:
            raise ConfigError(f"two methods are named '{method.name}' ({seen[method.name]} and {method.source})",
                              hint="give each pipeline file its own `name:` (the AR baseline is "
                                   f"'{baseline_name}', change it with --baseline-name; the generate() "
                                   f"reference is '{REFERENCE_NAME}', leave it out with --no-reference)")
        seen[method.name] = method.source
    return methods


def build_baseline(first: Method, name: str) -> Method:
    """The AR baseline sharing ``first``'s target (see the module docstring)."""
    pipe = ar_baseline(first.pipeline, name, source=first.source,
                       hint="install the plugins providing these components (`specframe components`), "
                            "or pass --no-baseline")
    return Method(name=name, pipeline=pipe, base_name=name, source="baseline", baseline=True)


def build_reference(partner: Method) -> Method:
    """The ``hf_generate`` reference on ``partner``'s pipeline (its target, prompts and sampling settings)."""
    return Method(name=REFERENCE_NAME, pipeline=partner.pipeline, base_name=REFERENCE_NAME, source="reference",
                  reference=True, partner=partner.name)
