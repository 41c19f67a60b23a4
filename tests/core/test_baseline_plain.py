"""The plain baseline of ``bench`` and ``run --compare-ar`` is plain: no controller, no profile, no taps, no drafter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import tiny_causal_lm

from specframe import DecodeState, Drafter, DraftProposal, PluginHost
from specframe.bench.methods import build_methods
from specframe.builtin.baseline import ar_baseline
from specframe.pipeline import Pipeline


class TappingDrafter(Drafter):
    """Conditions on layer 0 of the target (like the block drafters) and proposes the root again."""

    target_layers = (0,)
    supports_batch = True

    def propose(self, state: DecodeState) -> DraftProposal:
        root = state.root
        return DraftProposal(root=root, tokens=root.view(-1, 1, 1), logprobs=torch.zeros(root.shape[0], 1, 1))


@pytest.fixture
def pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    target = HFTarget.from_model(tiny_causal_lm("llama", vocab_size=64))
    data = {"budget": "auto", "drafter": {"type": "ngram", "num_speculative_tokens": 2},
            "generation": {"chat_template": False, "stop_at_eos": False}}
    pipe = Pipeline.from_dict(data, target=target)
    pipe.stages.drafter = TappingDrafter()  # a drafter that needs taps, sharing the target with the baseline
    return pipe


def spy_taps(monkeypatch: pytest.MonkeyPatch, target: HFTarget) -> list[tuple[int, ...]]:
    seen: list[tuple[int, ...]] = []
    real = target.ragged_batch

    def spy(taps: Any = ()) -> Any:
        seen.append(tuple(taps))
        return real(taps)

    monkeypatch.setattr(target, "ragged_batch", spy)
    return seen


def test_the_compare_ar_baseline_has_no_controller_and_no_taps(pipe: Pipeline, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    base = ar_baseline(pipe, "plain decoding")
    assert not base.config.auto and not base.settings.drafts
    seen = spy_taps(monkeypatch, pipe.target)  # type: ignore[arg-type]
    pipe.generate([1, 2, 3, 4], 6)  # the drafting pipeline taps layer 0 for its own forwards
    assert seen == [(0,)] and pipe.auto_budget is not None
    profiles = sorted(tmp_path.rglob("*.json"))
    base.generate([1, 2, 3, 4], 6)
    base.generate_batch([[1, 2], [3, 4, 5]], 4)
    assert seen[1:] == [(), ()]  # the baseline's forwards tap nothing
    assert base.auto_budget is None
    assert sorted(tmp_path.rglob("*.json")) == profiles  # and it wrote no profile or memory
    assert not pipe.target.runner.taps.layer_ids  # no hook left on the shared target  # type: ignore[attr-defined]


def test_the_bench_baseline_is_the_same_plain_pipeline(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: p\ntarget: {type: hf, model: unused}\nbudget: auto\n"
                    "drafter: {type: ngram, num_speculative_tokens: 2}\n")
    target = HFTarget.from_model(tiny_causal_lm("llama", vocab_size=64))
    methods = build_methods([str(path)], host=PluginHost(), target=target)
    baseline = next(m for m in methods if m.baseline)
    assert not baseline.pipeline.config.auto and not baseline.pipeline.settings.drafts
