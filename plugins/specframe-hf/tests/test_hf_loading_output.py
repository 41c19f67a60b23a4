"""Loading a target prints nothing of transformers' own (the CLI prints only its output), and leaves the
process-wide progress-bar switch as it found it."""

from __future__ import annotations

from pathlib import Path

import pytest
from specframe_hf.target import HFTarget
from specframe_hf.testing import tiny_causal_lm
from transformers.utils import logging as hf_logging


def test_loading_shows_no_progress_bar(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    tiny_causal_lm("llama", vocab_size=32).save_pretrained(tmp_path)
    hf_logging.enable_progress_bar()
    capfd.readouterr()
    target = HFTarget.from_pretrained(str(tmp_path), device="cpu")
    err = capfd.readouterr().err
    assert target.vocab_size == 32
    assert "Loading weights" not in err and "%|" not in err
    assert hf_logging.is_progress_bar_enabled()  # restored afterwards
