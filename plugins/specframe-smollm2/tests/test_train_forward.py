"""The training-time multi-block forward equals the inference backbone run block by block over its cache."""

from __future__ import annotations

import torch
from specframe_diffusion.checkpoint import DraftModelConfig
from specframe_diffusion.models.backbone import DFlashBackbone
from specframe_smollm2.training.draft_train_model import block_attention_mask, fold_tap_scale, multi_block_forward


def _config(block_size: int = 4) -> DraftModelConfig:
    return DraftModelConfig.from_dict({
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 50, "block_size": block_size,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-6,
        "dflash_config": {"mask_token_id": 3, "target_layer_ids": [0, 2], "shift_label": True},
    })


def _random_backbone(cfg: DraftModelConfig, seed: int = 0) -> DFlashBackbone:
    backbone = DFlashBackbone(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in backbone.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (0.3 if p.dim() > 1 else 0.1) + (1.0 if p.dim() == 1 else 0))
    return backbone.eval()


def test_mask_worked_example() -> None:
    mask = block_attention_mask(torch.tensor([[2]]), ctx_len=4, block_size=2)
    expected = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 1, 0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask[0, 0], expected)


def test_multi_block_forward_matches_cached_inference() -> None:
    cfg = _config()
    backbone = _random_backbone(cfg)
    gen = torch.Generator().manual_seed(1)
    t, bs = 12, cfg.block_size
    taps = torch.randn(2, t, cfg.num_taps * cfg.hidden_size, generator=gen)  # [S, T, n*H]
    scale = torch.rand(cfg.num_taps * cfg.hidden_size, generator=gen) + 0.5
    anchors = torch.tensor([[3, 9, 5], [1, 7, 11]])  # [S, K]
    embeds = torch.randn(2, anchors.shape[1] * bs, cfg.hidden_size, generator=gen)
    with torch.no_grad():
        train_out = multi_block_forward(backbone, taps, scale, embeds, anchors)  # [S, K*bs, H]
        folded = _random_backbone(cfg)
        folded.load_state_dict(backbone.state_dict())
        folded.fc.weight.copy_(fold_tap_scale(backbone.fc.weight, scale))
        for s in range(2):
            for k, a in enumerate(anchors[s].tolist()):
                cache = folded.new_cache()
                block = embeds[s : s + 1, k * bs : (k + 1) * bs]
                ref = folded(taps[s : s + 1, :a], block, cache)  # context = positions < a
                assert torch.allclose(train_out[s, k * bs : (k + 1) * bs], ref[0], atol=1e-4), (s, a)
