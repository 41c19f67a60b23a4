"""The path_selector and lattice_head recipe kinds on a tiny target: they learn, export layouts the correctors load,
resume, and the objective's pieces do what the papers say."""

from __future__ import annotations

import pytest
import torch
from specframe_diffusion.checkpoint import open_checkpoint
from specframe_diffusion.checkpoint.head_base import BASE_KEY, weights_sha256
from specframe_smollm2.testing import tiny_recipe
from specframe_smollm2.training.candidate_objectives import _target_gap
from specframe_smollm2.training.dataset import load_sequences, make_batch
from specframe_smollm2.training.trainer import build_objective, train

from specframe.draft_vocab import DraftVocab, save_draft_vocab
from specframe.errors import CheckpointError

HEADS = {
    "path_selector": dict(selector_rank=8, top_k=4),
    "lattice_head": dict(top_k=4, lattice=dict(hidden_size=16, num_heads=2, factor_dim=8, w_margin=0.1)),
}
QUIET = {"progress": False, "log": lambda m: None}


def _drafter(tmp_path, tiny_target, tiny_data):  # type: ignore[no-untyped-def]
    if not (tmp_path / "out-drafter").exists():
        train(tiny_recipe("drafter", tmp_path, tiny_data, steps=2), target_dir=tmp_path, target_model=tiny_target,
              **QUIET)
    return tmp_path / "out-drafter"


@pytest.mark.parametrize("kind, corrector", [("path_selector", "path_selector"), ("lattice_head", "lilicorr")])
def test_each_kind_exports_a_head_the_corrector_serves_on_the_base_drafter(tmp_path, tiny_target, tiny_data, kind,
                                                                           corrector) -> None:
    from specframe_hf import HFTarget

    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    base = _drafter(tmp_path, tiny_target, tiny_data)
    vocab = save_draft_vocab(DraftVocab.from_target_ids(range(0, 96, 2), 96), tmp_path / "half.safetensors")
    head = {**HEADS[kind], "draft_vocab": str(vocab)}
    summary = train(tiny_recipe(kind, tmp_path, tiny_data, steps=3, base=base, head=head), target_dir=tmp_path,
                    target_model=tiny_target, **QUIET)
    assert summary["base_tau"] is not None and len(summary["eval_slot_acc"]) == 4
    files = open_checkpoint(tmp_path / f"out-{kind}")
    assert files.config.family == "dflash" and files.config.head_only and not files.has_group("backbone")
    if kind == "path_selector":
        assert (files.config.selector_rank, files.config.selector_top_k) == (8, 4)
        assert files.draft_vocab().size == 48 and files.config.draft_vocab_size == 48  # codebooks: 48 + 1 rows
    else:
        assert files.config.lilicorr.candidate_topk == 4 and files.config.lilicorr.anchor == "root_embedding"
    # Served: the frozen base drafter proposes over the same draft vocabulary, the head corrects; greedy exact.
    config = {"budget": 4, "corrector": {"type": corrector, "checkpoint": str(tmp_path / f"out-{kind}")},
              "drafter": {"type": "dflash", "checkpoint": str(base), "top_k": 4, "draft_vocab": str(vocab)},
              "tree_builder": {"type": "chain"}, "generation": {"stop_at_eos": False}}
    pipe = Pipeline.from_dict(config, target=HFTarget.from_model(tiny_target), host=PluginHost())
    prompt = torch.tensor([[5, 9, 17, 3]])
    ids, plain = prompt, []
    with torch.no_grad():
        for _ in range(10):
            plain.append(int(tiny_target(ids).logits[0, -1].argmax()))
            ids = torch.cat([ids, torch.tensor([[plain[-1]]])], dim=1)
    assert pipe.generate(prompt, max_new_tokens=10).tokens == plain
    # The export records its base drafter; a path selector over another draft vocabulary of the same size is refused.
    assert files.config.raw[BASE_KEY]["weights_sha256"] == weights_sha256(base)
    if kind == "path_selector":
        odd = save_draft_vocab(DraftVocab.from_target_ids(range(1, 96, 2), 96), tmp_path / "odd.safetensors")
        with pytest.raises(CheckpointError, match="same size, other tokens"):
            Pipeline.from_dict({**config, "drafter": {**config["drafter"], "draft_vocab": str(odd)}},
                               target=HFTarget.from_model(tiny_target), host=PluginHost())


