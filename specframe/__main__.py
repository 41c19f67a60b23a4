"""``python -m specframe ...`` (and ``torchrun ... -m specframe ...``): the command line (:mod:`specframe.cli`)."""

from specframe.cli import main

if __name__ == "__main__":
    main()
