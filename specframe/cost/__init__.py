"""Cost-aware speculation: the one cost model ``C(B, n)`` and the `budget: auto` controller that reads it.

* `CostProfile` (:mod:`.profile`): the target forward's time over ``B`` rows carrying ``n`` tokens, plus the
  per-round overheads, measured and updated online;
* `AcceptanceEstimator` (:mod:`.acceptance`): calibrated probabilities that a node's path is accepted;
* :mod:`.planner`: the node rule and the row rule;
* `AutoBudget` (:mod:`.auto_budget`): per round and row, draft or decode plainly, and how many nodes to verify;
* `ControllerMemory` (:mod:`.memory`): the calibration earlier requests left;
* :mod:`.measure`: measuring the cost model and the profile cache.
"""

from specframe.cost.acceptance import AcceptanceEstimator
from specframe.cost.auto_budget import AutoBudget, AutoBudgetSettings
from specframe.cost.memory import ControllerMemory
from specframe.cost.planner import node_counts, plan_counts
from specframe.cost.profile import CostProfile

__all__ = ["AcceptanceEstimator", "AutoBudget", "AutoBudgetSettings", "ControllerMemory", "CostProfile",
           "node_counts", "plan_counts"]
