"""Ctrl-C while the ``specframe`` command starts: one line, exit status 130, no traceback.

Importing the package takes seconds (torch, transformers, the plugins), and the console script imports
:mod:`specframe.cli` before :func:`specframe.cli.main` runs, so an interrupt then arrives inside ``import`` and would
print a ``KeyboardInterrupt`` traceback through importlib. The package's first statement calls
:func:`quiet_interrupts_while_starting`: when the running program is the command line (the ``specframe`` console
script or ``python -m specframe``), SIGINT prints ``interrupted`` and exits with 130 until :func:`started` (called
by ``main``) hands SIGINT back to Python's default handler, whose ``KeyboardInterrupt`` the CLI turns into the
same line. A library import (``import specframe`` from a user's program) is left alone.

This module imports only the standard library, so it is safe as the package's first import.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

#: Exit status of a program ended by SIGINT (128 + 2), as a shell reports it.
INTERRUPTED = 130


def is_command_line() -> bool:
    """Whether this process is the ``specframe`` command (console script, or ``python -m specframe`` while the
    package is located: ``sys.argv[0]`` is then ``-m``)."""
    name = os.path.basename(sys.argv[0]) if sys.argv else ""
    return name in ("specframe", "specframe.exe", "-m")


def _interrupted(_signum: int, _frame: FrameType | None) -> None:
    sys.stderr.write("interrupted\n")
    raise SystemExit(INTERRUPTED)


def quiet_interrupts_while_starting() -> None:
    """Install the start-up SIGINT handler (see the module docstring); a no-op outside the command line, off the
    main thread, or when the program already set its own handler."""
    if not is_command_line() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    try:
        signal.signal(signal.SIGINT, _interrupted)
    except ValueError:  # not the main thread
        pass


def started() -> None:
    """Give SIGINT back to Python's default handler (the CLI reports its ``KeyboardInterrupt`` itself)."""
    if signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)
