"""One dtype table and one device resolver (:mod:`specframe.placement`), and the declared embedding sharing
(:class:`~specframe.interfaces.SharedEmbeddings` with the ``shares_embeddings`` capability)."""

from __future__ import annotations

import types

import pytest
import torch

from specframe import ComponentConfig, ComponentSpec, PluginHost, hookimpl
from specframe.config import validate_pipeline
from specframe.errors import ConfigError
from specframe.placement import resolve_device, resolve_dtype
from specframe.registry import DrafterCapabilities

from . import fake_components


def test_dtype_names_and_auto() -> None:
    assert resolve_dtype("bfloat16", field="target.dtype") is torch.bfloat16
    assert resolve_dtype("auto", field="drafter.dtype", follow=torch.float16) is torch.float16
    assert resolve_dtype("auto", field="drafter.dtype") is torch.float32
    with pytest.raises(ConfigError, match=r"unknown drafter\.dtype 'half'"):
        resolve_dtype("half", field="drafter.dtype")


def test_device_names_and_auto() -> None:
    assert resolve_device("cpu", field="target.device") == torch.device("cpu")
    assert resolve_device("auto", field="drafter.device", follow="cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto", field="target.device").type == expected
    with pytest.raises(ConfigError, match=r"drafter\.device 'gpu0' is not a device name"):
        resolve_device("gpu0", field="drafter.device")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            resolve_device("cuda:0", field="target.device")


def _embedding_drafter_plugin() -> types.ModuleType:
    from typing import Literal

    class Config(ComponentConfig):
        type: Literal["embed_draft"] = "embed_draft"

    mod = types.ModuleType("embed_draft_plugin")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="embed_draft", config=Config, factory=lambda cfg, ctx: None,
                            capabilities=DrafterCapabilities(needs_target_embeddings=True), summary="shares embeddings")

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    return mod


def test_a_drafter_sharing_embeddings_needs_a_target_that_offers_them() -> None:
    host = PluginHost(autoload=False)
    host.register(fake_components, "fake")
    host.register(_embedding_drafter_plugin(), "embed")
    data = {"target": {"type": "fake_target"}, "drafter": {"type": "embed_draft"},
            "verifier": {"type": "argmax"}}
    with pytest.raises(ConfigError, match="does not offer them"):
        validate_pipeline(data, host)
