"""Reduced draft vocabularies: the EAGLE-3 ``d2t`` / ``t2d`` mapping and frequency-ranked subsets (FR-Spec).

A drafter with a reduced vocabulary scores only ``V_draft`` of the target's ``V_target`` tokens (a cheaper LM
head); candidates outside the subset are never proposed. The target still verifies over its full vocabulary,
so decoding stays lossless: sampled verifiers simply see a draft law that is zero outside the subset.

The mapping is stored as in published EAGLE-3 checkpoints (safetensors, never pickle)::

    d2t  int64 [V_draft]   target_id = draft_id + d2t[draft_id]
    t2d  bool  [V_target]  True exactly for the target ids in the subset

Worked example: ``V_target = 6``, subset ``{0, 2, 5}`` -> draft ids ``0, 1, 2`` map to target ids ``0, 2, 5``:
``d2t = [0, 1, 3]``, ``t2d = [T, F, T, F, F, T]``.

:func:`frequency_ranked` builds a subset from token counts of target-written text: the always-kept ids (EOS and
the other special tokens) first, then the most frequent tokens up to the size. Equal counts (in particular tokens
never seen in a small corpus) go to the lower id: BPE vocabularies number tokens in merge order, so a lower id is
the more common token of the tokenizer's own training text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from specframe.errors import CheckpointError, ConfigError
from specframe.files import path_problem, write_bytes

D2T, T2D = "d2t", "t2d"


@dataclass(frozen=True)
class DraftVocab:
    """A validated subset of the target vocabulary; build it with :meth:`from_target_ids` or :meth:`from_mapping`.

    Attributes:
        target_ids: ``[V_draft]`` int64, the target id of every draft id (ascending).
        target_vocab_size: ``V_target``.
        source: where the mapping came from (named in errors).
    """

    target_ids: torch.Tensor  # [V_draft] int64
    target_vocab_size: int
    source: str = "draft vocabulary"

    @property
    def size(self) -> int:
        return int(self.target_ids.shape[0])

    @property
    def d2t(self) -> torch.Tensor:  # [V_draft] int64 offsets
        return self.target_ids - torch.arange(self.size, dtype=torch.long)

    @property
    def t2d(self) -> torch.Tensor:  # [V_target] bool
        mask = torch.zeros(self.target_vocab_size, dtype=torch.bool)
        mask[self.target_ids] = True
        return mask

    def tensors(self) -> dict[str, torch.Tensor]:
        """The EAGLE-3 tensors ``{"d2t": [V_draft] int64, "t2d": [V_target] bool}``."""
        return {D2T: self.d2t.contiguous(), T2D: self.t2d.contiguous()}

    @classmethod
    def from_target_ids(cls, ids: Iterable[int] | torch.Tensor, target_vocab_size: int, *,
                        source: str = "draft vocabulary") -> DraftVocab:
        """The subset ``ids`` (any order; stored ascending). Ids out of range, repeated or none at all are errors."""
        ids_t = torch.as_tensor(list(ids) if not isinstance(ids, torch.Tensor) else ids, dtype=torch.long)
        if ids_t.dim() != 1 or ids_t.numel() == 0:
            raise CheckpointError(f"{source}: the draft vocabulary is empty or not a list of ids",
                                  hint="a reduced vocabulary keeps at least one target token")
        bad = ids_t[(ids_t < 0) | (ids_t >= target_vocab_size)]
        if bad.numel():
            raise CheckpointError(
                f"{source}: draft token maps to target id {int(bad[0])}, outside the target vocabulary "
                f"(size {target_vocab_size})",
                hint="the mapping was made for another vocabulary; rebuild it for this target")
        ordered = torch.sort(ids_t).values
        if ordered.numel() > 1 and bool((ordered[1:] == ordered[:-1]).any()):
            dup = int(ordered[1:][ordered[1:] == ordered[:-1]][0])
            raise CheckpointError(f"{source}: target id {dup} appears twice in the draft vocabulary",
                                  hint="every draft id must map to a different target id")
        return cls(ordered, int(target_vocab_size), source)

    @classmethod
    def from_mapping(cls, d2t: torch.Tensor, t2d: torch.Tensor, *, source: str) -> DraftVocab:
        """Validate the EAGLE-3 pair: dtypes, ranks, ids in range and unique, and ``t2d`` agreeing with ``d2t``."""
        if d2t.dim() != 1 or d2t.dtype not in (torch.int64, torch.int32):
            raise CheckpointError(f"{source}: d2t must be a 1-D integer tensor, found {d2t.dtype} "
                                  f"{list(d2t.shape)}", hint="d2t is int64 [V_draft] (EAGLE-3 layout)")
        if t2d.dim() != 1 or t2d.dtype != torch.bool:
            raise CheckpointError(f"{source}: t2d must be a 1-D bool tensor, found {t2d.dtype} "
                                  f"{list(t2d.shape)}", hint="t2d is bool [V_target] (EAGLE-3 layout)")
        target_ids = d2t.long() + torch.arange(d2t.shape[0], dtype=torch.long)
        vocab = cls.from_target_ids(target_ids, int(t2d.shape[0]), source=source)
        if int(t2d.sum()) != vocab.size or not bool(t2d[vocab.target_ids].all()):
            raise CheckpointError(
                f"{source}: t2d marks {int(t2d.sum())} target tokens but d2t maps {vocab.size} draft tokens to "
                "other ids", hint="d2t and t2d must describe the same subset; rebuild the mapping")
        return vocab

    def check_target(self, target_vocab_size: int) -> None:
        """Raise :class:`CheckpointError` unless the mapping was made for a vocabulary of this size."""
        if self.target_vocab_size != target_vocab_size:
            raise CheckpointError(
                f"{self.source}: the draft-vocabulary mapping is for a target vocabulary of "
                f"{self.target_vocab_size} tokens (t2d length), but the target has {target_vocab_size}",
                hint="use a mapping built for this target's tokenizer (specframe vocab-subset)")


def load_draft_vocab(path: str | Path) -> DraftVocab:
    """Read and validate a mapping file (safetensors with ``d2t`` and ``t2d``)."""
    from safetensors import safe_open

    path = Path(path)
    problem = path_problem(path)
    if problem is not None:
        raise CheckpointError(f"draft-vocabulary file {path} {problem}",
                              hint="build one with `specframe vocab-subset`, or remove drafter.draft_vocab")
    try:
        with safe_open(str(path), framework="pt") as f:
            keys = set(f.keys())
            missing = [k for k in (D2T, T2D) if k not in keys]
            if missing:
                raise CheckpointError(f"draft-vocabulary file {path} has no {' / '.join(missing)} tensor",
                                      hint="the file must hold d2t (int64 [V_draft]) and t2d (bool [V_target])")
            d2t, t2d = f.get_tensor(D2T), f.get_tensor(T2D)
    except CheckpointError:
        raise
    except Exception as exc:  # any unreadable file is reported with its name
        raise CheckpointError(f"cannot read draft-vocabulary file {path}: {exc}",
                              hint="it must be a safetensors file (pickled files are never read)") from None
    return DraftVocab.from_mapping(d2t, t2d, source=str(path))


def draft_vocab_bytes(vocab: DraftVocab, *, metadata: dict[str, str] | None = None) -> bytes:
    """``vocab`` as the bytes of an EAGLE-3 mapping file (safetensors)."""
    from safetensors.torch import save

    return save(vocab.tensors(), metadata={"format": "pt", **(metadata or {})})


def save_draft_vocab(vocab: DraftVocab, path: str | Path, *, metadata: dict[str, str] | None = None) -> Path:
    """Write ``vocab`` as an EAGLE-3 mapping file through the one atomic writer (:func:`write_bytes`)."""
    return write_bytes(path, draft_vocab_bytes(vocab, metadata=metadata), what="draft-vocabulary file")


def frequency_ranked(counts: torch.Tensor, size: int, *, always: Iterable[int] = (),
                     source: str = "frequency-ranked subset") -> DraftVocab:
    """The ``size`` most frequent target tokens of ``counts`` (``[V_target]``), ``always`` ids included first."""
    v = int(counts.shape[0])
    keep = sorted({int(i) for i in always})
    bad = [i for i in keep if not 0 <= i < v]
    if bad:
        raise ConfigError(f"{source}: always-kept token id {bad[0]} is outside the vocabulary (size {v})",
                          hint="special-token ids come from the target's tokenizer")
    if not len(keep) <= size <= v:
        raise ConfigError(f"{source}: size {size} must lie between {len(keep)} (the always-kept special tokens) "
                          f"and the vocabulary size {v}", hint="choose e.g. --size 16384")
    score = counts.double().clone()
    score[keep] = float("inf")
    # Stable sort on descending counts: equal counts keep ascending ids.
    order = torch.sort(-score, stable=True).indices
    return DraftVocab.from_target_ids(order[:size], v, source=source)
