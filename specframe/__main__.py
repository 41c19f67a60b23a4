"""``python -m specframe``: the command line (:mod:`specframe.cli`)."""

from specframe.cli import main

main()
