"""The probe harness of the hostile-input checker: each probe runs a hostile input the way a user would (the command
line in this process, or in a child process with a deadline where a hang is possible; the Python API directly) and
holds it to the bar of issue 28: no traceback, the documented exit status and message, no silent wrong result, no
data loss, no wait without a timeout and a message.

Every probe uses the toy target of `tests.bench.toy_plugin` (a table-driven Markov model with a character
tokenizer) or a tiny random model, so the whole checker runs in seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from specframe.cli import run_cli
from tests.bench.toy_plugin import TOY_PIPELINE, toy_host

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a child process may take before the probe counts it as a hang (they need one or two).
DEADLINE_S = 90


@dataclass
class Outcome:
    """What a probe saw: exit status, standard output and error, and an exception that escaped (a traceback)."""

    code: int | None
    out: str
    err: str
    escaped: BaseException | None = None

    @property
    def text(self) -> str:
        return " ".join((self.out + "\n" + self.err).split())


def command(capsys: pytest.CaptureFixture[str], *args: str) -> Outcome:
    """``specframe ARGS`` in this process with the toy plugin registered."""
    try:
        code = run_cli(list(args), host=toy_host())
        escaped = None
    except BaseException as exc:  # the probe reports it; nothing a user does may end in a traceback
        code, escaped = None, exc
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err, escaped)


def child(script: str, *, env: dict[str, str] | None = None, timeout: float = DEADLINE_S) -> Outcome:
    """Run ``script`` (Python, with the repository importable and ``run(args)`` = the toy CLI) in a child process;
    a child that outlives ``timeout`` is killed and the probe fails as a hang."""
    preamble = textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from specframe.cli import run_cli
        from tests.bench.toy_plugin import toy_host

        def run(args):
            sys.exit(run_cli(list(args), host=toy_host()))
        """)
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    try:
        done = subprocess.run([sys.executable, "-c", preamble + textwrap.dedent(script)], capture_output=True,
                              text=True, timeout=timeout, env=full_env, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the probe did not finish within {timeout} s (an unbounded wait): {exc.stderr!r}")
    return Outcome(done.returncode, done.stdout, done.stderr)


def assert_clean(outcome: Outcome, *, code: int, says: tuple[str, ...] = ()) -> None:
    """No traceback, the exit status ``code``, and every phrase of ``says`` in the output."""
    assert outcome.escaped is None, f"escaped: {outcome.escaped!r}"
    assert "Traceback" not in outcome.out + outcome.err, outcome.err
    assert outcome.code == code, (outcome.code, outcome.err[-2000:])
    for phrase in says:
        assert phrase in outcome.text, (phrase, outcome.text[-2000:])


def toy_pipeline(path: Path, *, target: str = "", extra: str = "", budget: str = "8", name: str = "toy-spec") -> Path:
    """The toy pipeline file (``target``: extra target fields such as ``max_length: 30``)."""
    text = TOY_PIPELINE.format(name=name, depth=4)
    if target:
        text = text.replace("seed: 3}", f"seed: 3, {target}}}")
    text = text.replace("budget: 8", f"budget: {budget}")
    path.write_text(text + extra, encoding="utf-8")
    return path


def toy_pipe(tmp_path: Path, **kwargs: Any) -> Any:
    """The toy pipeline as a `Pipeline` (see :func:`toy_pipeline`)."""
    from specframe.pipeline import Pipeline

    return Pipeline.from_yaml(toy_pipeline(tmp_path / "toy.yaml", **kwargs), host=toy_host())
