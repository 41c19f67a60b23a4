"""Training on a tiny target: resume after an interruption loses no step; exports load as published layouts."""

from __future__ import annotations

import json

import pytest
import torch
from specframe_diffusion.checkpoint import load_checkpoint, open_checkpoint
from specframe_smollm2.testing import tiny_recipe
from specframe_smollm2.training.trainer import train

from specframe.errors import CheckpointError


def _weights(path) -> dict[str, torch.Tensor]:
    return {k: v.float() for k, v in load_checkpoint(path).groups()["backbone"].items()}


def test_resume_after_interruption_matches_an_uninterrupted_run(tmp_path, tiny_target, tiny_data) -> None:
    quiet = {"target_dir": tmp_path, "target_model": tiny_target, "progress": False, "log": lambda m: None}
    train(tiny_recipe("drafter", tmp_path / "a", tiny_data, steps=6), **quiet)
    recipe = tiny_recipe("drafter", tmp_path / "b", tiny_data, steps=6)
    first = train(recipe, **quiet, stop_after=3)  # the state is written at step 3, then the run "dies"
    assert first["steps"] == 3
    metrics = tmp_path / "b" / "work-drafter" / "metrics.jsonl"
    with metrics.open("a") as f:  # a killed run may have logged steps past its last checkpoint
        f.write(json.dumps({"step": 4, "loss": 9.9}) + "\n")
    logs: list[str] = []
    summary = train(recipe, **{**quiet, "log": logs.append})
    assert any("resumed" in m and "step 3" in m for m in logs)
    assert summary["steps"] == 6
    a, b = _weights(tmp_path / "a" / "out-drafter"), _weights(tmp_path / "b" / "out-drafter")
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = [json.loads(line) for line in metrics.open()]
    assert {"step": 4, "loss": 9.9} not in losses
    assert [m["step"] for m in losses] == sorted(m["step"] for m in losses)


@pytest.mark.parametrize("kind, group", [("ar_head", "domino_head"), ("markov_head", "markov_head")])
def test_heads_train_on_the_drafter_and_export_published_layouts(tmp_path, tiny_target, tiny_data, kind,
                                                                    group) -> None:
    drafter = tiny_recipe("drafter", tmp_path, tiny_data, steps=2)
    train(drafter, target_dir=tmp_path, target_model=tiny_target, progress=False, log=lambda m: None)
    head = tiny_recipe(kind, tmp_path, tiny_data, steps=3, base=tmp_path / "out-drafter")
    summary = train(head, target_dir=tmp_path, target_model=tiny_target, progress=False, log=lambda m: None)
    assert summary["base_tau"] is not None and len(summary["eval_slot_acc"]) == 4
    files = open_checkpoint(tmp_path / f"out-{kind}")
    assert files.config.family == ("domino" if kind == "ar_head" else "dspark")
    assert files.config.shift_label and files.has_group(group)
    base = _weights(tmp_path / "out-drafter")
    mine = {k: v.float() for k, v in files.group_state("backbone").items()}
    assert all(torch.equal(base[k], mine[k]) for k in base)  # the head rides on the frozen drafter


def test_head_on_a_drafter_with_other_taps_is_refused(tmp_path, tiny_target, tiny_data) -> None:
    drafter = tiny_recipe("drafter", tmp_path, tiny_data, steps=1)
    train(drafter, target_dir=tmp_path, target_model=tiny_target, progress=False, log=lambda m: None)
    head = tiny_recipe("ar_head", tmp_path, tiny_data, steps=1, base=tmp_path / "out-drafter", taps=(0, 1, 3))
    with pytest.raises(CheckpointError, match="taps layers"):
        train(head, target_dir=tmp_path, target_model=tiny_target, progress=False, log=lambda m: None)


def test_gated_markov_head_trains_its_gate(tmp_path, tiny_target, tiny_data) -> None:
    from specframe_smollm2.training.dataset import load_sequences, make_batch
    from specframe_smollm2.training.trainer import build_objective

    train(tiny_recipe("drafter", tmp_path, tiny_data, steps=1), target_dir=tmp_path, target_model=tiny_target,
          progress=False, log=lambda m: None)
    recipe = tiny_recipe("markov_head", tmp_path, tiny_data, base=tmp_path / "out-drafter",
                         head=dict(markov_rank=8, markov_head_type="gated"))
    seqs = load_sequences(tiny_data)
    gen = torch.Generator().manual_seed(0)
    objective, _ = build_objective(recipe, tiny_target, seqs, gen)
    with torch.no_grad():
        objective.head.markov_w2.weight.normal_(generator=gen)  # a trained W2, so the gate matters
    objective.loss(make_batch(seqs[:4], 4, 4, gen), gen).backward()
    assert float(objective.head.gate_proj.weight.grad.abs().sum()) > 0  # the gate is part of the trained head
