"""Pipeline configuration: component configs, the registry-built pipeline model, and the YAML loader."""

from specframe.config.base import ComponentConfig
from specframe.config.pipeline import build_pipeline_model
from specframe.config.validate import load_pipeline_config, validate_pipeline

__all__ = ["ComponentConfig", "build_pipeline_model", "load_pipeline_config", "validate_pipeline"]
