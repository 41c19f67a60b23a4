"""Ctrl-C while the command line starts (issue 39, tracebacks): the package import takes seconds, and an interrupt
then printed a ``KeyboardInterrupt`` traceback through importlib. Now: ``interrupted`` and exit status 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from .probe import DEADLINE_S, ROOT

#: What the ``specframe`` console script runs (pip's generated script), with its program name, plus an import hook
#: that holds the import of ``specframe.cli`` (which starts after the package's first statement) for up to 30 s and
#: says so: the interrupt is sent then, so it lands inside the import on any machine, however fast (a fixed delay
#: after start found the command already finished on a warm one).
CONSOLE_SCRIPT = """
import sys, time
class HoldCliImport:
    def find_spec(self, name, path=None, target=None):
        if name == "specframe.cli":
            sys.meta_path.remove(self)
            print("importing", flush=True)
            time.sleep(30)
        return None
sys.meta_path.insert(0, HoldCliImport())
sys.argv[0] = "specframe"
from specframe.cli import main
main()
"""


def test_ctrl_c_during_start_up_is_one_line_and_status_130() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", CONSOLE_SCRIPT, "plugins"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "importing"  # specframe is imported, specframe.cli is being imported
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the interrupted command did not end") from None
    assert "Traceback" not in err, err
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.strip().splitlines()[-1] in ("interrupted", "aborted"), err


def test_a_library_import_keeps_python_s_interrupt() -> None:
    """``import specframe`` in a user's program leaves SIGINT to the program (a KeyboardInterrupt there)."""
    script = "import signal, specframe; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=DEADLINE_S,
                          cwd=ROOT)
    assert done.stdout.strip() == "True", done.stderr
