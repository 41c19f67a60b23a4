"""Generate the tiny data set under ``torchrun`` (the sharded data-generation test): MODEL_DIR OUT_DIR."""

import sys
from pathlib import Path

from specframe_smollm2.training.generate_data import generate_dataset

from specframe.distributed import from_env

PROMPTS = [f"w{i} w{i + 1} w{i + 2}" for i in range(0, 30, 5)]

if __name__ == "__main__":
    dist = from_env(backend="gloo")
    generate_dataset(Path(sys.argv[1]), Path(sys.argv[2]), PROMPTS, {"test": 1}, batch_size=2, max_new_tokens=6,
                     taps=(0, 1), topk=2, progress=False, log=lambda m: None, rank=dist.rank,
                     world_size=dist.world_size)
    dist.barrier()
