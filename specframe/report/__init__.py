"""``specframe report``: the papers' tables, per-depth acceptance, stage latency, paired speedups and sweep plots
from result files written by ``specframe bench``."""

from specframe.report.render import Report
from specframe.report.summary import ALL, CellStats, Summary, SummaryOptions, summarize

__all__ = ["ALL", "CellStats", "Report", "Summary", "SummaryOptions", "summarize"]
