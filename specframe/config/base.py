"""Base classes for component configs: strict, frozen pydantic models with a ``type`` discriminator.

A component's config subclasses :class:`ComponentConfig` and narrows ``type`` to a literal equal to its
registered name::

    class HeapConfig(ComponentConfig):
        type: Literal["heap"] = "heap"
        budget: int | None = Field(None, ge=1, description="overrides the pipeline budget")
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ComponentConfig(BaseModel):
    """Config of one pipeline stage; unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    type: str
