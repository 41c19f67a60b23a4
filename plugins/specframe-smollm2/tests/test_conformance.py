"""The conformance kit on the ``smollm2`` target: a tiny random Llama saved with a checksum manifest stands in for
the converted SmolLM2 cache, and is loaded through the same manifest check and ``hf`` adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specframe_hf.testing import tiny_causal_lm
from specframe_smollm2.cache import write_manifest

from specframe.testing.conformance import ConformanceCase, ConformanceSuite


def tiny_cache(workdir: Path) -> dict[str, Any]:
    """A directory shaped like the converted target: save_pretrained output plus manifest.json."""
    if not (workdir / "manifest.json").is_file():
        tiny_causal_lm("llama", seed=0).save_pretrained(workdir)
        write_manifest(workdir, {"source": "tiny random Llama (conformance test)"})
    return {"path": str(workdir)}


class TestSmolLM2Conformance(ConformanceSuite):
    plugin = "smollm2"
    cases = (ConformanceCase("target", "smollm2", config=tiny_cache),)
