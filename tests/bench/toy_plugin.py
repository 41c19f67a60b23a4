"""An in-process plugin for bench tests: a toy target with a character tokenizer, a ``toy`` drafter and an
``argmax`` verifier, so the harness runs end to end without any installed plugin (the AR baseline's stages
are the core's built-ins)."""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from specframe import (
    ComponentConfig,
    ComponentSpec,
    PluginHost,
    VerifierCapabilities,
    hookimpl,
)
from specframe.testing.minimal import ArgmaxWalkVerifier
from specframe.testing.toy import ToyDrafter, ToyTarget


class CharTokenizer:
    """Characters to ids ``1 + ord(c) % (V - 1)``; ids decode to letters; a minimal chat template."""

    chat_template = "toy"

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": [1 + ord(c) % (self.vocab_size - 1) for c in text]}

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(ord("a") + int(i) % 26) for i in ids)

    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool = False,
                            add_generation_prompt: bool = True, **kwargs: Any) -> str:
        text = "".join(f"<{m['role']}>{m['content']}\n" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


class ToyTargetConfig(ComponentConfig):
    type: Literal["toy_target"] = "toy_target"
    vocab: int = Field(16, ge=4)
    seed: int = 3
    max_length: int | None = None


class ToyDrafterConfig(ComponentConfig):
    type: Literal["toy"] = "toy"
    depth: int = Field(4, ge=1)
    distance: float = 0.3


class ArgmaxConfig(ComponentConfig):
    type: Literal["argmax"] = "argmax"


def build_target(cfg: ToyTargetConfig, ctx: Any) -> ToyTarget:
    target = ToyTarget.random(vocab_size=cfg.vocab, seed=cfg.seed)
    target.tokenizer = CharTokenizer(cfg.vocab)
    target.max_length = cfg.max_length
    return target


def make_plugin() -> types.ModuleType:
    mod = types.ModuleType("bench_toy_plugin")

    @hookimpl
    def specframe_target_adapters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="target", name="toy_target", config=ToyTargetConfig, factory=build_target,
                            summary="toy Markov target with a character tokenizer")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="toy", config=ToyDrafterConfig, summary="toy drafter",
                            factory=lambda cfg, ctx: ToyDrafter(ctx.target, depth=cfg.depth, distance=cfg.distance))

    @hookimpl
    def specframe_verifiers():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="verifier", name="argmax", config=ArgmaxConfig, summary="greedy walk",
                            factory=lambda cfg, ctx: ArgmaxWalkVerifier(),
                            capabilities=VerifierCapabilities(lossless=True, greedy_only=True))

    for name, fn in list(locals().items()):
        if name.startswith("specframe_"):
            setattr(mod, name, fn)
    return mod


def toy_host() -> PluginHost:
    host = PluginHost(autoload=False)
    host.register(make_plugin(), "bench_toy")
    return host


TOY_PIPELINE = """\
name: {name}
target: {{type: toy_target, vocab: 16, seed: 3}}
drafter: {{type: toy, depth: {depth}, distance: 0.3}}
budget: 8
sampling: {{temperature: 0}}
generation: {{max_new_tokens: 12}}
"""


def write_pipeline(path: Any, name: str = "toy-spec", depth: int = 4, extra: str = "") -> Any:
    path.write_text(TOY_PIPELINE.format(name=name, depth=depth) + extra, encoding="utf-8")
    return path
