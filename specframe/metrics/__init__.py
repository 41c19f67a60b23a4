"""Per-round records, run summaries and the metric definitions of the docs' metrics page."""

from specframe.metrics.records import GenerationResult, RoundRecord

__all__ = ["GenerationResult", "RoundRecord"]
