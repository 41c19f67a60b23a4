"""Reading and atomically writing a Hugging Face style weights directory (``*.safetensors``, sharded or not).

Reading accepts ``model.safetensors``, any set of ``*.safetensors`` files, or a sharded set described by
``model.safetensors.index.json`` (``{"weight_map": {key: shard file}}``). Headers are read without loading
tensors, so key and shape checks are cheap and a component can load just the keys it owns.

Writing is atomic per file: every file is written under a temporary name in the destination directory and moved
into place with :func:`os.replace`; a directory that does not exist yet is built in a temporary sibling and moved
into place whole. Files and directories get the modes of ordinary new ones (umask respected), not the private
modes of the temporary names. Files this write does not produce but an older save left behind (a stale index or
shard) are removed afterwards, so the directory never mixes two saves.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from specframe.errors import CheckpointError
from specframe.files import path_problem, umask_mode
from specframe.tensor_files import INDEX_FILE, safetensors_key_files

SINGLE_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


class SafetensorsDir:
    """The weight files of one checkpoint directory: which file holds each key, and each key's shape."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        problem = path_problem(self.directory, directory=True)
        if problem is not None:
            raise CheckpointError(
                f"checkpoint directory {self.directory} {problem}",
                hint="set `checkpoint:` to a local directory with config.json and *.safetensors "
                     "(download it first, e.g. with `huggingface-cli download <repo> --local-dir <dir>`)",
            )
        self.file_of: dict[str, Path] = safetensors_key_files(self.directory)
        self._shapes: dict[str, tuple[int, ...]] | None = None

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Shape of every stored tensor, from the file headers (no tensor data is read)."""
        if self._shapes is None:
            shapes: dict[str, tuple[int, ...]] = {}
            by_file: dict[Path, list[str]] = {}
            for key, path in self.file_of.items():
                by_file.setdefault(path, []).append(key)
            for path, keys in by_file.items():
                with safe_open(str(path), framework="pt") as f:
                    for key in keys:
                        shapes[key] = tuple(f.get_slice(key).get_shape())
            self._shapes = shapes
        return self._shapes

    def load(self, keys: list[str], *, dtype: torch.dtype | None = None,
             device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Load ``keys`` (converted to ``dtype`` when given) onto ``device``."""
        by_file: dict[Path, list[str]] = {}
        for key in keys:
            by_file.setdefault(self.file_of[key], []).append(key)
        out: dict[str, torch.Tensor] = {}
        for path, file_keys in by_file.items():
            with safe_open(str(path), framework="pt", device="cpu") as f:
                for key in file_keys:
                    t = f.get_tensor(key)
                    if dtype is not None and t.is_floating_point():
                        t = t.to(dtype)
                    out[key] = t.to(device)
        return out


def _shard(tensors: dict[str, torch.Tensor], max_shard_bytes: int | None) -> list[dict[str, torch.Tensor]]:
    """Split tensors into shards of at most ``max_shard_bytes`` (a tensor larger than that gets its own shard)."""
    if max_shard_bytes is None:
        return [tensors]
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for key, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][key] = t
        size += nbytes
    return shards


def _write_files(directory: Path, config: dict, tensors: dict[str, torch.Tensor],
                 max_shard_bytes: int | None, extra_files: Mapping[str, str]) -> set[str]:
    """Write ``extra_files`` (first: the output marker), then the weights and config into ``directory``, each file
    via a temporary name + os.replace."""
    ready = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    shards = _shard(ready, max_shard_bytes)
    written: set[str] = set()

    def replace_into(name: str, write: object) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
        os.close(fd)
        try:
            write(tmp)  # type: ignore[operator]
            os.chmod(tmp, umask_mode())  # mkstemp makes 0600; a published file gets an ordinary file's mode
            os.replace(tmp, directory / name)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        written.add(name)

    for name, text in extra_files.items():
        replace_into(name, lambda p, t=text: Path(p).write_text(t, encoding="utf-8"))
    if len(shards) == 1:
        replace_into(SINGLE_FILE, lambda p: save_file(shards[0], p, metadata={"format": "pt"}))
    else:
        weight_map: dict[str, str] = {}
        total = 0
        for i, shard in enumerate(shards, start=1):
            name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
            replace_into(name, lambda p, s=shard: save_file(s, p, metadata={"format": "pt"}))
            for key, t in shard.items():
                weight_map[key] = name
                total += t.numel() * t.element_size()
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        replace_into(INDEX_FILE, lambda p: Path(p).write_text(json.dumps(index, indent=2) + "\n"))
    replace_into(CONFIG_FILE, lambda p: Path(p).write_text(json.dumps(config, indent=2) + "\n"))
    return written


def check_checkpoint_destination(directory: Path) -> None:
    """A save may create ``directory`` or overwrite a checkpoint in it, but never write into (and prune stale
    weights from) a file or a directory of other files."""
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"cannot save a checkpoint to {directory}: it is a file",
                              hint="give a directory path (created when missing)")
    if directory.is_dir() and not (directory / CONFIG_FILE).is_file() and any(directory.iterdir()):
        raise CheckpointError(f"cannot save a checkpoint into {directory}: it holds other files and no "
                              f"{CONFIG_FILE}, so it is not a checkpoint to overwrite",
                              hint="give a new or empty directory (or an earlier checkpoint's directory)")


def write_checkpoint_dir(directory: str | Path, config: dict, tensors: dict[str, torch.Tensor], *,
                         max_shard_bytes: int | None = None, extra_files: Mapping[str, str] | None = None) -> Path:
    """Write ``config.json`` and the weights into ``directory`` atomically; returns the directory.

    Args:
        directory: destination; created if missing (built in a temporary sibling, then renamed into place).
        config: the ``config.json`` dict.
        tensors: published key -> tensor.
        max_shard_bytes: split into ``model-0000i-of-0000n.safetensors`` + index above this size.
        extra_files: file name -> text written with the weights (the output marker of
            :mod:`specframe.files.outputs`; inside the same directory rename when the directory is new).
    """
    directory = Path(directory)
    extra_files = extra_files or {}
    check_checkpoint_destination(directory)
    if not directory.exists():
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp_dir = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
        try:
            _write_files(tmp_dir, config, tensors, max_shard_bytes, extra_files)
            os.chmod(tmp_dir, umask_mode(0o777))  # mkdtemp makes 0700
            os.replace(tmp_dir, directory)
        finally:
            if tmp_dir.exists():
                shutil.rmtree(tmp_dir)
        return directory
    written = _write_files(directory, config, tensors, max_shard_bytes, extra_files)
    for stale in [*directory.glob("*.safetensors"), directory / INDEX_FILE]:
        if stale.exists() and stale.name not in written:
            stale.unlink()
    return directory
