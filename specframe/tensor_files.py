"""The one place specframe reads and writes tensor files: never unpickling code, never leaving a directory.

* :func:`load_tensor_file` reads a ``torch.save`` file (training state, data shards) with ``weights_only=True``:
  tensors, numbers, strings, lists, tuples and dicts only, so a crafted pickle cannot run code. A truncated,
  corrupt or hostile file is a :class:`~specframe.errors.CheckpointError` naming it.
* :func:`save_tensor_file` writes one atomically through :func:`specframe.files.write_with` (unique temporary
  file in the same directory, ``fsync``, ``os.replace``) with the permissions of an ordinary new file.
* :func:`safetensors_key_files` maps every tensor key of a Hugging Face style weights directory to the file
  holding it: a ``model.safetensors.index.json`` must hold a ``weight_map`` object of file names, every file
  (symlinks resolved) must lie inside the directory, every header must be readable and cover its file (a
  truncated download is caught here), and a directory holding only pickle weights (``pytorch_model.bin``) is
  refused with a hint to convert it, because loading it would unpickle.
* :func:`check_model_directory` is what every loader of a ``save_pretrained`` directory calls before handing
  it to ``transformers``: ``config.json`` is a JSON object and the weights pass :func:`safetensors_key_files`;
  :func:`check_loading_info` afterwards refuses weights that did not fill the model exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specframe.errors import CheckpointError
from specframe.files import MiB, parse_json, path_problem, read_text, write_with

INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"
#: Weight files that only ``pickle`` can read; specframe refuses them instead of unpickling.
PICKLE_PATTERNS: tuple[str, ...] = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")
CONVERT_HINT = ("convert it to safetensors in an environment you trust: load it with transformers and call "
                "model.save_pretrained(directory, safe_serialization=True)")


def load_tensor_file(path: str | Path, *, what: str = "tensor file", hint: str = "") -> Any:
    """Load a ``torch.save`` file without running code (``weights_only=True``, onto the CPU).

    Args:
        path: the file.
        what: what the file is, for the error message (``"training state"``, ``"data shard"``).
        hint: how to recover when it cannot be read (default: delete or regenerate it).
    """
    import pickle

    import torch

    path = Path(path)
    hint = hint or f"delete {path} and run again to rebuild it"
    problem = path_problem(path)
    if problem is not None:
        raise CheckpointError(f"{what} {path} {problem}", hint=hint)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{what} {path} does not exist", hint=hint) from None
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()
        detail = next((line for line in first if "Unsupported global" in line or "unsupported" in line.lower()),
                      first[0] if first else "")
        raise CheckpointError(f"{what} {path} holds objects other than tensors and plain values; specframe "
                              f"never unpickles them ({detail.strip()[:200]})",
                              hint=f"only trust files specframe wrote; {hint}") from None
    except Exception as exc:  # truncated zip, bad magic number, I/O error: all mean an unreadable file
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"cannot read {what} {path}: it is truncated or corrupt ({reason})",
                              hint=hint) from None


def save_tensor_file(obj: Any, path: str | Path, *, what: str = "tensor file") -> None:
    """``torch.save`` ``obj`` to ``path`` atomically (:func:`specframe.files.write_with`)."""
    import torch

    write_with(path, lambda handle: torch.save(obj, handle), what=what)


def read_json_object(path: Path, *, what: str) -> dict[str, Any]:
    """A JSON file that must hold an object (``config.json``, an index), as a dict, read through the one text
    reader (size, UTF-8, strict JSON); errors name the file."""
    text = read_text(path, what=what, max_bytes=16 * MiB, error=CheckpointError,
                     hint=f"the directory needs its {path.name}")
    try:  # a syntax error is reported with its line; parse_json then adds the strict checks (NaN, surrogates)
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{what} {path} is not valid JSON: {exc.msg}", where=f"{path}:{exc.lineno}",
                              hint=f"repair or re-download {path.name}") from None
    except (RecursionError, ValueError):
        pass
    data = parse_json(text, where=str(path), error=CheckpointError, hint=f"repair or re-download {path.name}")
    if not isinstance(data, dict):
        raise CheckpointError(f"{what} {path} holds a JSON {type(data).__name__}, expected an object",
                              hint=f"repair or re-download {path.name}")
    return data


def _inside(directory: Path, name: str, source: Path) -> Path:
    """``directory / name``, refused when it (after resolving symlinks) lies outside ``directory``."""
    root = directory.resolve()
    resolved = (directory / name).resolve()
    if not resolved.is_relative_to(root):
        raise CheckpointError(f"{source} names weight file {name!r}, which resolves to {resolved}, outside the "
                              f"checkpoint directory {root}",
                              hint="weight files must lie inside the checkpoint directory (no '..', absolute "
                                   "paths or symlinks out of it)")
    return directory / name


def _index_files(directory: Path) -> dict[str, Path]:
    """Key -> shard of a ``model.safetensors.index.json`` whose entries are all checked."""
    index_path = directory / INDEX_FILE
    weight_map = read_json_object(index_path, what="shard index").get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"shard index {index_path}: 'weight_map' is "
                              f"{'missing' if weight_map is None else type(weight_map).__name__}, expected an "
                              f"object of tensor name -> shard file", hint="repair or re-download the index")
    bad = [f"{k!r}: {v!r}" for k, v in weight_map.items() if not isinstance(v, str) or not v]
    if bad:
        raise CheckpointError(f"shard index {index_path}: weight_map values must be file names, found "
                              f"{', '.join(bad[:3])}", hint="repair or re-download the index")
    files = {name: _inside(directory, name, index_path) for name in sorted(set(weight_map.values()))}
    for name, path in files.items():
        if not path.is_file():
            raise CheckpointError(f"shard {path} listed in {INDEX_FILE} is missing",
                                  hint="download every shard of the checkpoint")
        if not name.endswith(".safetensors"):
            raise CheckpointError(f"shard index {index_path} lists {name!r}, which is not a .safetensors file",
                                  hint=CONVERT_HINT)
    headers = {path: set(_header_keys(path)) for path in files.values()}
    for key, name in weight_map.items():
        if key not in headers[files[name]]:
            raise CheckpointError(f"{files[name].name} does not contain {key}, although {INDEX_FILE} says it does",
                                  hint="the index and shards disagree; re-download the checkpoint")
    return {key: files[name] for key, name in weight_map.items()}


def _header_keys(path: Path) -> list[str]:
    """Tensor names of a safetensors file; its header must be readable and cover the whole file."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return list(f.keys())
    except Exception as exc:  # the library raises its own error type for every kind of damage
        raise CheckpointError(f"cannot read safetensors file {path}: {str(exc).strip()[:200]}",
                              hint="the file is truncated or corrupt; download or convert it again") from None


