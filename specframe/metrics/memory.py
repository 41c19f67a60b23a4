"""Memory of a pipeline: the bytes of the drafter's and each head's parameters, and the per-request state (the
target's KV cache, the drafter's own context cache) at a context length.

What engineers weigh against τ: a drafter that adds 25 % to τ but needs as much memory as the target is not the
same bargain as one that needs 5 %. Definitions (docs/metrics.md, "Memory"):

* **parameters** — the bytes of the distinct tensor storages a stage holds (parameters, buffers, prepacked or
  sliced weights), found by walking the stage object (:func:`owned_storages`); storages the target owns are the
  target's (a drafter that shares the target's embeddings does not count them), storages the drafter owns are
  the drafter's (a head that holds the drafter does not count it). Shared storages are counted once, by the
  first owner in the order target, drafter, corrector, tree builder, pruner, verifier.
* **KV bytes per token** — what one committed position costs the target's cache: ``2 × layers × kv heads × head
  dim × dtype bytes`` from the target's config (``TargetModel.kv_bytes_per_token``; None when the target cannot
  say). A request at context length ``T`` (prompt + generated tokens) holds ``T ×`` that; a paged or
  geometrically grown cache reserves a little more.
* **drafter state per token** — the same for a drafter that caches its own keys and values over the context
  (``Drafter.state_bytes_per_token``; DFlash-style backbones), None for drafters without one.

Worked example (SmolLM2-135M in float32): 30 layers × 3 KV heads × 64 head dims × 2 (K and V) × 4 bytes = 46,080
bytes per token, so a request of 200 prompt and 64 new tokens holds 264 × 46,080 B ≈ 11.6 MiB of KV cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

#: How deep :func:`owned_storages` follows plain attributes (modules are walked whole at any depth).
WALK_DEPTH = 4


def _storage(t: torch.Tensor) -> tuple[int, int] | None:
    """(storage address, bytes) of a tensor with real memory; None for meta or empty tensors."""
    if t.device.type == "meta":
        return None
    try:
        storage = t.untyped_storage()
    except (NotImplementedError, RuntimeError):
        # an opaque tensor (a oneDNN-prepacked weight) has no storage to address: the tensor itself is the
        # owner, its bytes its elements'
        nbytes = t.numel() * t.element_size()
        return (id(t), nbytes) if nbytes else None
    nbytes = storage.nbytes()
    return (storage.data_ptr(), nbytes) if nbytes else None


def owned_storages(obj: Any, depth: int = WALK_DEPTH) -> dict[int, int]:
    """Distinct tensor storages reachable from ``obj``: ``{address: bytes}``.

    Walks modules (every parameter and buffer, and the public attributes of the module objects), tensors, lists,
    tuples, dicts and the public attributes of other objects down to ``depth`` levels. Private attributes
    (``_name``) are not followed: by convention they hold per-request state such as caches, which is counted per
    token instead. Classes and callables are not followed.
    """
    found: dict[int, int] = {}
    seen: set[int] = set()

    def visit(value: Any, left: int) -> None:
        if id(value) in seen or value is None or isinstance(value, (str, bytes, int, float, bool, type)):
            return
        seen.add(id(value))
        if isinstance(value, torch.Tensor):
            entry = _storage(value)
            if entry is not None:
                found.setdefault(*entry)
            return
        if isinstance(value, torch.nn.Module):
            for t in (*value.parameters(), *value.buffers()):
                visit(t, left)
            for sub in value.modules():
                visit_attrs(sub, left)
            return
        if left <= 0:
            return
        if isinstance(value, dict):
            for v in value.values():
                visit(v, left - 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for v in value:
                visit(v, left - 1)
        elif hasattr(value, "__dict__") and not callable(value):
            visit_attrs(value, left)

    def visit_attrs(value: Any, left: int) -> None:
        for name, attr in vars(value).items():
            if not name.startswith("_"):  # private attributes hold per-request state (caches), not weights
                visit(attr, left - 1)

    visit(obj, depth)
    return found


@dataclass(frozen=True)
class MemoryProfile:
    """A pipeline's memory: parameter bytes per stage and the per-token state of one request."""

    target_bytes: int  # the target's own storages (weights, prepacked copies)
    drafter_bytes: int  # the drafter's, beyond the target's
    heads: dict[str, int] = field(default_factory=dict)  # "<kind>:<type>" -> bytes, stages other than the drafter
    kv_bytes_per_token: int | None = None  # the target's KV cache per committed position
    drafter_state_bytes_per_token: int | None = None  # the drafter's own context cache per position

    def at(self, context_tokens: int) -> dict[str, Any]:
        """JSON-ready fields for a request of ``context_tokens`` positions (prompt + generated)."""
        kv = self.kv_bytes_per_token
        state = self.drafter_state_bytes_per_token
        return {"target_bytes": self.target_bytes, "drafter_bytes": self.drafter_bytes, "heads": dict(self.heads),
                "kv_bytes_per_token": kv, "drafter_state_bytes_per_token": state, "context_tokens": context_tokens,
                "kv_bytes": None if kv is None else kv * context_tokens,
                "drafter_state_bytes": None if state is None else state * context_tokens}

    @property
    def speculation_bytes(self) -> int:
        """Parameters speculation adds to the target's: the drafter's and every head's."""
        return self.drafter_bytes + sum(self.heads.values())


