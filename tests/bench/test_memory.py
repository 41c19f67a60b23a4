"""Memory in records, `report` and `profile` (:mod:`specframe.metrics.memory`): parameter bytes per stage without
double counting, the KV cache per token against what transformers really caches, and the report's table."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from specframe.bench.record_schema import record_problem
from specframe.metrics.memory import format_bytes, memory_profile, owned_storages, pooled_memory
from specframe.report import Report, summarize
from specframe.report.memory import memory_table

from .test_report import record


class Holder:
    def __init__(self, **attrs: object) -> None:
        self.__dict__.update(attrs)


def test_storages_are_counted_once_and_private_state_is_not_a_parameter() -> None:
    weight = torch.zeros(10, 4)  # 160 bytes
    module = torch.nn.Linear(4, 3, bias=False)  # 48 bytes
    view = weight[:2]  # a view of the same storage
    obj = Holder(a=weight, b=[view, module], c={"m": module}, _cache=torch.zeros(1000),
                 meta=torch.empty(5, device="meta"))
    assert sum(owned_storages(obj).values()) == 160 + 48


def test_a_prepacked_weight_is_counted_not_refused() -> None:
    """A oneDNN-prepacked weight (an opaque tensor with no addressable storage, what a target or drafter holds once
    ``cpu_linear`` has packed it) counts its elements' bytes beside the original weight; it used to raise
    NotImplementedError, so a pipeline's memory could not be read after its first decode."""
    from specframe.cpu_linear import PackedLinear, onednn_linear_available

    if not onednn_linear_available():
        pytest.skip("this torch build has no oneDNN packed linear operators")
    packed = PackedLinear(torch.nn.Linear(8, 6, bias=False))  # weight 6 x 8 float32: 192 bytes, packed the same
    assert packed.packed_weight.is_mkldnn or packed.packed_weight.layout != torch.strided
    found = owned_storages(Holder(layer=packed, again=packed))
    assert sum(found.values()) == 2 * 6 * 8 * 4 and len(found) == 2


def test_shared_tensors_belong_to_their_first_owner() -> None:
    """A drafter sharing the target's embedding does not count it; a head holding the drafter counts its own only."""
    embed = torch.nn.Embedding(100, 8)  # 3,200 bytes
    target = Holder(model=torch.nn.Sequential(embed, torch.nn.Linear(8, 100)), kv_bytes_per_token=lambda: 64)
    backbone = torch.nn.Linear(8, 8)  # 288 bytes
    drafter = Holder(backbone=backbone, embed_tokens=embed, state_bytes_per_token=lambda: 16)
    head = Holder(drafter=drafter, gru=torch.nn.GRUCell(8, 8))  # 3 * 8 * (8 + 8 + 2) * 4 = 1,728 bytes
    mem = memory_profile(target, [("drafter", drafter), ("corrector", head), ("pruner", Holder())])
    assert mem.target_bytes == 3200 + (8 * 100 + 100) * 4
    assert mem.drafter_bytes == 288 and mem.heads == {"corrector:Holder": 1728}  # the empty pruner is no head
    assert mem.speculation_bytes == 288 + 1728
    at = mem.at(100)
    assert (at["kv_bytes"], at["drafter_state_bytes"], at["context_tokens"]) == (6400, 1600, 100)
    assert memory_profile(Holder(), []).at(5)["kv_bytes"] is None  # a target that cannot say


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_kv_bytes_per_token_is_what_transformers_caches(family: str) -> None:
    from specframe_hf.target import HFTarget
    from specframe_hf.testing import tiny_causal_lm

    model = tiny_causal_lm(family)
    target = HFTarget.from_model(model)
    with torch.no_grad():
        out = model(torch.arange(3, 10)[None], use_cache=True)  # 7 positions
    cache = out.past_key_values
    cached = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    assert target.kv_bytes_per_token() == cached // 7 and cached % 7 == 0


def with_memory(method: str, qid: int, drafter: int, heads: dict[str, int], context: int) -> dict:
    rec = record(method, qid, [2, 1, 0], 0.5)
    rec["memory"] = {"target_bytes": 1000 * 2**20, "drafter_bytes": drafter, "heads": heads,
                     "kv_bytes_per_token": 46080, "drafter_state_bytes_per_token": 3072 if drafter else None,
                     "context_tokens": context, "kv_bytes": 46080 * context,
                     "drafter_state_bytes": 3072 * context if drafter else None}
    return rec


def test_report_shows_memory_next_to_tau_and_speed(tmp_path: Path) -> None:
    records = [record("ar", 1, [0] * 4, 1.0, baseline=True),
               with_memory("dartree", 1, 35 * 2**20, {"corrector:ar": 28 * 2**20}, 200),
               with_memory("dartree", 2, 35 * 2**20, {"corrector:ar": 28 * 2**20}, 300)]
    assert record_problem(records[1]) is None
    summary = summarize(records)
    _, rows = memory_table(summary)
    assert rows == [["dartree", "2.00", "14.0", "35.0 MiB", "corrector:ar 28.0 MiB", "6.3%", "11.0 MiB",
                     "750.0 KiB", "250"]]
    assert "## Memory" in Report(summary).markdown()
    Report(summary).write(tmp_path, plots=False)
    with (tmp_path / "memory.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["heads_bytes"] == str(28 * 2**20) and float(row["kv_bytes"]) == 46080 * 250


def test_records_refuse_a_negative_size_and_tolerate_its_absence() -> None:
    bad = with_memory("m", 1, -1, {}, 10)
    assert "memory.drafter_bytes" in str(record_problem(bad))
    assert pooled_memory([None, None]) is None
    assert format_bytes(None) == "—" and format_bytes(1536) == "1.5 KiB" and format_bytes(12) == "12 B"


def test_profile_line_puts_memory_next_to_tau_and_speed() -> None:
    from specframe.cost.profile import CostProfile
    from specframe.profile_report import MeasuredProfile, memory_line

    mem = {"target_bytes": 513 * 2**20, "drafter_bytes": 35 * 2**20, "heads": {"corrector:ar": 28 * 2**20},
           "kv_bytes_per_token": 46080, "drafter_state_bytes_per_token": 3072, "context_tokens": 264,
           "kv_bytes": 264 * 46080, "drafter_state_bytes": 264 * 3072}
    measured = MeasuredProfile(CostProfile(key={}, verify_ms={1: 10.0}, overhead_ms={}), None, 2.5, 12.25, mem)
    assert memory_line(measured) == (
        "timed decode: τ 2.50, 12.2 tokens/s; memory: drafter 35.0 MiB, heads corrector:ar 28.0 MiB, target "
        "513.0 MiB; per request at 264 tokens: KV cache 11.6 MiB, drafter cache 792.0 KiB")
