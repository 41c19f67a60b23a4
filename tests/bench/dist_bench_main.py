"""``specframe`` with the toy bench plugin, as a script for ``torchrun`` (the 2-rank data-parallel bench test)."""

import sys

from specframe.cli import run_cli
from tests.bench.toy_plugin import toy_host

if __name__ == "__main__":
    sys.exit(run_cli(sys.argv[1:], host=toy_host()))
