"""Data-parallel ``specframe bench`` under ``torchrun``: questions sharded by rank, one shard file per rank, a merge.

Layout next to the result file ``OUT``::

    OUT.shards/manifest.json            world size and the (dataset, question) selection, written once by rank 0
    OUT.shards/rank-00000-of-00002.jsonl  rank 0's records: an ordinary append-only, resumable result file
    OUT.shards/rank-00001-of-00002.jsonl

Question ``q`` of the global schedule (datasets in order, questions in order) belongs to rank ``q % W``; the rank
runs every method and every turn of it, exactly as a single process would (same seeds, same rotation). When
every rank has finished, rank 0 checks that the shards hold every (method, dataset, question, turn) of the
schedule and appends them to ``OUT`` in the single-process order, skipping records already there, so the merged
file holds the same records in the same order as a one-process run, and a merge cut by a crash resumes.

Refused with the reason: a shard directory written for another world size or another dataset selection (the
manifest), a shard whose method was run with other settings (``ResultStore.check_consistent``), and a merge
while any prompt is missing from the shards (the missing prompts are named; rerun the same ``torchrun`` command
to finish them: every rank resumes its shard).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specframe.bench.methods import Method
from specframe.bench.record import RunInfo
from specframe.bench.results import RecordKey, ResultsFileError, ResultStore, read_results, record_key
from specframe.bench.runner import WorkItem, batched_groups
from specframe.distributed import DistContext
from specframe.files import MiB, ensure_dir, parse_json, read_text, write_text

MANIFEST = "manifest.json"
#: Most ranks a manifest may name (a sanity bound: far above any launch).
MAX_WORLD_SIZE = 1 << 20


def shard_dir(output: Path) -> Path:
    return output.with_name(output.name + ".shards")


def shard_path(directory: Path, rank: int, world_size: int) -> Path:
    return directory / f"rank-{rank:05d}-of-{world_size:05d}.jsonl"


def questions(items: Sequence[WorkItem]) -> list[tuple[str, str]]:
    """The (dataset, question id) pairs of a schedule, in schedule order."""
    return list(dict.fromkeys((it.dataset.name, str(it.sample.question_id)) for it in items))


def shard_items(items: Sequence[WorkItem], rank: int, world_size: int) -> list[WorkItem]:
    """The items of the questions that belong to ``rank`` (round-robin over the schedule's questions)."""
    owner = {q: i % world_size for i, q in enumerate(questions(items))}
    return [it for it in items if owner[(it.dataset.name, str(it.sample.question_id))] == rank]


def expected_keys(items: Sequence[WorkItem], methods: Sequence[Method], batch_size: int = 1) -> list[RecordKey]:
    """Every record key of a schedule, in the order a single process writes them (batched runs go dataset by
    dataset, method by method, turn by turn)."""
    if batch_size <= 1:
        return [(it.method.name, it.dataset.name, str(it.sample.question_id), turn)
                for it in items for turn in range(len(it.sample.turns))]
    return [(m.name, dataset.name, str(sample.question_id), turn)
            for dataset, samples in batched_groups(items) for m in methods
            for turn in range(max((len(x.turns) for x in samples), default=0))
            for sample in samples if turn < len(sample.turns)]


@dataclass(frozen=True)
class ShardManifest:
    """What every shard of a directory must share."""

    world_size: int
    selection: tuple[tuple[str, str], ...]  # (dataset, question id) in schedule order

    def to_json(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "selection": [list(q) for q in self.selection]}

    @classmethod
    def from_json(cls, data: Any) -> ShardManifest:
        """Parse :meth:`to_json` output; a ``ValueError`` names the field that is not what rank 0 writes."""
        if not isinstance(data, dict):
            raise ValueError(f"it holds a JSON {type(data).__name__}, not an object")
        world = data.get("world_size")
        if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= MAX_WORLD_SIZE:
            raise ValueError(f"world_size is {world!r}, not a whole number of ranks from 1 to {MAX_WORLD_SIZE}")
        selection = data.get("selection")
        if not isinstance(selection, list):
            raise ValueError(f"selection is {type(selection).__name__}, not a list of [dataset, question id] pairs")
        for i, item in enumerate(selection):
            if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
                raise ValueError(f"selection[{i}] is {item!r}, not a [dataset, question id] pair of strings")
        return cls(world_size=world, selection=tuple((d, q) for d, q in selection))

    def mismatch(self, other: ShardManifest) -> str | None:
        """Why shards written under ``other`` cannot be continued under ``self`` (None: they can)."""
        if other.world_size != self.world_size:
            return f"world size {other.world_size}, but this run has {self.world_size} ranks"
        if other.selection != self.selection:
            gone = [q for q in other.selection if q not in set(self.selection)]
            new = [q for q in self.selection if q not in set(other.selection)]
            detail = "; ".join(part for part in (
                f"not selected now: {_names(gone)}" if gone else "",
                f"new now: {_names(new)}" if new else "",
                "same questions in another order" if not gone and not new else "") if part)
            return f"another dataset selection ({detail})"
        return None


def _names(qs: Sequence[tuple[str, str]], limit: int = 5) -> str:
    shown = ", ".join(f"{d}/{q}" for d, q in qs[:limit])
    return shown + (f" and {len(qs) - limit} more" if len(qs) > limit else "")


def check_manifest(directory: Path, manifest: ShardManifest, *, write: bool) -> None:
    """Refuse a shard directory written by another launch; with ``write``, record ``manifest`` if it has none."""
    path = directory / MANIFEST
    hint = "rerun with the same command and --nproc-per-node, or write to a new file with --output"
    if path.is_file():
        try:
            text = read_text(path, what="shard manifest", max_bytes=MiB, error=ResultsFileError, hint=hint)
            existing = ShardManifest.from_json(parse_json(text, where=str(path), error=ResultsFileError, hint=hint))
        except ValueError as exc:
            raise ResultsFileError(f"{path} is not a shard manifest: {exc}", hint=hint) from None
        reason = manifest.mismatch(existing)
        if reason is not None:
            raise ResultsFileError(f"the shards in {directory} were written with {reason}", hint=hint)
    elif write:
        ensure_dir(directory, what="shard directory")
        write_text(path, json.dumps(manifest.to_json(), indent=1) + "\n", what="shard manifest")
    strays = sorted(p.name for p in directory.glob("rank-*-of-*.jsonl")
                    if not p.name.endswith(f"-of-{manifest.world_size:05d}.jsonl"))
    if strays:
        raise ResultsFileError(f"{directory} holds shards of another world size: {', '.join(strays)}", hint=hint)


def merge_shards(output: Path, directory: Path, world_size: int, keys: Sequence[RecordKey]) -> int:
    """Append every key's record from the shards to ``output`` in ``keys`` order; return how many were added.

    Refuses (naming the missing prompts and their ranks' shards) unless every key is in a shard or in ``output``.
    """
    found: dict[RecordKey, dict[str, Any]] = {}
    for rank in range(world_size):
        path = shard_path(directory, rank, world_size)
        if path.is_file():
            for record in read_results(path):
                found[record_key(record)] = record
    with ResultStore(output) as store:
        missing = [k for k in keys if k not in found and k not in store]
        if missing:
            prompts = list(dict.fromkeys((k[1], k[2]) for k in missing))
            raise ResultsFileError(
                f"cannot merge {directory} into {output}: {len(missing)} records missing for "
                f"{len(prompts)} prompts: {_names(prompts)} (method {missing[0][0]}, turn {missing[0][3]} first)",
                hint="a rank stopped early; rerun the same torchrun command: every rank resumes its shard")
        added = 0
        for key in keys:
            if key not in store:
                store.append(found[key])
                added += 1
    return added


def check_merged_output(output: Path, methods: Sequence[Method], infos: dict[str, RunInfo]) -> None:
    """Refuse to merge into an ``output`` that holds a method's records written with other settings."""
    if not output.exists():
        return
    with ResultStore(output) as store:
        for m in methods:
            store.check_consistent(m.name, infos[m.name].consistency_fields())


def prepare_shard(output: Path, items: Sequence[WorkItem], dist: DistContext) -> tuple[Path, list[WorkItem]]:
    """Check (rank 0: create) the shard directory on every rank; return this rank's shard file and items."""
    directory = shard_dir(output)
    manifest = ShardManifest(world_size=dist.world_size, selection=tuple(questions(items)))
    error: ResultsFileError | None = None
    if dist.is_main:
        try:
            check_manifest(directory, manifest, write=True)
        except ResultsFileError as exc:
            error = exc
    dist.agree(error)
    if not dist.is_main:
        try:
            check_manifest(directory, manifest, write=False)
        except ResultsFileError as exc:
            error = exc
    dist.agree(error)
    return shard_path(directory, dist.rank, dist.world_size), shard_items(items, dist.rank, dist.world_size)
