"""A user's bad input is a one-screen ``SpecframeError``; a component breaking its contract is a
``ContractError`` that names the component and its distribution (a plugin bug, exit status 1 in the CLI)."""

from __future__ import annotations

import types
from typing import Literal

import pytest
import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import tiny_causal_lm

from specframe import ComponentConfig, ComponentSpec, PluginHost, SpecframeError, VerifierCapabilities, hookimpl
from specframe.errors import ContractError
from specframe.interfaces import RoundContext, Verifier
from specframe.pipeline import Pipeline
from specframe.tree import DraftTree
from specframe.types import VerifyResult


class _SkipRootConfig(ComponentConfig):
    type: Literal["skip_root"] = "skip_root"


class SkipRootVerifier(Verifier):
    """Broken: reports a path that does not start at the root."""

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        return VerifyResult(accepted_nodes=torch.tensor([[1]]), num_accepted=torch.tensor([0]),
                            bonus_token=torch.tensor([0]))


def _host() -> PluginHost:
    mod = types.ModuleType("broken_verifier")

    @hookimpl
    def specframe_verifiers():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="verifier", name="skip_root", config=_SkipRootConfig, summary="broken",
                            factory=lambda c, x: SkipRootVerifier(), capabilities=VerifierCapabilities(lossless=True))

    mod.specframe_verifiers = specframe_verifiers  # type: ignore[attr-defined]
    host = PluginHost()
    host.register(mod, "broken", distribution="specframe-broken-verifier", version="0.0.1")
    return host


def test_a_contract_violation_names_the_component_and_its_distribution() -> None:
    target = HFTarget.from_model(tiny_causal_lm("llama", vocab_size=32))
    pipe = Pipeline.from_dict({"drafter": {"type": "ngram", "num_speculative_tokens": 2}, "budget": 2,
                               "verifier": {"type": "skip_root"}}, target=target, host=_host())
    with pytest.raises(ContractError) as info:
        pipe.generate([1, 2, 3, 1, 2], 4)  # the drafter drafts, so the broken verifier decides the round
    exc = info.value
    assert not isinstance(exc, SpecframeError)  # a bug, not a hint about the user's input
    assert (exc.stage, exc.component, exc.distribution) == ("verifier", "skip_root", "specframe-broken-verifier")
    assert "verifier 'skip_root' (distribution specframe-broken-verifier) broke its contract" in str(exc)
    assert "bug in specframe-broken-verifier" in str(exc)


def test_bad_user_input_stays_a_one_screen_error() -> None:
    target = HFTarget.from_model(tiny_causal_lm("llama", vocab_size=32))
    pipe = Pipeline.from_dict({"drafter": {"type": "none"}}, target=target)
    with pytest.raises(SpecframeError, match="max_new_tokens must be an integer from 1"):
        pipe.generate([1, 2, 3], 0)