def safetensors_key_files(directory: str | Path) -> dict[str, Path]:
    """Every tensor key of ``directory``'s safetensors weights -> the file holding it (see the module doc)."""
    directory = Path(directory)
    if (directory / INDEX_FILE).exists():
        return _index_files(directory)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        pickled = sorted({p.name for pattern in PICKLE_PATTERNS for p in directory.glob(pattern)})
        if pickled:
            raise CheckpointError(f"{directory} holds only pickle weights ({', '.join(pickled[:4])}); specframe "
                                  f"reads safetensors only and never unpickles weight files", hint=CONVERT_HINT)
        raise CheckpointError(f"weights file {directory / 'model.safetensors'} is missing (no *.safetensors in "
                              f"{directory})",
                              hint="give a directory written by save_pretrained with safetensors weights")
    out: dict[str, Path] = {}
    for path in files:
        _inside(directory, path.name, directory)
        for key in _header_keys(path):
            out[key] = path
    return out


def check_model_directory(directory: str | Path, *, role: str = "model") -> dict[str, Any]:
    """Validate a ``save_pretrained`` directory before ``transformers`` reads it; returns its ``config.json``.

    Args:
        directory: the directory.
        role: how the pipeline names it, for messages (``target.model``, ``drafter.model``).
    """
    directory = Path(directory)
    config = read_json_object(directory / CONFIG_FILE, what=f"{role} config")
    safetensors_key_files(directory)
    return config


def check_loading_info(info: dict[str, Any], directory: str | Path, *, role: str = "model") -> None:
    """Refuse a model whose weights did not fill it exactly (``from_pretrained(..., output_loading_info=True)``).

    ``transformers`` only warns about missing, unexpected or mis-shaped keys and initialises missing weights at
    random, which would make a silently wrong model; here any of them is an error naming the keys.
    """
    problems = [f"{name.replace('_', ' ')} ({len(keys)}): {', '.join(sorted(map(str, keys))[:4])}"
                for name, keys in info.items() if name != "error_msgs" and keys]
    if problems:
        raise CheckpointError(f"the weights in {role} '{directory}' do not match its config.json: "
                              + "; ".join(problems),
                              hint="config.json and the weights must come from the same save_pretrained")
