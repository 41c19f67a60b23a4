"""Pipeline configuration: component configs, the registry-built pipeline model, and the YAML loader."""

from specframe.config.base import ComponentConfig

__all__ = ["ComponentConfig"]
