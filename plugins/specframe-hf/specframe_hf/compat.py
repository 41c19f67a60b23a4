"""Which Hugging Face models the ``hf`` adapter accepts, and the checks that refuse the others.

The adapter needs four things from a model: attention that honours an arbitrary additive 4-D mask (sdpa or
eager), explicit ``position_ids``, a KV cache made only of plain ``DynamicLayer``s (so entries can be moved
and cropped), and decoder layers at ``model.model.layers`` for taps. Sliding-window layers fail the cache
check (their ``cumulative_length`` bookkeeping breaks under compaction); flash attention fails the mask
check. Families are allowlisted after being verified by the adapter's tests.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn
from transformers.cache_utils import DynamicCache, DynamicLayer

from specframe.errors import CheckpointError, ConfigError

#: Model families whose tree forward and compaction are verified by this plugin's tests.
SUPPORTED_MODEL_TYPES: tuple[str, ...] = ("llama", "mistral", "qwen2", "qwen3")

#: Attention backends that take an arbitrary additive 4-D mask.
MASKED_ATTENTION: tuple[str, ...] = ("sdpa", "eager")


def cache_kwarg(model: nn.Module) -> str:
    """Name of the KV-cache argument of ``model.forward``: ``cache`` (transformers >= 5.24) or ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def accepts_logits_to_keep(model: nn.Module) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def check_supported(model: Any) -> None:
    """Raise ConfigError, naming the model type and the reason, if the adapter cannot drive ``model``."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", type(model).__name__)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            f"model type '{model_type}' ({type(model).__name__}) is not supported by the hf target adapter",
            hint=f"supported families: {', '.join(SUPPORTED_MODEL_TYPES)}; models with another cache or "
            "attention layout need their own adapter",
        )
    attn = getattr(config, "_attn_implementation", None) or "sdpa"
    if attn not in MASKED_ATTENTION:
        raise ConfigError(
            f"the {model_type} target uses attention '{attn}', which cannot take a tree-attention mask",
            hint="set attn: sdpa or attn: eager (or call model.set_attn_implementation('sdpa'))",
        )
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) != config.num_hidden_layers:
        raise ConfigError(
            f"the {model_type} target has no decoder layers at model.model.layers",
            hint="the hf adapter expects the standard *ForCausalLM layout",
        )
    cache = DynamicCache(config=config)
    odd = sorted({type(layer).__name__ for layer in cache.layers if type(layer) is not DynamicLayer})
    if odd:
        window = getattr(config, "sliding_window", None)
        detail = f" (sliding_window={window})" if window is not None else ""
        raise ConfigError(
            f"the {model_type} target's KV cache uses {', '.join(odd)}{detail}; the hf adapter can only "
            "compact plain DynamicLayer caches",
            hint="sliding-window attention is not supported; for a model whose contexts never exceed the "
            "window, set config.sliding_window = None (and use_sliding_window = False) before loading",
        )
    params = inspect.signature(model.forward).parameters
    for needed in ("attention_mask", "position_ids", "use_cache"):
        if needed not in params:
            raise ConfigError(
                f"the {model_type} target's forward() takes no '{needed}' argument",
                hint="the hf adapter needs attention_mask, position_ids and a KV cache argument",
            )
    if "cache" not in params and "past_key_values" not in params:
        raise ConfigError(
            f"the {model_type} target's forward() takes neither 'cache' nor 'past_key_values'",
            hint="the hf adapter needs a model that accepts an external KV cache",
        )


def check_tokenizer_fits(tokenizer: Any, vocab_size: int, source: str) -> None:
    """Raise CheckpointError if the tokenizer can produce ids the model has no logits for."""
    if tokenizer is None:
        return
    size = len(tokenizer)
    if size > vocab_size:
        raise CheckpointError(
            f"the tokenizer from {source} has {size} tokens but the model's output layer has {vocab_size}",
            hint="load the tokenizer that belongs to this model (the same directory), or pass tokenizer=None",
        )
