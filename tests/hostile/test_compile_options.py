"""`compile: true` where it cannot work (issue 39, silent wrong results): with `engine: transformers` it was
silently ignored (eager speed, no word); with oneDNN-prepacked linear layers (`cpu_linear: onednn` or `auto`, the
shipped SmolLM2 setting) it failed in the first forward with an inductor lowering error on
`mkldnn._linear_pointwise`. Both are refused when the target is built, naming the fields and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from specframe_hf.target import HFTarget
from specframe_hf.testing import tiny_causal_lm

from specframe.cli import run_cli
from specframe.errors import ConfigError
from specframe.plugins import PluginHost

from .probe import Outcome, assert_clean

PIPELINE = """name: compiled
target: {{type: hf, model: "{model}", dtype: float32, device: cpu, {extra}}}
sampling: {{temperature: 0.0}}
budget: 4
drafter: {{type: ngram, num_speculative_tokens: 4, max_ngram: 2, min_ngram: 1}}
corrector: {{type: identity}}
tree_builder: {{type: chain}}
pruner: {{type: none}}
verifier: {{type: auto}}
"""


@pytest.fixture(scope="module")
def saved_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("llama") / "llama"
    tiny_causal_lm("llama", seed=0).save_pretrained(directory)
    return directory


@pytest.mark.parametrize("extra, says", [
    ("compile: true, engine: transformers", "does not use (engine: transformers)"),
    ("compile: true, cpu_linear: onednn", "cannot run with cpu_linear: onednn"),
    ("compile: true, cpu_linear: auto", "cpu_linear: default"),
], ids=["transformers-engine", "onednn", "auto"])
def test_compile_where_it_cannot_work_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch, saved_llama: Path, extra: str,
                                                 says: str) -> None:
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE.format(model=saved_llama, extra=extra))
    try:
        code, escaped = run_cli(["run", str(pipeline), "--prompt", "1 2 3", "--max-new-tokens", "4"],
                                host=PluginHost()), None
    except BaseException as exc:  # the probe reports a traceback
        code, escaped = None, exc
    captured = capsys.readouterr()
    assert_clean(Outcome(code, captured.out, captured.err, escaped), code=2, says=("target.compile", says))


def test_compile_on_the_lean_engine_with_default_kernels_builds(saved_llama: Path) -> None:
    """The combination that works is still accepted (the compiled forward is made on first use)."""
    target = HFTarget.from_pretrained(str(saved_llama), device="cpu", compile=True)
    assert target.compile and target.lean_blocker is None
    with pytest.raises(ConfigError, match="engine: transformers"):
        HFTarget.from_pretrained(str(saved_llama), device="cpu", compile=True, engine="transformers")
