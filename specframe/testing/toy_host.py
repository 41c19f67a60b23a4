"""A plugin host that serves :class:`~specframe.testing.toy.ToyDrafter` as the ``toy`` drafter.

Tests that build pipelines from dicts (``{"drafter": {"type": "toy"}, ...}``) over a toy target use it with the
installed plugins they name, so the drafter's per-depth marginals are known exactly while the tree builders,
pruners and verifiers are the real ones::

    host = toy_drafter_host(target, depth=4, num_candidates=4, distance=0.8)
    pipe = Pipeline.from_dict({"drafter": {"type": "toy"}, ...}, target=target, host=host)
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator
from typing import Literal

from specframe.config.base import ComponentConfig
from specframe.hookspecs import hookimpl
from specframe.plugins import PluginHost
from specframe.registry import ComponentSpec
from specframe.testing.toy import ToyDrafter, ToyTarget


class ToyDrafterConfig(ComponentConfig):
    type: Literal["toy"] = "toy"


def toy_drafter_host(target: ToyTarget, *, depth: int, num_candidates: int, distance: float,
                     plugins: Iterable[str] = ("trees", "verifiers")) -> PluginHost:
    """The installed ``plugins`` and a ``toy`` drafter: ``ToyDrafter(target, depth, num_candidates, distance)``."""
    module = types.ModuleType("toy_drafter")

    @hookimpl
    def specframe_drafters() -> Iterator[ComponentSpec]:
        yield ComponentSpec(kind="drafter", name="toy", config=ToyDrafterConfig, summary="toy drafter",
                            factory=lambda cfg, ctx: ToyDrafter(target, depth=depth, num_candidates=num_candidates,
                                                                distance=distance))

    module.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    host = PluginHost(autoload=True, allowlist=set(plugins), disabled=(), trace=False)
    host.register(module, "toy_drafter")
    return host
