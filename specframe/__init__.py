"""specframe: composable speculative-decoding strategies.

A decode round is a pipeline of stages around a target model:
Drafter -> Corrector -> TreeBuilder -> Pruner -> Verifier. Every concrete stage is a plugin.
"""
# ruff: noqa: E402  (the start-up interrupt handler goes in before the slow imports)

from specframe.startup import quiet_interrupts_while_starting

quiet_interrupts_while_starting()  # Ctrl-C while the command line starts: one line, not a traceback

from specframe.config.base import ComponentConfig
from specframe.errors import SpecframeError
from specframe.interfaces import (
    BuildContext,
    Corrector,
    DecodeState,
    Drafter,
    Pruner,
    RoundContext,
    TargetModel,
    TreeBuilder,
    Verifier,
)
from specframe.plugins import PluginHost, hookimpl
from specframe.registry import (
    ComponentSpec,
    CorrectorCapabilities,
    DrafterCapabilities,
    PrunerCapabilities,
    TargetCapabilities,
    TreeBuilderCapabilities,
    VerifierCapabilities,
)
from specframe.sampling.noise import RoundNoise
from specframe.tree import DraftTree, check_tree
from specframe.types import DraftProposal, SamplingParams, TargetOutput, VerifyResult

__version__ = "0.1.0"

__all__ = [
    "BuildContext",
    "ComponentConfig",
    "ComponentSpec",
    "Corrector",
    "CorrectorCapabilities",
    "DecodeState",
    "DraftProposal",
    "DraftTree",
    "Drafter",
    "DrafterCapabilities",
    "PluginHost",
    "Pruner",
    "PrunerCapabilities",
    "RoundContext",
    "RoundNoise",
    "SamplingParams",
    "SpecframeError",
    "TargetCapabilities",
    "TargetModel",
    "TargetOutput",
    "TreeBuilder",
    "TreeBuilderCapabilities",
    "Verifier",
    "VerifierCapabilities",
    "VerifyResult",
    "__version__",
    "check_tree",
    "hookimpl",
]
