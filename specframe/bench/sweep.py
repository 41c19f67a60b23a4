"""``sweep:`` in pipeline files: one pipeline per point of a grid over dotted keys.

A pipeline file may hold::

    sweep:
      pruner.budget: [16, 32, 64, 128]
      tree_builder.width: [4, 8]

which expands to the 4 × 2 = 8 points of the Cartesian product, keys in file order, each applied as a
``--set key=value`` override after the file's own overrides. ``specframe bench --sweep KEY=[v1,v2]`` adds or
replaces a key from the command line. A point's label, ``pruner.budget=16,tree_builder.width=4``, names the
method in result files (``dartree[pruner.budget=16,tree_builder.width=4]``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specframe.errors import ConfigError
from specframe.files import parse_yaml

#: Most points one sweep grid may have.
MAX_SWEEP_POINTS = 1024


@dataclass(frozen=True)
class SweepPoint:
    """One grid point: dotted key -> value."""

    values: dict[str, Any] = field(default_factory=dict)

    def overrides(self) -> list[str]:
        """``key=value`` overrides (values as JSON, which the override parser reads back as YAML)."""
        return [f"{key}={json.dumps(value)}" for key, value in self.values.items()]

    @property
    def label(self) -> str:
        return ",".join(label for _, label in self.labels())

    def labels(self) -> list[tuple[str, str]]:
        """``(key, "key=value")`` per key, in the order of :meth:`overrides`."""
        return [(key, f"{key}={_show(value)}") for key, value in self.values.items()]


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def parse_sweep(raw: Any, *, where: str = "sweep") -> dict[str, list[Any]]:
    """Validate a ``sweep:`` mapping: dotted-key strings to non-empty lists (a scalar means a list of one)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"`sweep:` must map dotted keys to lists of values, found {type(raw).__name__}",
                          where=where, hint="example: sweep: {pruner.budget: [16, 32, 64]}")
    out: dict[str, list[Any]] = {}
    for key, values in raw.items():
        if not isinstance(key, str) or not key.strip() or any(not part for part in key.split(".")):
            raise ConfigError(f"sweep key {key!r} is not a dotted field path", where=where,
                              hint="example: tree_builder.width")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"sweep key '{key}' has an empty list of values", where=where,
                              hint="give at least one value, e.g. [4, 8]")
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            raise ConfigError(f"sweep key '{key}' repeats a value: {values}", where=where,
                              hint="list each value once")
        out[key] = values
    return out


def parse_cli_sweep(items: tuple[str, ...] | list[str]) -> dict[str, list[Any]]:
    """``("pruner.budget=[16,32]", "tree_builder.width=8")`` -> ``{"pruner.budget": [16, 32], ...}``."""
    raw: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--sweep {item}: expected KEY=[v1,v2,...]",
                              hint="example: --sweep pruner.budget=[16,32]")
        try:
            raw[key.strip()] = parse_yaml(value, source=f"--sweep {item}")[0]
        except ConfigError as exc:
            raise ConfigError(f"--sweep {item}: the values are not a YAML list ({exc.message})",
                              hint="example: --sweep pruner.budget=[16,32]") from None
    return parse_sweep(raw, where="--sweep")


def expand_sweep(sweep: Mapping[str, list[Any]]) -> list[SweepPoint]:
    """Every point of the grid, the last key varying fastest; one empty point when there is no sweep.

    A grid of more than :data:`MAX_SWEEP_POINTS` points is refused (each point is a pipeline to build and run).
    """
    keys = list(sweep)
    points = math.prod(len(v) for v in sweep.values())
    if points > MAX_SWEEP_POINTS:
        sizes = " x ".join(f"{len(v)} ({k})" for k, v in sweep.items())
        raise ConfigError(f"the sweep has {points} points ({sizes}); at most {MAX_SWEEP_POINTS} are run at once",
                          hint="sweep fewer values, or split the grid over several bench runs into the same --output")
    return [SweepPoint(dict(zip(keys, combo, strict=True))) for combo in itertools.product(*sweep.values())]
