"""Cost-aware speculation: the measured verify-cost profile and the `budget: auto` controller.

* `CostProfile` (:mod:`.profile`): the target forward's time as a function of tokens per forward, plus the
  per-round overheads, updated online;
* `AcceptanceEstimator` (:mod:`.acceptance`): calibrated probabilities that a node's path is accepted;
* `best_width` (:mod:`.chooser`): the verification width that maximises expected tokens per second;
* `AutoBudget` (:mod:`.auto_budget`): per round and row, draft or decode plainly, and how many nodes to verify;
* `ControllerMemory` (:mod:`.memory`): what the controller learnt from earlier requests;
* :mod:`.measure`: measuring the verify curve and the profile cache.
"""

from specframe.cost.acceptance import AcceptanceEstimator
from specframe.cost.auto_budget import AutoBudget, AutoBudgetSettings
from specframe.cost.chooser import best_width
from specframe.cost.memory import ControllerMemory
from specframe.cost.profile import CostProfile

__all__ = ["AcceptanceEstimator", "AutoBudget", "AutoBudgetSettings", "ControllerMemory", "CostProfile", "best_width"]
