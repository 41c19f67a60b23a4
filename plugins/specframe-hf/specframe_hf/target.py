"""`HFTarget`: a Hugging Face causal LM (Llama, Mistral, Qwen2, Qwen3) as a specframe target model.

The adapter runs the model through one `ModelRunner` and keeps its sequences in `HFRows` (:mod:`specframe_hf.rows`):

* ``prefill(ids [B, P])`` caches the prompt with an ordinary causal forward (logits of the last position only);
* ``forward_tree(tree)`` runs the root and the draft nodes on top of the cache with an additive ancestor-only
  4-D mask (see :mod:`specframe_hf.tree_mask`) and positions ``cache_len + depth``; their KV entries are
  appended but not committed;
* ``commit(tree, accepted_nodes)`` keeps the accepted path's entries and drops the rest.

Example::

    target = HFTarget.from_model(model, tokenizer)      # or HFTarget.from_pretrained("/models/smollm2")
    out = target.prefill(ids)                           # logits [1, 1, V]
    tree = DraftTree.from_lists([root, a, b], [-1, 0, 1])
    out = target.forward_tree(tree)                     # logits [1, 3, V]
    target.commit(tree, torch.tensor([[0, 1, -1]]))     # root and a are now cached

This API keeps one cache length, so a batch must accept the same number of nodes in every row; the decode loop
uses :meth:`HFTarget.ragged_batch`, whose rows each keep their own length (the same `HFRows`, so one commit path).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from specframe.cpu_linear import linear_kernels_of
from specframe.errors import ConfigError, GenerationError
from specframe.interfaces import SharedEmbeddings, TargetModel
from specframe.placement import resolve_device, resolve_dtype
from specframe.prompts import Messages, user_message
from specframe.reference import NativeRun
from specframe.tree import DraftTree
from specframe.types import SamplingParams, TargetOutput
from specframe_hf.captured import BucketedVerify
from specframe_hf.compat import check_supported, check_tokenizer_fits
from specframe_hf.decoder import DecoderForward, lean_supported
from specframe_hf.device_map import DeviceMap
from specframe_hf.head_precision import apply_logits_dtype
from specframe_hf.kernel_probe import apply_cpu_linear
from specframe_hf.kv_pool import BLOCK_SIZE
from specframe_hf.loading import check_tokenizer_matches, load_model, load_tokenizer, model_directory
from specframe_hf.reference import native_generate, native_generate_batch
from specframe_hf.rows import HFRows
from specframe_hf.runner import ModelRunner
from specframe_hf.slot_rows import PREFILL_CHUNK, SlotRows

Rows = HFRows | SlotRows


def eos_token_ids(model: Any, tokenizer: Any) -> tuple[int, ...]:
    """End-of-sequence ids: the generation config's, else the model config's, else the tokenizer's."""
    eos = None
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        eos = getattr(source, "eos_token_id", None) if source is not None else None
        if eos is not None:
            break
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    return tuple(dict.fromkeys(int(i) for i in ids))


