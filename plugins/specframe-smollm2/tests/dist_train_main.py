"""Train the tiny recipe under ``torchrun`` (the 2-rank data-parallel training test): ROOT DATA STEPS [STOP_AFTER]."""

import sys
from pathlib import Path

from specframe_smollm2.testing import tiny_llama, tiny_recipe
from specframe_smollm2.training.trainer import train

if __name__ == "__main__":
    root, data, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    stop_after = int(sys.argv[4]) if len(sys.argv) > 4 else None
    recipe = tiny_recipe("drafter", root, data, steps=steps)
    train(recipe, target_dir=root, target_model=tiny_llama(), progress=False, stop_after=stop_after)
