"""Base classes for component configs: strict, frozen pydantic models with a ``type`` discriminator.

A component's config subclasses :class:`ComponentConfig` and narrows ``type`` to a literal equal to its
registered name::

    class HeapConfig(ComponentConfig):
        type: Literal["heap"] = "heap"
        budget: int | None = Field(None, ge=1, description="overrides the pipeline budget")

Floats must be finite (``.inf`` and ``.nan`` are refused when the file is validated, not when it runs).
Size-producing stages override :meth:`ComponentConfig.output_shape` so the pipeline's budget can be bounded
by what they produce (:mod:`specframe.config.bounds`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from specframe.config.bounds import StageShape


class ComponentConfig(BaseModel):
    """Config of one pipeline stage; unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    type: str

    def output_shape(self, upstream: StageShape) -> StageShape:
        """The most this stage produces per round given what reaches it (default: ``upstream`` unchanged)."""
        return upstream
