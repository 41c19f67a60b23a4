"""Test helpers: a tiny random Llama target and target-generated shards for it (sub-second, offline).

Example::

    model = tiny_llama()
    write_tiny_shards(model, tmp_path / "data", num_seqs=24, taps=(0, 1, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from specframe.tensor_files import save_tensor_file
from specframe_smollm2.cache import target_dir
from specframe_smollm2.training.generate_data import generate_batch_ids
from specframe_smollm2.training.recipe import Recipe

TINY_VOCAB = 96
#: The converted SmolLM2 of the user's cache, resolved at import (before a test moves ``$SPECFRAME_CACHE``).
CONVERTED_TARGET = target_dir()


def private_cache(root: Path, monkeypatch: Any) -> Path:
    """Point ``$SPECFRAME_CACHE`` at ``root`` with the converted target linked in, so what a test run learns
    (cost profiles, controller memory, kernel choices) never lands in the user's cache."""
    root.mkdir(parents=True, exist_ok=True)
    link = root / CONVERTED_TARGET.name
    if not link.exists():
        link.symlink_to(CONVERTED_TARGET)
    monkeypatch.setenv("SPECFRAME_CACHE", str(root))
    return root


def tiny_llama(seed: int = 0, *, hidden: int = 32, layers: int = 4, vocab: int = TINY_VOCAB) -> Any:
    """A random ``LlamaForCausalLM`` (2 heads, 1 KV head, tied embeddings), eval mode, float32."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=hidden // 2, tie_word_embeddings=True,
                      max_position_embeddings=512, eos_token_id=1, pad_token_id=1, bos_token_id=0)
    cfg._attn_implementation = "sdpa"
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)  # transformers initialises from the global RNG; restored right after
    try:
        model = LlamaForCausalLM(cfg).eval()
    finally:
        torch.random.set_rng_state(gen_state)
    with torch.no_grad():  # sharper logits so greedy responses are not constant
        model.model.embed_tokens.weight.mul_(20.0)
    return model


def write_tiny_shards(model: Any, out_dir: Path, *, num_seqs: int = 24, batch_size: int = 8,
                      prompt_len: int = 6, max_new_tokens: int = 24, taps: Sequence[int] = (0, 1, 2),
                      topk: int = 4, seed: int = 0) -> list[Path]:
    """Random prompts (ids 2..V-1, varied lengths, left padded) answered greedily by ``model``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    paths = []
    for b, start in enumerate(range(0, num_seqs, batch_size)):
        n = min(batch_size, num_seqs - start)
        lengths = torch.randint(prompt_len // 2, prompt_len + 1, (n,), generator=gen)
        ids = torch.full((n, prompt_len), 1, dtype=torch.long)
        attn = torch.zeros(n, prompt_len, dtype=torch.long)
        for i, length in enumerate(lengths.tolist()):
            ids[i, prompt_len - length:] = torch.randint(2, vocab, (length,), generator=gen)
            attn[i, prompt_len - length:] = 1
        shard = generate_batch_ids(model, ids, attn, list(range(start, start + n)), max_new_tokens=max_new_tokens,
                                   taps=taps, topk=topk)
        path = out_dir / f"shard-{b:05d}.pt"
        save_tensor_file(shard, path)
        paths.append(path)
    return paths


def tiny_recipe(kind: str, root: Path, data: Path, *, steps: int = 6, base: Path | None = None,
                taps: tuple[int, ...] = (0, 1, 2), **extra: Any) -> Recipe:
    """A fast recipe of ``kind`` for the tiny target and its shards (tap layers 0, 1, 2; block 4)."""
    fields: dict[str, Any] = dict(
        kind=kind, name=f"tiny-{kind}", output=str(root / f"out-{kind}"), work_dir=str(root / f"work-{kind}"),
        threads=1, checkpoint_every=3,
        data=dict(dir=str(data), taps=taps, heldout_every=4),
        drafter=dict(block_size=4, num_layers=2, init_layers=(2, 3), mask_token_id=1),
        head=dict(gru_hidden_dim=16, emb_dim=8, markov_rank=8),
        optim=dict(steps=steps, batch_seqs=4, anchors=4, warmup=2, lr=3e-3),
        loss=dict(sampled_vocab=8, soft_topk=2), eval=dict(every=100, seqs=4, anchors=4),
    )
    if base is not None:
        fields["base"] = str(base)
    fields.update(extra)
    return Recipe.model_validate(fields)
