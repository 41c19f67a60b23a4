"""Base classes for config models: strict, frozen pydantic models; component configs add a ``type`` discriminator.

A component's config subclasses :class:`ComponentConfig` and narrows ``type`` to a literal equal to its
registered name::

    class HeapConfig(ComponentConfig):
        type: Literal["heap"] = "heap"
        budget: int | None = Field(None, ge=1, description="overrides the pipeline budget")

Every config model (:class:`StrictConfigModel`) refuses unknown fields, non-finite floats (``.inf``, ``.nan``)
and booleans given for numbers (``budget: yes`` is not 1), so such values fail when the file is validated, not
when it runs. Size-producing stages override :meth:`ComponentConfig.output_shape` so the pipeline's budget can
be bounded by what they produce (:mod:`specframe.config.bounds`).
"""

from __future__ import annotations

import types
import typing
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from specframe.config.bounds import StageShape


#: Error type of a boolean given for a number; its context names the field.
BOOLEAN_NUMBER = "boolean_number"


def _accepts_bool(annotation: Any) -> bool:
    """True if a field of this annotation may hold a boolean (bool, Any, or a union/literal containing one)."""
    if annotation is bool or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return any(_accepts_bool(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _accepts_bool(typing.get_args(annotation)[0])
    return not (annotation in (int, float) or origin is not None or isinstance(annotation, type))


class StrictConfigModel(BaseModel):
    """A frozen config model with the checks of the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name) if isinstance(name, str) else None
                if field is not None and isinstance(value, bool) and not _accepts_bool(field.annotation):
                    raise PydanticCustomError(BOOLEAN_NUMBER, "got the boolean {value}; give a number or text",
                                              {"field": name, "value": str(value).lower()})
        return data


class ComponentConfig(StrictConfigModel):
    """Config of one pipeline stage; unknown fields are rejected."""

    type: str

    def output_shape(self, upstream: StageShape) -> StageShape:
        """The most this stage produces per round given what reaches it (default: ``upstream`` unchanged)."""
        return upstream
