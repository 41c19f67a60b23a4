"""Loading a causal LM and its tokenizer from a local directory, strictly offline.

``target.model`` must name a directory written by ``save_pretrained`` (config.json + safetensors weights).
Nothing is downloaded: every ``from_pretrained`` call passes ``local_files_only=True``. Before ``transformers``
sees the directory, :func:`specframe.tensor_files.check_model_directory` checks config.json, the shard index
(no file outside the directory) and every safetensors header, and refuses pickle-only weights; the model is
then loaded with ``use_safetensors=True``, so nothing is ever unpickled. A missing, broken or mismatched file
(a tokenizer whose ids do not fit the model) is a :class:`~specframe.errors.CheckpointError` naming the path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from specframe.errors import CheckpointError, ConfigError
from specframe.tensor_files import check_loading_info, check_model_directory
from specframe_hf.device_map import DeviceMap

#: A model's own tokenizer fills at least this share of its embedding table (padding adds a few percent).
MIN_VOCAB_FILL = 0.75

#: Files whose presence means the directory ships a tokenizer.
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def model_directory(path: str) -> Path:
    """The checked model directory: it exists and holds a config.json."""
    directory = Path(path).expanduser()
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"target.model '{directory}' is a file, not a model directory",
                              hint="give the directory that save_pretrained wrote (config.json + weights)")
    if not directory.is_dir():
        raise CheckpointError(
            f"target.model directory '{directory}' does not exist",
            hint="give a local directory written by save_pretrained (config.json + weights); "
            "specframe never downloads models",
        )
    if not (directory / "config.json").is_file():
        raise CheckpointError(
            f"target.model directory '{directory}' has no config.json",
            hint="point target.model at the directory that save_pretrained wrote",
        )
    return directory


@contextmanager
def without_progress_bars() -> Iterator[None]:
    """Silence transformers' progress bars ("Loading weights") for the block: loading a local target takes
    about a second, and commands print only their own output."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def load_model(directory: Path, *, dtype: torch.dtype, device: torch.device, attn: str | None = None,
               role: str = "target.model", placement: DeviceMap | None = None) -> Any:
    """``AutoModelForCausalLM`` from ``directory`` (local files, safetensors only), in eval mode on ``device``, or
    split across devices (accelerate) or torchrun ranks when ``placement`` asks (:mod:`specframe_hf.device_map`)."""
    from transformers import AutoModelForCausalLM

    check_model_directory(directory, role=role)
    if placement is not None:
        placement.check()
        placement.check_model(directory, dtype)
    split = placement is not None and placement.active
    kwargs: dict[str, Any] = {} if attn is None else {"attn_implementation": attn}
    if split:
        kwargs.update(placement.load_kwargs())
    model: Any
    info: Any  # transformers' loading report
    try:
        with without_progress_bars():
            model, info = AutoModelForCausalLM.from_pretrained(
                directory, local_files_only=True, use_safetensors=True, dtype=dtype, output_loading_info=True,
                **kwargs)
    except Exception as exc:  # transformers raises many types for a directory it cannot use
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        if split:  # the directory passed its checks: the placement is what the loader refused
            raise ConfigError(
                f"could not place {role} '{directory}' as target.device_map / max_memory / offload_folder ask: "
                f"{type(exc).__name__}: {first}",
                hint="check target.device_map, target.max_memory and target.offload_folder (docs/scale-out.md)",
            ) from None
        raise CheckpointError(
            f"could not load a causal LM from {role} '{directory}': {type(exc).__name__}: {first}",
            hint="the directory needs the config.json and safetensors weights that save_pretrained wrote",
        ) from None
    check_loading_info(info, directory, role=role)
    return model.eval() if split else model.to(device).eval()


def check_tokenizer_matches(tokenizer: Any, model: Any, directory: Path) -> None:
    """A tokenizer loaded next to a model must be that model's: ids that fill most of the embedding table
    (real models pad it by a few percent at most) and begin/end-of-sequence tokens the model's config knows."""
    if tokenizer is None:
        return
    rows = int(model.get_input_embeddings().weight.shape[0])
    size = len(tokenizer)
    if size < MIN_VOCAB_FILL * rows:
        raise CheckpointError(f"the tokenizer in '{directory}' has {size} tokens but the model's embedding table "
                              f"has {rows} rows: the tokenizer belongs to another model",
                              hint="put the tokenizer saved with this model next to its weights")
    for role, attr in (("ends", "eos"), ("begins", "bos")):
        known: set[int] = set()
        for source in (getattr(model, "generation_config", None), model.config):
            ids = getattr(source, f"{attr}_token_id", None) if source is not None else None
            known.update([ids] if isinstance(ids, int) else list(ids or []))
        mine = getattr(tokenizer, f"{attr}_token_id", None)
        if known and isinstance(mine, int) and mine not in known:
            raise CheckpointError(f"the tokenizer in '{directory}' {role} sequences with id {mine} "
                                  f"({getattr(tokenizer, f'{attr}_token', None)!r}) but the model's config says "
                                  f"{sorted(known)}: the tokenizer belongs to another model",
                                  hint="put the tokenizer saved with this model next to its weights")


def load_tokenizer(directory: Path) -> Any:
    """The directory's tokenizer, or None when it ships none."""
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        return None
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    except Exception as exc:  # a broken tokenizer file surfaces as many exception types
        raise CheckpointError(
            f"could not load the tokenizer in '{directory}': {type(exc).__name__}: {str(exc).strip()[:300]}",
            hint="re-save it with tokenizer.save_pretrained(directory), or remove the broken tokenizer files",
        ) from None
    if getattr(tokenizer, "chat_template", None):
        try:  # a broken template would otherwise fail at the first prompt, deep inside a decode
            tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                          add_generation_prompt=True)
        except Exception as exc:  # jinja2 syntax and runtime errors
            raise CheckpointError(f"the chat template of the tokenizer in '{directory}' does not render: "
                                  f"{type(exc).__name__}: {str(exc).strip()[:300]}",
                                  hint="fix chat_template.jinja (or chat_template in tokenizer_config.json), "
                                       "or remove it to prompt without a template") from None
    return tokenizer
