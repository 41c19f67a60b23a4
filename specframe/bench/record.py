"""One result line: Spec-Bench's answer format plus specframe's per-round measurements and provenance.

Spec-Bench fields (its ``speed.py`` reads them unchanged): ``question_id``, ``category``, ``model_id``,
``choices[0].{turns, new_tokens, wall_time, decoding_steps, accept_lengths}``, ``tstamp``. Each line holds
one turn, so ``choices[0].turns`` has one element.

specframe fields:

* key — ``method``, ``dataset``, ``turn`` (0-based) with ``question_id``;
* run — ``baseline``, ``reference`` (transformers' ``generate()``, :mod:`specframe.reference`; with
  ``reference_kernels``, how it ran), ``base_method``, ``sweep``, ``config_hash``, ``target_hash``, ``seed`` (the
  run's base seed), ``temperature``, ``max_new_tokens``, ``plugins`` (``{distribution: version}``), ``git_rev``,
  ``dataset_source``;
* request — ``request_seed`` (the turn's own seed, derived from the base seed and the question, the same for every
  method; ``generate(..., seed=request_seed)`` replays the sample), ``prompt_tokens``, ``tokens`` (generated ids),
  ``stop_reason``, ``prefill_ns``, ``total_ns`` (the
  repeat whose time is the median), ``total_ns_repeats`` (all repeats), ``batch_size`` (rows in flight in the
  batch it ran in; 1 without ``--batch-size``);
* rounds — ``accepted`` (a_r per round), ``tree_nodes`` (draft nodes verified per round), ``budget`` (nodes
  ``budget: auto`` chose per round, None with a fixed budget), ``plain_rounds``, ``plain_reasons`` (rounds that
  verified no draft node, counted by why: :data:`specframe.cost.reasons.PLAIN_REASONS`), ``tree_depth``,
  ``accept_depth_counts`` (histogram of a_r), ``stage_ns`` (nanoseconds per stage, summed over rounds),
  ``sibling_continuation`` (rows ``[depth, rank, continued, total]``: how often the next depth was accepted after an
  accepted node of that sibling rank, :mod:`specframe.metrics.siblings`), ``path_order`` (per round, the score
  order of each accepted node, :attr:`specframe.metrics.records.RoundRecord.path_order`: what
  :mod:`specframe.bench.simulate` needs to replay the round at a smaller budget);
* ``memory`` — parameter bytes of the target, the drafter and each head, and the per-request state (the target's KV
  cache, the drafter's context cache) at this turn's context length, prompt + generated tokens
  (:mod:`specframe.metrics.memory`);
* machine — ``machine`` (what it ran on: CPU model, core count, GPU; :func:`specframe.metrics.machine_info.
  machine_identity`) and ``machine_load``: the load average and the CPU seconds other processes used while the
  turn's repeats ran, and whether that was contention (:class:`specframe.metrics.machine_load.MachineLoad`);
* ``sampling`` — ``temperature``, ``top_k`` and ``top_p`` of the run.

``machine``, ``machine_load``, ``sampling``, ``sibling_continuation``, ``path_order`` and ``memory`` are absent in
files written before they existed; readers treat a missing ``machine`` as unknown (paired only with records that
lack it too), a missing ``sampling`` as ``temperature`` with no top-k or top-p filtering, a missing
``sibling_continuation`` as no counts, a missing ``memory`` as unknown and a missing ``path_order`` as rounds that
replay only at their own budget.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specframe.datasets.base import Sample
from specframe.metrics.acceptance import accept_histogram
from specframe.metrics.machine_load import MachineLoad
from specframe.metrics.memory import MemoryProfile
from specframe.metrics.records import GenerationResult
from specframe.metrics.siblings import count_rows

SCHEMA_VERSION = 1
#: How every serialised record starts (``json.dumps`` of :func:`build_record`, whose first key is
#: ``question_id``); a last line cut by a crash is recognised by it.
RECORD_PREFIX = b'{"question_id": '


@dataclass(frozen=True)
class RunInfo:
    """Per-method facts copied into every record of that method."""

    method: str
    base_method: str
    baseline: bool
    config_hash: str
    target_hash: str
    temperature: float
    seed: int
    max_new_tokens: int
    sweep: dict[str, Any] = field(default_factory=dict)
    plugins: dict[str, str] = field(default_factory=dict)
    git_rev: str | None = None
    batch_size: int = 1
    reference: bool = False
    top_k: int = 0
    top_p: float = 1.0
    machine: dict[str, Any] | None = None
    memory: MemoryProfile | None = None  # the pipeline's parameter bytes and per-token state (specframe.metrics.memory)

    def consistency_fields(self) -> dict[str, Any]:
        """Fields a resumed run must share with the records already in the file."""
        return {"config_hash": self.config_hash, "max_new_tokens": self.max_new_tokens, "seed": self.seed,
                "baseline": self.baseline, "batch_size": self.batch_size, "reference": self.reference}


def build_record(info: RunInfo, sample: Sample, turn: int, result: GenerationResult,
                 repeats_ns: Sequence[int], dataset_source: str, machine_load: MachineLoad | None = None,
                 reference_kernels: str | None = None) -> dict[str, Any]:
    """The JSON-ready record of one timed turn (``result`` is the median-time repeat)."""
    accepted = [r.accepted for r in result.rounds]
    wall = result.total_ns / 1e9
    return {
        "question_id": sample.question_id,
        "category": sample.category,
        "model_id": info.method,
        "choices": [{
            "index": 0,
            "turns": [result.text if result.text is not None else ""],
            "new_tokens": [len(result.tokens)],
            "wall_time": [wall],
            "decoding_steps": [result.num_rounds],
            "accept_lengths": result.accept_lengths(),
        }],
        "tstamp": time.time(),
        "specframe_schema": SCHEMA_VERSION,
        "method": info.method,
        "dataset": sample.dataset,
        "turn": turn,
        "baseline": info.baseline,
        "reference": info.reference,
        **({"reference_kernels": reference_kernels} if info.reference and reference_kernels else {}),
        "base_method": info.base_method,
        "sweep": info.sweep,
        "config_hash": info.config_hash,
        "target_hash": info.target_hash,
        "seed": info.seed,  # the run's base seed
        "request_seed": result.seed,  # this turn's own: replays its sample
        "temperature": info.temperature,
        "sampling": {"temperature": info.temperature, "top_k": info.top_k, "top_p": info.top_p},
        "max_new_tokens": info.max_new_tokens,
        "plugins": info.plugins,
        "git_rev": info.git_rev,
        "dataset_source": dataset_source,
        "prompt_tokens": result.prompt_len,
        "tokens": list(result.tokens),
        "stop_reason": result.stop_reason,
        "prefill_ns": result.prefill_ns,
        "total_ns": result.total_ns,
        "total_ns_repeats": list(repeats_ns),
        "batch_size": result.batch_size,
        "accepted": accepted,
        "tree_nodes": [r.nodes for r in result.rounds],
        "budget": [r.budget for r in result.rounds],
        "plain_rounds": sum(not r.drafted for r in result.rounds),  # `budget: auto` rounds without a draft
        "plain_reasons": dict(Counter(r.plain_reason for r in result.rounds if r.plain_reason is not None)),
        "tree_depth": [r.depth for r in result.rounds],
        "accept_depth_counts": accept_histogram(accepted),
        "stage_ns": result.stage_totals(),
        "sibling_continuation": count_rows(result.rounds),
        "path_order": [r.path_order for r in result.rounds],
        **({"memory": info.memory.at(result.prompt_len + len(result.tokens))} if info.memory is not None else {}),
        **({"machine": info.machine} if info.machine is not None else {}),
        **({"machine_load": machine_load.to_dict()} if machine_load is not None else {}),
    }
