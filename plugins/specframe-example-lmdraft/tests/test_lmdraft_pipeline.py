"""``examples/lm-draft.yaml`` end to end: the pipeline validates, and at temperature 0 it emits exactly the
tokens of plain greedy decoding, with draft models that are always, sometimes and rarely right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from lmdraft_testkit import greedy_reference, save_draft, target_model
from specframe_hf import HFTarget

from specframe.cli import run_cli
from specframe.decode.request import Request
from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost

PIPELINE = Path(__file__).resolve().parents[3] / "examples" / "lm-draft.yaml"
PROMPT = [7, 99, 3, 250, 18, 42, 7, 99, 12]
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return PluginHost(autoload=True, allowlist=["lmdraft", "hf", "trees", "verifiers"], disabled=(), trace=False)


@pytest.fixture(scope="module")
def expected() -> list[int]:
    return greedy_reference(target_model(), PROMPT, NEW_TOKENS)


@pytest.mark.parametrize("builder", ["heap", "chain"])
@pytest.mark.parametrize("kind", ["same", "noisy", "other"])
def test_pipeline_file_is_greedy_exact(kind: str, builder: str, host: PluginHost, expected: list[int],
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    draft_dir = save_draft(tmp_path_factory.mktemp(f"draft-{kind}"), kind)
    overrides = [f"drafter.model={draft_dir}", f"tree_builder.type={builder}", "generation.stop_at_eos=false"]
    pipe = Pipeline.from_yaml(PIPELINE, overrides=overrides, target=HFTarget.from_model(target_model()), host=host)
    result = pipe.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS)
    assert result.tokens == expected
    if kind == "same":  # the draft's rollout is the target's: the chain is accepted whole, the heap's best path too
        assert all(r.accepted >= 1 for r in result.rounds)
        if builder == "chain":
            assert all(r.accepted == 4 for r in result.rounds[:-1])
    if kind == "noisy":
        assert result.tau > 1.0


def test_cli_validates_the_pipeline_and_names_the_provider(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["validate", str(PIPELINE)], host=PluginHost()) == 0
    assert "smollm2-lm-draft" in capsys.readouterr().out
    assert run_cli(["plugins", "--json"], host=PluginHost()) == 0
    plugins = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert plugins["lmdraft"]["distribution"] == "specframe-example-lmdraft"
    assert plugins["lmdraft"]["components"] == ["drafter:lm_draft"]
    assert plugins["lmdraft"]["hooks"] == ["specframe_drafters"]


def test_batched_rows_keep_their_own_draft_cache(host: PluginHost, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Rows of a batch (each with its own fork of the drafter) draft exactly as when decoded alone."""
    draft_dir = save_draft(tmp_path_factory.mktemp("draft-batch"), "noisy")
    overrides = [f"drafter.model={draft_dir}", "tree_builder.type=heap", "generation.stop_at_eos=false"]
    model = target_model()
    pipe = Pipeline.from_yaml(PIPELINE, overrides=overrides, target=HFTarget.from_model(model), host=host)
    prompts = [PROMPT, PROMPT[:3], [5, 8, 13, 21, 34, 55, 89, 144, 233, 17, 61]]
    limits = [NEW_TOKENS, 7, 15]
    requests = [Request(torch.tensor([p]), n) for p, n in zip(prompts, limits, strict=True)]
    results = pipe.generate_batch(requests, batch_size=2)
    for prompt, n, result in zip(prompts, limits, results, strict=True):
        assert result.tokens == greedy_reference(model, prompt, n)
        alone = pipe.generate(torch.tensor([prompt]), max_new_tokens=n)
        assert [(r.nodes, r.accepted) for r in result.rounds] == [(r.nodes, r.accepted) for r in alone.rounds]
