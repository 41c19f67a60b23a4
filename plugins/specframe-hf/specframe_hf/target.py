"""`HFTarget`: a Hugging Face causal LM (Llama, Mistral, Qwen2, Qwen3) as a specframe target model.

The adapter owns one ``DynamicCache`` per request:

* ``prefill(ids [B, P])`` caches the prompt with an ordinary causal forward (logits of the last position only);
* ``forward_tree(tree)`` runs the root and the draft nodes on top of the cache with an additive ancestor-only
  4-D mask (see :mod:`specframe_hf.tree_mask`) and positions ``cache_len + depth``; their KV entries are
  appended but not committed;
* ``commit(tree, accepted_nodes)`` keeps the accepted path's entries and drops the rest
  (see :mod:`specframe_hf.kv_compaction`).

Example::

    target = HFTarget.from_model(model, tokenizer)      # or HFTarget.from_pretrained("/models/smollm2")
    out = target.prefill(ids)                           # logits [1, 1, V]
    tree = DraftTree.from_lists([root, a, b], [-1, 0, 1])
    out = target.forward_tree(tree)                     # logits [1, 3, V]
    target.commit(tree, torch.tensor([[0, 1, -1]]))     # root and a are now cached

Batch rows share one cache length here, so a batch must accept the same number of nodes in every row (batch
size 1, the single-request loop's case, always does); batched decoding uses :meth:`HFTarget.ragged_batch`, where
each row has its own length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from specframe.cpu_linear import linear_kernels_of
from specframe.errors import ConfigError, ContractError, GenerationError
from specframe.interfaces import SharedEmbeddings, TargetModel
from specframe.placement import resolve_device, resolve_dtype
from specframe.prompts import Messages, user_message
from specframe.reference import NativeRun
from specframe.tree import DraftTree
from specframe.types import SamplingParams, TargetOutput
from specframe_hf.compat import accepts_logits_to_keep, cache_kwarg, check_supported, check_tokenizer_fits
from specframe_hf.device_map import DeviceMap, compute_devices, execution_device, parameter_dtype
from specframe_hf.head_precision import apply_logits_dtype
from specframe_hf.kernel_probe import apply_cpu_linear
from specframe_hf.kv_compaction import compact_tree_entries
from specframe_hf.loading import check_tokenizer_matches, load_model, load_tokenizer, model_directory
from specframe_hf.ragged import HFRaggedBatch
from specframe_hf.reference import native_generate
from specframe_hf.taps import LayerTaps
from specframe_hf.tree_mask import TreeMaskBuffer


def _on(x: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    return None if x is None else x.to(device)


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
        taps: decoder layers whose outputs every :class:`TargetOutput` carries.
        source: where the model came from, for error messages.
    """

    def __init__(self, model: Any, tokenizer: Any = None, *, taps: Sequence[int] = (),
                 source: str = "the in-memory model") -> None:
        check_supported(model)
        self.model = model.eval()
        self.source = source
        self.model_type: str = model.config.model_type
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])  # PackedLinear keeps .weight
        check_tokenizer_fits(tokenizer, self.vocab_size, source)
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids(model, tokenizer)
        self.max_length = getattr(model.config, "max_position_embeddings", None)
        self.device = execution_device(model)  # where ids, the tree mask and the random streams go
        self.devices = compute_devices(model)  # accelerators of a split model (the stage clocks wait for them)
        self.dtype = parameter_dtype(model)
        self._cache_kwarg = cache_kwarg(model)
        self._logits_to_keep = accepts_logits_to_keep(model)
        self._mask = TreeMaskBuffer(self.dtype, self.device)
        self._taps = LayerTaps(model.model.layers, self.model_type)
        self._taps.set(taps)
        self.linear_kernels = linear_kernels_of(model)  # which rows run on prepacked weights (specframe.cpu_linear)
        self.cpu_linear = self.linear_kernels.name  # "default", "onednn" or "by_rows"
        self.tensor_parallel = False  # sharded over the ranks of a torchrun launch (specframe_hf.device_map)
        self._cache: DynamicCache | None = None
        self._past = 0  # committed positions
        self._pending = 0  # uncommitted tree entries appended by the last forward_tree
        self._batch = 0

    # ------------------------------------------------------------------------------------ construction
    @classmethod
    def from_model(cls, model: Any, tokenizer: Any = None, *, taps: Sequence[int] = (),
                   attn: str | None = None) -> HFTarget:
        """Wrap an in-memory model; ``attn`` ('sdpa' / 'eager') switches its attention backend first."""
        if attn is not None:
            model.set_attn_implementation(attn)
        return cls(model, tokenizer, taps=taps)

    @classmethod
    def from_pretrained(cls, path: str, *, dtype: str = "float32", device: str = "auto", attn: str = "sdpa",
                        taps: Sequence[int] = (), cpu_linear: str = "default", logits_dtype: str = "auto",
                        placement: DeviceMap | None = None) -> HFTarget:
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
        model = load_model(directory, dtype=resolve_dtype(dtype, field="target.dtype"), device=torch_device, attn=attn,
                           placement=placement)
        tokenizer = load_tokenizer(directory)
        check_tokenizer_matches(tokenizer, model, directory)
        apply_logits_dtype(model, logits_dtype)
        if not split:
            apply_cpu_linear(model, cpu_linear, what=f"the target '{directory}'")
        target = cls(model, tokenizer, taps=taps, source=f"'{directory}'")
        target.tensor_parallel = placement is not None and placement.tensor_parallel
        return target

    # ----------------------------------------------------------------------------------------- state
    @property
    def cache_len(self) -> int:
        return self._past

    @property
    def taps(self) -> tuple[int, ...]:
        return self._taps.layer_ids

    def set_taps(self, layers: tuple[int, ...]) -> None:
        self._taps.set(layers)

    def ragged_batch(self) -> HFRaggedBatch:
        """Many requests in one cache, each row with its own length (see :mod:`specframe_hf.ragged`)."""
        self.reset()
        return HFRaggedBatch(self)

    def reset(self) -> None:
        self._cache = None
        self._past = 0
        self._pending = 0
        self._batch = 0
        with torch.inference_mode():  # the mask buffer is an inference tensor (made by forward_tree)
            self._mask.reset()
        self._taps.clear()

    # --------------------------------------------------------------------------------------- forward
    def _forward(self, input_ids: torch.Tensor, keep: int, **kwargs: Any) -> torch.Tensor:  # [B, keep, V]
        """One forward on the cache; logits of the last ``keep`` query positions."""
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = keep
        out = self.model(input_ids=input_ids, use_cache=True, **{self._cache_kwarg: self._cache}, **kwargs)
        return out.logits[:, -keep:]

    def prefill(self, input_ids: torch.Tensor) -> TargetOutput:
        """Cache ``input_ids`` ``[B, P]`` (a new request); logits ``[B, 1, V]`` float32 at the last position."""
        if input_ids.dim() != 2 or input_ids.shape[1] == 0:
            raise GenerationError(f"prefill expects token ids [B, P] with P >= 1, got shape {tuple(input_ids.shape)}",
                                  hint="pass a batch-first 2-D tensor, e.g. ids.view(1, -1)")
        length = int(input_ids.shape[1])
        if self.max_length is not None and length > self.max_length:
            raise GenerationError(
                f"the prompt has {length} tokens but the {self.model_type} target's context is {self.max_length}",
                hint="shorten the prompt (max_position_embeddings bounds every position)",
            )
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= self.vocab_size:
            raise GenerationError(f"prompt token ids must lie in [0, {self.vocab_size}), found {low}..{high}",
                                  hint="encode the prompt with this model's tokenizer")
        self.reset()
        self._cache = DynamicCache(config=self.model.config)
        self._batch = int(input_ids.shape[0])
        with torch.inference_mode():
            logits = self._forward(input_ids.to(self.device), keep=1)
            hidden = _on(self._taps.collect(), self.device)  # [B, P, n_taps * H]
        self._past = length
        return TargetOutput(logits=logits.float(), hidden=hidden)

    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Logits ``[B, N, V]`` (float32) after each node's path; the nodes' KV entries wait for :meth:`commit`."""
        if self._cache is None:
            raise GenerationError("forward_tree was called before prefill", hint="prefill the prompt first")
        if tree.batch_size != self._batch:
            raise GenerationError(f"the tree has {tree.batch_size} rows but the cache holds {self._batch}",
                                  hint="keep one tree row per prefilled sequence")
        with torch.inference_mode():
            self._discard_pending()
            tree = tree.to(self.device)
            n = tree.capacity
            # A tree is never deeper than its capacity - 1, so the depth is read only near the context's end.
            if self.max_length is not None and self._past + n - 1 >= self.max_length \
                    and self._past + tree.max_depth >= self.max_length:
                raise GenerationError(
                    f"a tree of depth {tree.max_depth} on {self._past} cached tokens runs past the "
                    f"{self.model_type} target's context of {self.max_length}",
                    hint="trim the tree to the remaining context (the pipeline does this automatically)",
                )
            # Padding nodes (valid=False) see only the past and themselves, so no score row is all-hidden.
            eye = torch.eye(n, dtype=torch.bool, device=self.device)
            visible = tree.ancestor_mask() | eye  # [B, N, N]
            mask = self._mask.build(visible, self._past)  # [B, 1, N, past + N]
            logits = self._forward(tree.tokens, keep=n, attention_mask=mask, position_ids=tree.positions(self._past))
            hidden = _on(self._taps.collect(), self.device)  # [B, N, n_taps * H]
        self._pending = n
        return TargetOutput(logits=logits.float(), hidden=hidden)

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        """Keep the KV entries of ``accepted_nodes`` ``[B, D + 1]`` (root first, -1 padded), drop the rest."""
        if self._pending == 0 or self._cache is None:
            raise GenerationError("commit was called without a pending forward_tree",
                                  hint="call forward_tree(tree) and then commit(tree, accepted_nodes)")
        if tree.capacity != self._pending:
            raise GenerationError(f"commit got a tree of {tree.capacity} nodes but the last forward_tree ran "
                                  f"{self._pending}", hint="commit the tree that was just verified")
        # One transfer: each row's path length, then whether each row is a root-first path inside the tree.
        lengths_t = (accepted_nodes >= 0).sum(dim=1)  # [B]
        cols = torch.arange(accepted_nodes.shape[1], device=accepted_nodes.device)  # [D + 1]
        inside = cols < lengths_t.unsqueeze(1)  # [B, D + 1]: the leading, non-padding entries
        well_formed = (accepted_nodes[:, 0] == 0) & ((accepted_nodes < self._pending) & inside | ~inside).all(dim=1) \
            & ((accepted_nodes >= 0) == inside).all(dim=1)  # [B]
        in_place = ((accepted_nodes == cols) | ~inside).all(dim=1)  # [B]: the path is the block's first nodes
        facts = torch.stack([lengths_t, well_formed.long(), in_place.long()], dim=1).tolist()  # [B, 3]
        lengths = [row[0] for row in facts]
        length = int(lengths[0])
        if any(n != length for n in lengths):
            raise GenerationError(f"batch rows accepted different path lengths {lengths}",
                                  hint="the hf adapter keeps one cache length for the batch; decode rows separately")
        path = accepted_nodes[:, :length]  # [B, L]
        if length == 0 or not all(row[1] for row in facts):
            raise ContractError(f"accepted_nodes {accepted_nodes.tolist()} is not a root-first path of the tree "
                                "(it must start with node 0 and be padded with -1 at the end)", stage="verifier")
        with torch.inference_mode():
            compact_tree_entries(self._cache, self._past, path.to(self.device), self._pending,
                                 in_place=all(row[2] for row in facts))
        self._past += length
        self._pending = 0

    def _discard_pending(self) -> None:
        """Drop the entries of a tree that was run but never committed."""
        if self._pending and self._cache is not None:
            self._cache.crop(-self._pending)
        self._pending = 0

    # ------------------------------------------------------------------------------------- reference
    def native_generate(self, input_ids: torch.Tensor, new_tokens: int, *, sampling: SamplingParams,
                        seed: int) -> NativeRun:
        """transformers' own ``generate()`` on this model, timed (:mod:`specframe_hf.reference`)."""
        return native_generate(self.model, self.device, input_ids, new_tokens, sampling=sampling, seed=seed)

    # ------------------------------------------------------------------------------- shared embeddings
    def input_embeddings(self) -> torch.nn.Module:
        return self.model.get_input_embeddings()

    def output_embeddings(self) -> torch.nn.Module:
        return self.model.get_output_embeddings()

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