class HFTarget(TargetModel, SharedEmbeddings):
    """A transformers ``*ForCausalLM`` driven with tree attention and KV compaction.

    Args:
        model: a supported causal LM (checked by :func:`specframe_hf.compat.check_supported`).
        tokenizer: its tokenizer, or None.
        taps: decoder layers whose outputs every :class:`TargetOutput` of this object's own API carries.
        source: where the model came from, for error messages.
        engine: ``"auto"``: the lean engine path when the model takes it (:func:`specframe_hf.decoder.lean_supported`),
            ``"transformers"``: transformers' own forward always.
        compile: ``torch.compile`` the lean engine's forward (see :class:`specframe_hf.slot_rows.SlotRows`).
        kv_memory: bytes of the lean engine's paged KV pool (:mod:`specframe_hf.kv_pool`); None: sized from the
            capacities the decode loop announces.
        capture: ``"off"``; ``"compile"``: verify rounds at bucketed shapes, each bucket compiled once with
            ``torch.compile(fullgraph=True, dynamic=False)`` (:mod:`specframe_hf.captured`); ``"reduce-overhead"``:
            the same, captured as CUDA graphs. ``capture_backend``: torch.compile's backend (default inductor;
            tests pass a counting backend).
        prefill_chunk: the lean engine prefills a joining prompt longer than this in chunks of this many tokens,
            one per decode round (:mod:`specframe_hf.chunked_prefill`).
    """

    def __init__(self, model: Any, tokenizer: Any = None, *, taps: Sequence[int] = (),
                 source: str = "the in-memory model", engine: str = "auto", compile: bool = False,
                 kv_memory: int | None = None, capture: str = "off", capture_backend: Any = None,
                 prefill_chunk: int = PREFILL_CHUNK) -> None:
        check_supported(model)
        self.model = model.eval()
        self.source = source
        self.runner = ModelRunner(self.model)
        self.model_type = self.runner.model_type
        self.vocab_size = self.runner.vocab_size
        check_tokenizer_fits(tokenizer, self.vocab_size, source)
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids(model, tokenizer)
        self.max_length = self.runner.max_length
        self.device = self.runner.device  # where ids, the tree mask and the random keys go
        self.devices = self.runner.devices  # accelerators of a split model (the stage clocks wait for them)
        self.dtype = self.runner.dtype
        self.linear_kernels = linear_kernels_of(model)  # which rows run on prepacked weights (specframe.cpu_linear)
        self.cpu_linear = self.linear_kernels.name  # "default", "onednn" or "by_rows"
        self.tensor_parallel = False  # sharded over the ranks of a torchrun launch (specframe_hf.device_map)
        self._taps: tuple[int, ...] = ()
        self._rows: Rows | None = None
        #: Why the lean engine path (:mod:`specframe_hf.slot_rows`) is not used, or None when it is.
        self.lean_blocker = "engine: transformers" if engine == "transformers" else lean_supported(model)
        if compile and self.lean_blocker is not None:  # it was silently ignored: eager speed, no word
            raise ConfigError(f"target.compile: true compiles the lean engine's forward, which {source} does not "
                              f"use ({self.lean_blocker})", hint="drop compile, or use engine: auto on a model the "
                                                                 "lean engine runs (the Llama family)")
        self.compile = compile
        self.kv_memory = kv_memory
        if prefill_chunk < 1:
            raise ConfigError(f"target.prefill_chunk must be at least 1, got {prefill_chunk}",
                              hint=f"use the default {PREFILL_CHUNK}, or a smaller chunk for shorter stalls")
        self.prefill_chunk = prefill_chunk
        if capture not in ("off", "compile", "reduce-overhead"):
            raise ConfigError(f"target.capture must be off, compile or reduce-overhead, got {capture!r}",
                              hint="capture: compile (or reduce-overhead on a GPU) runs verify rounds at bucketed "
                                   "shapes")
        self.capture, self.capture_backend = capture, capture_backend
        self._bucketed: dict[tuple[int, ...], BucketedVerify] = {}  # per taps, made on first use
        self._compiled: DecoderForward | None = None  # made on first use
        self.set_taps(tuple(taps))

    # ------------------------------------------------------------------------------------ construction
    @classmethod
    def from_model(cls, model: Any, tokenizer: Any = None, *, taps: Sequence[int] = (),
                   attn: str | None = None, engine: str = "auto", compile: bool = False,
                   kv_memory: int | None = None, capture: str = "off", capture_backend: Any = None,
                   prefill_chunk: int = PREFILL_CHUNK) -> HFTarget:
        """Wrap an in-memory model; ``attn`` ('sdpa' / 'eager') switches its attention backend first."""
        if attn is not None:
            model.set_attn_implementation(attn)
        return cls(model, tokenizer, taps=taps, engine=engine, compile=compile, kv_memory=kv_memory,
                   capture=capture, capture_backend=capture_backend, prefill_chunk=prefill_chunk)

    @classmethod
    def from_pretrained(cls, path: str, *, dtype: str = "float32", device: str = "auto", attn: str = "sdpa",
                        taps: Sequence[int] = (), cpu_linear: str = "default", logits_dtype: str = "auto",
                        placement: DeviceMap | None = None, engine: str = "auto",
                        compile: bool = False, kv_memory: int | None = None, capture: str = "off",
                        prefill_chunk: int = PREFILL_CHUNK) -> HFTarget:
        """Load model and tokenizer from a local directory (``local_files_only``; nothing is downloaded).

        ``cpu_linear='onednn'`` prepacks the linear layers for oneDNN (:mod:`specframe.cpu_linear`), ``'auto'``
        measures both kernels on this model once per machine (:mod:`specframe_hf.kernel_probe`);
        ``logits_dtype='float32'`` computes a bf16/fp16 model's LM head in float32 (:mod:`specframe_hf.head_precision`);
        ``placement``
        splits the model across devices and disk (:mod:`specframe_hf.device_map`; ``device`` is then unused).
        """
        directory = model_directory(path)
        split = placement is not None and placement.active
        if split and cpu_linear == "onednn":
            raise ConfigError("target.cpu_linear: onednn cannot be combined with target.device_map",
                              hint="use cpu_linear: default (or auto) with a device_map")
        torch_device = torch.device("cpu") if split else resolve_device(device, field="target.device")
        if compile and torch_device.type == "cpu" and cpu_linear != "default":
            # inductor cannot lower the oneDNN-prepacked linear (mkldnn._linear_pointwise): the first forward fails
            raise ConfigError(f"target.compile: true cannot run with cpu_linear: {cpu_linear} on the CPU (inductor "
                              "cannot compile oneDNN-prepacked linear layers)",
                              hint="set target.cpu_linear: default with compile: true (on the CPUs measured, "
                                   "compile is slower than eager: docs/benchmarks.md)")
        model = load_model(directory, dtype=resolve_dtype(dtype, field="target.dtype"), device=torch_device, attn=attn,
                           placement=placement)
        tokenizer = load_tokenizer(directory)
        check_tokenizer_matches(tokenizer, model, directory)
        apply_logits_dtype(model, logits_dtype)
        if not split:
            apply_cpu_linear(model, cpu_linear, what=f"the target '{directory}'")
        target = cls(model, tokenizer, taps=taps, source=f"'{directory}'", engine=engine, compile=compile,
                     kv_memory=kv_memory, capture=capture, prefill_chunk=prefill_chunk)
        target.tensor_parallel = placement is not None and placement.tensor_parallel
        return target

    # ----------------------------------------------------------------------------------------- state
    @property
    def cache_len(self) -> int:
        lengths = [] if self._rows is None else self._rows.lengths
        return lengths[0] if lengths else 0

    @property
    def taps(self) -> tuple[int, ...]:
        return self._taps

    @property
    def rows(self) -> Rows | None:
        """The rows of this object's own sequence (None before prefill); for inspection."""
        return self._rows

    def set_taps(self, layers: tuple[int, ...]) -> None:
        """Tap ``layers`` in this object's own prefill / forward_tree. The decode loop passes its drafter's taps to
        :meth:`ragged_batch` instead, so they hook the model during its own forwards only."""
        self._taps = self.runner.taps.check(layers)

    def ragged_batch(self, taps: Sequence[int] = ()) -> Rows:
        """The decode loop's rows over this model, tapping ``taps`` in their forwards until closed: the lean
        engine path over a paged KV pool (:mod:`specframe_hf.slot_rows`) for the Llama family, transformers'
        forward over a ``DynamicCache`` (:mod:`specframe_hf.rows`) for the others; this object's own sequence is
        reset."""
        self.reset()
        return self._new_rows(taps)

    def _new_rows(self, taps: Sequence[int]) -> Rows:
        if self.lean_blocker is None:
            return SlotRows(self.runner, taps, compiled=self._compiled_forward(), kv_memory=self.kv_memory,
                            bucketed=self._bucketed_forward(taps), prefill_chunk=self.prefill_chunk)
        return HFRows(self.runner, taps)

    @property
    def bucket_shapes(self) -> set[tuple[int, int, int]]:
        """The buckets (rows, nodes, blocks) the captured verify forward has run (``capture``; empty when off)."""
        return {shape for forward in self._bucketed.values() for shape in forward.shapes}

    def _bucketed_forward(self, taps: Sequence[int]) -> BucketedVerify | None:
        """The bucketed verify forward (``capture``), compiled once per target and taps, shared by every rows
        object, so a bucket compiles once however many requests run."""
        if self.capture == "off":
            return None
        key = self.runner.taps.check(taps)
        if key not in self._bucketed:
            backend = self.capture_backend or "inductor"
            options: dict[str, Any] = {"fullgraph": True, "dynamic": False, "backend": backend}
            if self.capture == "reduce-overhead":
                options["mode"] = "reduce-overhead"
            # One graph per bucket: let dynamo keep as many as a long run's buckets need.
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
            self._bucketed[key] = BucketedVerify(DecoderForward(self.model), BLOCK_SIZE, key,
                                                 compiler=lambda f: torch.compile(f, **options))
        return self._bucketed[key]

    def _compiled_forward(self) -> DecoderForward | None:
        """The lean forward compiled once per target (``compile: true``), shared by every rows object."""
        if not self.compile:
            return None
        if self._compiled is None:
            decoder = DecoderForward(self.model)
            decoder.forward = torch.compile(decoder.forward, dynamic=True)  # type: ignore[method-assign]
            self._compiled = decoder
        return self._compiled

    def reset(self) -> None:
        if self._rows is not None:
            self._rows.close()
        self._rows = None

    # --------------------------------------------------------------------------------------- forward
    def prefill(self, input_ids: torch.Tensor) -> TargetOutput:
        """Cache ``input_ids`` ``[B, P]`` (a new request); logits ``[B, 1, V]`` float32 at the last position."""
        self.reset()
        self._rows = self._new_rows(self._taps)
        return self._rows.add_row(input_ids)

    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Logits ``[B, N, V]`` (float32) after each node's path; the nodes' KV entries wait for :meth:`commit`."""
        if self._rows is None:
            raise GenerationError("forward_tree was called before prefill", hint="prefill the prompt first")
        return self._rows.forward_tree(tree)

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        """Keep the KV entries of ``accepted_nodes`` ``[B, D + 1]`` (root first, -1 padded), drop the rest.

        Every row must accept the same number of nodes: this API keeps one length (:attr:`cache_len`)."""
        if self._rows is None:
            raise GenerationError("commit was called without a pending forward_tree",
                                  hint="call forward_tree(tree) and then commit(tree, accepted_nodes)")
        lengths = (accepted_nodes >= 0).sum(dim=1).tolist()
        if any(n != lengths[0] for n in lengths):
            raise GenerationError(f"batch rows accepted different path lengths {lengths}",
                                  hint="this API keeps one cache length; decode rows with ragged_batch()")
        self._rows.commit(tree, accepted_nodes)

    # ------------------------------------------------------------------------------------- reference
    def native_generate(self, input_ids: torch.Tensor, new_tokens: int, *, sampling: SamplingParams,
                        seed: int) -> NativeRun:
        """transformers' own ``generate()`` on this model, timed (:mod:`specframe_hf.reference`)."""
        return native_generate(self.model, self.device, input_ids, new_tokens, sampling=sampling, seed=seed)

    def native_generate_batch(self, rows: list[torch.Tensor], new_tokens: int, *, sampling: SamplingParams,
                              seed: int) -> tuple[list[list[int]], int, str]:
        """One left-padded ``generate()`` call over the prompts ``rows`` (each ``[P_i]``): tokens, ns, kernels."""
        pad = self.tokenizer.pad_token_id if self.tokenizer is not None else None
        if pad is None:
            pad = self.eos_token_ids[0] if self.eos_token_ids else 0
        return native_generate_batch(self.model, self.device, rows, new_tokens, sampling=sampling, seed=seed,
                                     pad_id=int(pad))

    # ------------------------------------------------------------------------------- shared embeddings
    def input_embeddings(self) -> torch.nn.Module:
        return self.model.get_input_embeddings()

    def output_embeddings(self) -> torch.nn.Module:
        return self.model.get_output_embeddings()

    def kv_bytes_per_token(self) -> int | None:
        """Keys and values of one committed position over every decoder layer, from the model's config."""
        config = self.model.config
        config = getattr(config, "text_config", None) or config
        layers, heads = getattr(config, "num_hidden_layers", None), getattr(config, "num_attention_heads", None)
        if not layers or not heads:
            return None
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return 2 * int(layers) * int(kv_heads) * int(head_dim) * self.dtype.itemsize

    def num_layers(self) -> int | None:
        config = self.model.config
        layers = getattr(getattr(config, "text_config", None) or config, "num_hidden_layers", None)
        return int(layers) if layers is not None else None

    # ------------------------------------------------------------------------------------------ text
    def encode(self, prompt: str | Messages, *, chat: bool | None = None) -> torch.Tensor:  # [1, P] int64
        """Prompt ids of a text or chat messages through :meth:`encode_messages` (the core's encoder)."""
        messages = user_message(prompt) if isinstance(prompt, str) else prompt
        return torch.tensor([self.encode_messages(messages, chat=chat)], dtype=torch.long)

    def decode(self, ids: Sequence[int] | torch.Tensor, *, skip_special_tokens: bool = True) -> str:
        if self.tokenizer is None:
            raise GenerationError("decoding needs a tokenizer, but the target has none",
                                  hint="load the target from a directory with a tokenizer")
        tokens = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        return self.tokenizer.decode(tokens, skip_special_tokens=skip_special_tokens)
