"""Cost-aware speculation: the measured verify-cost profile and the `budget: auto` controller.

* `CostProfile` (:mod:`.profile`): the target forward's time as a function of tokens per forward, plus the
  per-round overheads, updated online;
* `AcceptanceEstimator` (:mod:`.acceptance`): calibrated probabilities that a node's path is accepted;
* `best_verify_size` (:mod:`.chooser`): the verification size that maximises expected tokens per second;
* `AutoBudget` (:mod:`.auto_budget`): per round, draft or decode plainly, and how many nodes to verify;
* :mod:`.measure`: measuring the verify curve and the profile cache.
"""

from specframe.cost.acceptance import AcceptanceEstimator
from specframe.cost.auto_budget import AutoBudget, AutoBudgetSettings
from specframe.cost.chooser import best_verify_size
from specframe.cost.profile import CostProfile

__all__ = ["AcceptanceEstimator", "AutoBudget", "AutoBudgetSettings", "CostProfile", "best_verify_size"]
