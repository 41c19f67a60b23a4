"""Notices for the person running specframe: one line on stderr, each distinct message once per process.

Used wherever the product decides something the user should know about without it being an error (a cached
measurement set aside, a kernel choice not cached on a busy machine, ...); results never depend on them.

Example: ``notify("measured while other processes used the CPUs: not caching it")`` prints
``specframe: measured while ...`` the first time only.
"""

from __future__ import annotations

import sys

_NOTIFIED: set[str] = set()


def notify(message: str) -> None:
    """Print ``message`` to stderr once per process (prefixed ``specframe:``)."""
    if message not in _NOTIFIED:
        _NOTIFIED.add(message)
        print(f"specframe: {message}", file=sys.stderr)