def _per_token(stage: Any, method: str) -> int | None:
    fn = getattr(stage, method, None)
    value = fn() if callable(fn) else None
    return int(value) if value is not None else None


def stage_name(kind: str, stage: Any) -> str:
    return f"{kind}:{getattr(stage, 'name', None) or type(stage).__name__}"


def memory_profile(target: Any, stages: Iterable[tuple[str, Any]]) -> MemoryProfile:
    """The memory of ``target`` and ``stages`` (``(kind, object)`` pairs, the drafter first)."""
    claimed = owned_storages(target)
    target_bytes = sum(claimed.values())
    drafter_bytes, heads, drafter_state = 0, {}, None
    for kind, stage in stages:
        own = {k: v for k, v in owned_storages(stage).items() if k not in claimed}
        claimed |= own
        size = sum(own.values())
        if kind == "drafter":
            drafter_bytes = size
            drafter_state = _per_token(stage, "state_bytes_per_token")
        elif size:
            heads[stage_name(kind, stage)] = size
    return MemoryProfile(target_bytes=target_bytes, drafter_bytes=drafter_bytes, heads=heads,
                         kv_bytes_per_token=_per_token(target, "kv_bytes_per_token"),
                         drafter_state_bytes_per_token=drafter_state)


def format_bytes(n: int | float | None) -> str:
    """``12.3 MiB`` style; ``—`` for unknown."""
    if n is None:
        return "—"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def pipeline_memory(pipe: Any) -> MemoryProfile:
    """The memory of a built `Pipeline` (its target and stages, the drafter first)."""
    st = pipe.stages
    return memory_profile(pipe.target, [("drafter", st.drafter), ("corrector", st.corrector),
                                        ("tree_builder", st.tree_builder), ("pruner", st.pruner),
                                        ("verifier", st.verifier)])


def pooled_memory(fields: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One method's memory over its records' ``memory`` fields: the parameters (the same in every record) and the
    per-request state at the mean context length; None when no record has the field."""
    given = [f for f in fields if f]
    if not given:
        return None
    first = given[0]

    def mean(key: str) -> float | None:
        values = [f.get(key) for f in given]
        numbers = [float(v) for v in values if v is not None]
        return sum(numbers) / len(numbers) if numbers and len(numbers) == len(values) else None

    return {"target_bytes": first.get("target_bytes"), "drafter_bytes": first.get("drafter_bytes", 0),
            "heads": dict(first.get("heads") or {}), "kv_bytes_per_token": first.get("kv_bytes_per_token"),
            "drafter_state_bytes_per_token": first.get("drafter_state_bytes_per_token"),
            "context_tokens": mean("context_tokens"), "kv_bytes": mean("kv_bytes"),
            "drafter_state_bytes": mean("drafter_state_bytes")}
