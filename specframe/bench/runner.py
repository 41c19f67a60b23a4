"""The bench loop: every method on every prompt, interleaved, warm, resumable.

Order of work::

    warm-up: each method decodes the first pending prompt `warmup` times (not recorded)
    for each dataset, for each question i:
        for each method, in the method list rotated by i:        # interleaved: drift hits all methods alike
            for each turn t of the question:                     # turn 2 sees this method's own turn-1 answer
                skip if (method, dataset, question, t) is already in the result file
                decode `repeats` times (the machine's load sampled around them); record the median-time run;
                append + fsync

Rotating the order per question keeps a method from always running right after the same neighbour (cache and thermal
effects). The ``hf_generate`` reference runs right after its partner (the baseline) in every rotation: it decodes
exactly as many tokens as the partner's record of the same turn holds (:mod:`specframe.reference`), so their tokens
per second compare work for work. Every question's turn has its own seed, derived from the base seed (``seed``,
else the method's ``seed:``, else 0) and the question (:meth:`BenchRunner.request_seed`), so the method, the
baseline and the reference draw the same random streams on it, a rerun reproduces it, and its record carries it
(``request_seed``).

With ``batch_size > 1`` each method decodes a dataset's pending questions turn by turn in one batched loop
(`Pipeline.generate_batch`, up to ``batch_size`` rows in flight, waiting questions taking freed rows); methods
then run one after the other per dataset and turn, not interleaved per question. Every turn is still its own
record, appended as soon as its batch is done. The reference is measured one request at a time, so it is not
run in batched mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from specframe.bench.conversation import encode_turn
from specframe.bench.methods import Method
from specframe.bench.record import RunInfo, build_record
from specframe.bench.results import ResultStore
from specframe.datasets.base import LoadedDataset, Sample
from specframe.decode.request import Request
from specframe.errors import GenerationError
from specframe.metrics.machine_info import machine_identity
from specframe.metrics.machine_load import LoadWindow
from specframe.metrics.memory import pipeline_memory
from specframe.metrics.records import GenerationResult
from specframe.reference import reference_result
from specframe.seeds import derive_seed

#: Called after each recorded turn with (method name, dataset name, question id, turn).
ProgressFn = Callable[[str, str, str, int], None]


@dataclass
class BenchSummary:
    recorded: int = 0  # turns decoded and written by this run
    skipped: int = 0  # turns already in the result file
    refused: list[str] = field(default_factory=list)  # batched turns refused on their own, with the reason


@dataclass(frozen=True)
class WorkItem:
    method: Method
    dataset: LoadedDataset
    sample: Sample


class BenchRunner:
    """Runs methods over datasets into a :class:`ResultStore` (see the module docstring)."""

    def __init__(self, methods: Sequence[Method], store: ResultStore, *, max_new_tokens: int, infos: dict[str, RunInfo],
                 warmup: int = 1, repeats: int = 1, seed: int | None = None, batch_size: int = 1) -> None:
        if repeats < 1 or warmup < 0:
            raise ValueError("repeats must be >= 1 and warmup >= 0")
        if batch_size > 1 and any(m.reference for m in methods):
            raise ValueError("the generate() reference is measured one request at a time, not in batches")
        self.methods = list(methods)
        self.store = store
        self.max_new_tokens = max_new_tokens
        self.infos = infos
        self.warmup = warmup
        self.repeats = repeats
        self.seed = seed
        self.batch_size = batch_size
        self.reference_kernels = ""  # how the last reference run ran (specframe.reference.NativeRun.kernels)

    # -------------------------------------------------------------------------------------- planning
    def units(self) -> list[list[Method]]:
        """The methods in rotation units: a reference stays right after its partner."""
        units: list[list[Method]] = []
        for method in self.methods:
            if method.reference and units and units[-1][0].name == method.partner:
                units[-1].append(method)
            else:
                units.append([method])
        return units

    def schedule(self, datasets: Sequence[LoadedDataset]) -> list[WorkItem]:
        """Every (method, question) in run order (datasets, questions, rotated methods)."""
        items = []
        units = self.units()
        for dataset in datasets:
            for i, sample in enumerate(dataset.samples):
                shift = i % len(units)
                for unit in units[shift:] + units[:shift]:
                    items.extend(WorkItem(method, dataset, sample) for method in unit)
        return items

    def pending_turns(self, items: Sequence[WorkItem]) -> int:
        return sum(1 for item in items for turn in range(len(item.sample.turns))
                   if self._key(item, turn) not in self.store)

    @staticmethod
    def _key(item: WorkItem, turn: int) -> tuple[str, str, str, int]:
        return item.method.name, item.dataset.name, str(item.sample.question_id), turn

    # -------------------------------------------------------------------------------------- running
    def base_seed(self, method: Method) -> int:
        """The seed every request seed of ``method`` derives from: ``--seed``, else the pipeline's, else 0."""
        return base_seed(method, self.seed)

    def request_seed(self, method: Method, dataset: str, sample: Sample, turn: int) -> int:
        """The seed of one question's turn: derived from the base seed and the question, so every method (and the
        reference) samples it with the same seed, and a rerun or a resumed run reproduces it."""
        return derive_seed(self.base_seed(method), dataset, str(sample.question_id), turn)

    def _decode(self, method: Method, ids: torch.Tensor, new_tokens: int | None = None, *,
                seed: int | None = None) -> GenerationResult:
        """One decode of ``ids`` with ``seed`` (None: the base seed); the reference decodes ``new_tokens`` (its
        partner's count)."""
        pipe = method.pipeline
        seed = self.base_seed(method) if seed is None else seed
        if method.reference:
            result, self.reference_kernels = reference_result(pipe, ids, new_tokens=new_tokens or self.max_new_tokens,
                                                              seed=seed)
            return result
        return pipe.generate(ids, self.max_new_tokens, seed=seed)

    def _partner_tokens(self, item: WorkItem, turn: int) -> int | None:
        """The reference's token count: its partner's for the same turn (None for a pipeline method)."""
        if not item.method.reference:
            return None
        key = (str(item.method.partner), item.dataset.name, str(item.sample.question_id), turn)
        partner = self.store.get(key)
        if partner is None:
            raise GenerationError(f"{item.method.name} decodes as many tokens as {item.method.partner}, which has "
                                  f"no record of {item.dataset.name} question {item.sample.question_id} turn {turn}",
                                  hint="run the partner method first (it precedes the reference in every rotation)")
        return int(partner["choices"][0]["new_tokens"][0])

    def warm_up(self, items: Sequence[WorkItem]) -> None:
        """Decode the first pending prompt ``warmup`` times with every method (results discarded)."""
        first = next((it for it in items if self.pending_turns([it])), None)
        if first is None or self.warmup == 0:
            return
        for method in self.methods:
            ids = encode_turn(method.pipeline, first.sample.turns[:1], [])
            for _ in range(self.warmup):
                self._decode(method, ids)

    def run(self, datasets: Sequence[LoadedDataset], progress: ProgressFn | None = None) -> BenchSummary:
        return self.run_items(self.schedule(datasets), progress)

    def run_items(self, items: Sequence[WorkItem], progress: ProgressFn | None = None) -> BenchSummary:
        """Run scheduled items (all of them, or one rank's shard) in order, skipping finished turns."""
        summary = BenchSummary()
        self.warm_up(items)
        if self.batch_size > 1:
            return self._run_batched(items, summary, progress)
        for item in items:
            answers: list[str] = []
            for turn in range(len(item.sample.turns)):
                key = self._key(item, turn)
                done = self.store.get(key)
                if done is not None:
                    summary.skipped += 1
                    answers.append(done["choices"][0]["turns"][0])
                    continue
                ids = encode_turn(item.method.pipeline, item.sample.turns[: turn + 1], answers)
                new_tokens = self._partner_tokens(item, turn)
                seed = self.request_seed(item.method, item.dataset.name, item.sample, turn)
                with LoadWindow() as window:
                    runs = sorted((self._decode(item.method, ids, new_tokens, seed=seed) for _ in range(self.repeats)),
                                  key=lambda r: r.total_ns)
                median = runs[(len(runs) - 1) // 2]
                record = build_record(self.infos[item.method.name], item.sample, turn, median,
                                      [r.total_ns for r in runs], item.dataset.source, machine_load=window.load,
                                      reference_kernels=self.reference_kernels if item.method.reference else None)
                self.store.append(record)
                summary.recorded += 1
                answers.append(record["choices"][0]["turns"][0])
                if progress is not None:
                    progress(*key)
        return summary

    def _run_batched(self, items: Sequence[WorkItem], summary: BenchSummary,
                     progress: ProgressFn | None) -> BenchSummary:
        for dataset, samples in batched_groups(items):
            for method in self.methods:
                self._batched_turns(method, dataset, samples, summary, progress)
        return summary

    def _batched_turns(self, method: Method, dataset: LoadedDataset, samples: Sequence[Sample],
                       summary: BenchSummary, progress: ProgressFn | None) -> None:
        """Every pending turn of ``method`` on ``samples`` of ``dataset``, turn by turn, each turn in one batch."""
        answers: dict[str, list[str]] = {str(s.question_id): [] for s in samples}
        for turn in range(max((len(s.turns) for s in samples), default=0)):
            todo = []
            for sample in samples:
                if turn >= len(sample.turns):
                    continue
                key = (method.name, dataset.name, str(sample.question_id), turn)
                done = self.store.get(key)
                if done is not None:
                    summary.skipped += 1
                    answers[str(sample.question_id)].append(done["choices"][0]["turns"][0])
                else:
                    todo.append(sample)
            if not todo:
                continue
            pipe = method.pipeline
            requests = [Request(encode_turn(pipe, s.turns[: turn + 1], answers[str(s.question_id)]),
                                seed=self.request_seed(method, dataset.name, s, turn)) for s in todo]
            runs = [pipe.generate_batch(requests, self.max_new_tokens, batch_size=self.batch_size)
                    for _ in range(self.repeats)]  # one outcome per question, in order
            for i, sample in enumerate(todo):
                outcomes = sorted((run[i] for run in runs), key=lambda r: getattr(r, "total_ns", 0))
                median = outcomes[(len(outcomes) - 1) // 2]
                if not isinstance(median, GenerationResult):  # refused alone (its prompt does not fit)
                    summary.refused.append(f"{method.name} {dataset.name} question {sample.question_id} "
                                           f"turn {turn}: {median.error.message}")
                    continue
                record = build_record(self.infos[method.name], sample, turn, median,
                                      [r.total_ns for r in outcomes if isinstance(r, GenerationResult)], dataset.source)
                self.store.append(record)
                summary.recorded += 1
                answers[str(sample.question_id)].append(record["choices"][0]["turns"][0])
                if progress is not None:
                    progress(method.name, dataset.name, str(sample.question_id), turn)


def batched_groups(items: Sequence[WorkItem]) -> list[tuple[LoadedDataset, list[Sample]]]:
    """The datasets of scheduled items (in order) with their questions (in order): what a batched run decodes."""
    groups: dict[str, tuple[LoadedDataset, list[Sample]]] = {}
    seen: set[tuple[str, str]] = set()
    for item in items:
        dataset, samples = groups.setdefault(item.dataset.name, (item.dataset, []))
        key = (dataset.name, str(item.sample.question_id))
        if key not in seen:
            seen.add(key)
            samples.append(item.sample)
    return list(groups.values())


def base_seed(method: Method, seed: int | None) -> int:
    """The base of a bench's request seeds: ``seed`` (``--seed``), else the pipeline's ``seed:``, else 0."""
    if seed is not None:
        return seed
    return 0 if method.pipeline.config.seed is None else method.pipeline.config.seed


def run_info(method: Method, *, max_new_tokens: int, seed: int | None, plugins: dict[str, str],
             git_rev: str | None, batch_size: int = 1) -> RunInfo:
    """The per-method facts every record of ``method`` carries."""
    pipe = method.pipeline
    sampling = pipe.config.sampling
    return RunInfo(method=method.name, base_method=method.base_name, baseline=method.baseline,
                   reference=method.reference,
                   config_hash=pipe.config_hash, target_hash=method.target_hash,
                   temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p,
                   seed=base_seed(method, seed), max_new_tokens=max_new_tokens,
                   sweep=method.sweep, plugins=plugins, git_rev=git_rev, batch_size=batch_size,
                   machine=machine_identity(), memory=pipeline_memory(pipe))
