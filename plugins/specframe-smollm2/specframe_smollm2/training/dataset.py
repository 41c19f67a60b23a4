"""In-memory training data: shards -> sequences, the held-out split, tap statistics and anchor batches.

A batch is built from ``S`` sequences and ``K`` random anchors each. An anchor ``a`` lies in the response
(``P <= a <= L - 2``); its block covers positions ``a .. a + bs - 1`` with token ``ids[a]`` at slot 0 (the bonus)
and masks elsewhere, and in the shift layout slot ``j`` predicts ``ids[a + 1 + j]``. The block may use the context
taps of positions ``< a`` only.

Worked example: ``L = 10, P = 6, bs = 4``; anchor 7 -> labels ``ids[8], ids[9], -, -`` (slots past the end are
ignored); the soft labels of slot ``j`` are the target's top-k at position ``a + j``, stored at row
``a + j - (P - 1)`` of ``topk_ids``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specframe.errors import CheckpointError, ConfigError
from specframe.tensor_files import load_tensor_file
from specframe_smollm2.training.generate_data import SHARD_KEYS

IGNORE = -100


@dataclass
class Sequence:
    ids: torch.Tensor  # [L] int64
    prompt_len: int
    taps: torch.Tensor  # [L-1, n*H] fp16
    topk_ids: torch.Tensor  # [L-P, k] int64
    topk_logp: torch.Tensor  # [L-P, k] fp16
    index: int

    @property
    def num_anchors(self) -> int:
        return len(self.ids) - 1 - self.prompt_len  # anchors P .. L-2


@dataclass
class Batch:
    taps: torch.Tensor  # [S, T, n*H] float32 (zero padded past each sequence)
    anchors: torch.Tensor  # [S, K] int64 anchor positions
    block_ids: torch.Tensor  # [S, K, bs] int64 tokens ids[a .. a+bs-1] (the true continuation; slot 0 = bonus)
    labels: torch.Tensor  # [S, K, bs] int64 ids[a+1+j] or IGNORE
    soft_ids: torch.Tensor  # [S, K, bs, k] int64 target top-k ids per slot (0 where ignored)
    soft_logp: torch.Tensor  # [S, K, bs, k] float32


def load_sequences(directory: Path, max_shards: int | None = None) -> list[Sequence]:
    """Every sequence of the shards in ``directory`` (sorted shard order)."""
    paths = sorted(directory.glob("shard-*.pt"))[:max_shards]
    if not paths:
        raise ConfigError(f"no data shards in {directory}", hint="run the recipe's data generation first")
    out: list[Sequence] = []
    for path in paths:
        out += [seq for seq in _shard_sequences(path) if seq.num_anchors >= 1]
    return out


def _shard_sequences(path: Path) -> list[Sequence]:
    """The sequences of one shard; a truncated or malformed shard is an error naming it."""
    hint = f"delete {path}; the next `specframe train` of the recipe generates it again"
    shard = load_tensor_file(path, what="data shard", hint=hint)
    try:
        count = len(shard["ids"])
        if any(len(shard[key]) != count for key in SHARD_KEYS):
            raise ValueError("its fields hold different numbers of sequences")
        seqs = []
        for i in range(count):
            seq = Sequence(shard["ids"][i].long(), int(shard["prompt_len"][i]), shard["taps"][i],
                           shard["topk_ids"][i].long(), shard["topk_logp"][i], int(shard["index"][i]))
            length, p = len(seq.ids), seq.prompt_len
            if not 1 <= p <= length or seq.taps.shape[0] != length - 1 or seq.topk_ids.shape[0] != length - p \
                    or seq.topk_logp.shape != seq.topk_ids.shape:
                raise ValueError(f"sequence {i} has inconsistent shapes")
            seqs.append(seq)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as exc:
        raise CheckpointError(f"data shard {path} is malformed: {type(exc).__name__}: {exc}"[:400],
                              hint=hint) from None
    return seqs


def split(seqs: list[Sequence], every: int) -> tuple[list[Sequence], list[Sequence]]:
    """(train, held-out): prompt index % every == 0 is held out."""
    train = [s for s in seqs if s.index % every != 0]
    held = [s for s in seqs if s.index % every == 0]
    return train, held


def tap_rms(seqs: list[Sequence], max_rows: int = 20000) -> torch.Tensor:  # [n*H] float32
    """Per-dimension RMS of the taps over response positions (massive-activation dimensions get large values)."""
    rows = []
    total = 0
    for s in seqs:
        part = s.taps[s.prompt_len - 1:].float()
        rows.append(part)
        total += part.shape[0]
        if total >= max_rows:
            break
    x = torch.cat(rows)
    return x.pow(2).mean(0).sqrt().clamp_min(1e-3)


def make_batch(seqs: list[Sequence], anchors_per_seq: int, block_size: int, gen: torch.Generator) -> Batch:
    """Random anchors (with ``gen``) for each sequence; see the module docstring."""
    s_count = len(seqs)
    t_max = max(s.taps.shape[0] for s in seqs)
    width = seqs[0].taps.shape[1]
    k_top = max(s.topk_ids.shape[1] for s in seqs)  # sections may store different k: pad to the most
    taps = torch.zeros(s_count, t_max, width)
    anchors = torch.zeros(s_count, anchors_per_seq, dtype=torch.long)
    block_ids = torch.zeros(s_count, anchors_per_seq, block_size, dtype=torch.long)
    labels = torch.full((s_count, anchors_per_seq, block_size), IGNORE, dtype=torch.long)
    soft_ids = torch.zeros(s_count, anchors_per_seq, block_size, k_top, dtype=torch.long)
    soft_logp = torch.full((s_count, anchors_per_seq, block_size, k_top), -1e4)
    offsets = torch.arange(block_size)
    for i, s in enumerate(seqs):
        length, p = len(s.ids), s.prompt_len
        taps[i, : s.taps.shape[0]] = s.taps.float()
        n = s.num_anchors
        if n >= anchors_per_seq:
            picks = torch.randperm(n, generator=gen)[:anchors_per_seq]
        else:
            picks = torch.randint(0, n, (anchors_per_seq,), generator=gen)
        a = p + picks  # [K]
        anchors[i] = a
        pos = a[:, None] + offsets[None]  # [K, bs] block positions
        block_ids[i] = s.ids[pos.clamp(max=length - 1)]
        target_pos = pos + 1  # [K, bs]
        valid = target_pos <= length - 1
        labels[i] = torch.where(valid, s.ids[target_pos.clamp(max=length - 1)], torch.full_like(pos, IGNORE))
        rows = (pos - (p - 1)).clamp(max=s.topk_ids.shape[0] - 1)  # [K, bs]
        k = s.topk_ids.shape[1]
        soft_ids[i, :, :, :k] = torch.where(valid[..., None], s.topk_ids[rows], 0)
        soft_logp[i, :, :, :k] = torch.where(valid[..., None], s.topk_logp[rows].float(), torch.tensor(-1e4))
    return Batch(taps, anchors, block_ids, labels, soft_ids, soft_logp)