def test_only_the_head_trains_and_the_loss_falls(tmp_path, tiny_target, tiny_data) -> None:
    base = _drafter(tmp_path, tiny_target, tiny_data)
    seqs = load_sequences(tiny_data)
    for kind in HEADS:
        recipe = tiny_recipe(kind, tmp_path, tiny_data, base=base, head=HEADS[kind])
        gen = torch.Generator().manual_seed(0)
        objective, _ = build_objective(recipe, tiny_target, seqs, gen)
        batch = make_batch(seqs[:6], 6, 4, gen)
        opt = torch.optim.Adam(objective.trainable.parameters(), lr=2e-2)
        losses = []
        for _ in range(25):  # fit one batch: the objective must be learnable by the head alone
            loss = objective.loss(batch, gen)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        assert losses[-1] < 0.7 * losses[0], (kind, losses[0], losses[-1])
        assert not any(p.requires_grad for p in objective.backbone.parameters())


def test_a_draft_vocabulary_restricts_the_candidates(tmp_path, tiny_target, tiny_data) -> None:
    base = _drafter(tmp_path, tiny_target, tiny_data)
    seqs = load_sequences(tiny_data)
    ids = list(range(0, 96, 2))
    vocab = save_draft_vocab(DraftVocab.from_target_ids(ids, 96), tmp_path / "half.safetensors")
    recipe = tiny_recipe("path_selector", tmp_path, tiny_data, base=base,
                         head={**HEADS["path_selector"], "draft_vocab": str(vocab)})
    gen = torch.Generator().manual_seed(0)
    objective, _ = build_objective(recipe, tiny_target, seqs, gen)
    c = objective.candidates(make_batch(seqs[:4], 4, 4, gen))
    assert bool((c.ids % 2 == 0).all())
    odd = (c.labels % 2 == 1) & (c.labels >= 0)
    assert bool(torch.isinf(c.label_logp[odd]).all())  # a true token outside the subset is skipped
    assert float(objective.loss(make_batch(seqs[:4], 4, 4, gen), gen).detach()) > 0


def test_the_lattice_penalty_weighs_candidates_by_the_targets_gap() -> None:
    ids = torch.tensor([[[7, 3, 9]]])  # candidates of one slot; the true token is 3 (index 1)
    soft_ids = torch.tensor([[[3, 7, 5]]])
    soft_logp = torch.tensor([[[-0.1, -2.0, -4.0]]])
    gap = _target_gap(ids, torch.tensor([[1]]), soft_ids, soft_logp)
    # 7: -0.1 - (-2.0); 3: the true token, 0; 9: not in the stored top-k, the smallest stored log-prob bounds it
    assert torch.allclose(gap, torch.tensor([[[1.9, 0.0, 3.9]]]))


def test_resume_continues_a_candidate_head_run(tmp_path, tiny_target, tiny_data) -> None:
    base = _drafter(tmp_path, tiny_target, tiny_data)
    full = tiny_recipe("lattice_head", tmp_path / "a", tiny_data, steps=6, base=base, head=HEADS["lattice_head"])
    train(full, target_dir=tmp_path, target_model=tiny_target, **QUIET)
    cut = tiny_recipe("lattice_head", tmp_path / "b", tiny_data, steps=6, base=base, head=HEADS["lattice_head"])
    train(cut, target_dir=tmp_path, target_model=tiny_target, stop_after=3, **QUIET)
    train(cut, target_dir=tmp_path, target_model=tiny_target, **QUIET)
    a = open_checkpoint(tmp_path / "a" / "out-lattice_head").group_state("lilicorr_head")
    b = open_checkpoint(tmp_path / "b" / "out-lattice_head").group_state("lilicorr_head")
    assert all(torch.equal(a[k], b[k]) for k in a)
