"""Test set-up for specframe-verifiers: puts the shared scenario module on ``sys.path``.
(Torch runs on one thread for the whole suite: see the repository's root conftest.py.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


