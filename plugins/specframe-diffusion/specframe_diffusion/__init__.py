"""specframe-diffusion: block-diffusion drafters (DFlash, Domino, DSpark) and their correction heads.

The drafters and correctors load the published checkpoints as they are (``config.json`` + ``*.safetensors``, no
``trust_remote_code``). Components are registered through the ``diffusion`` entry point
(:mod:`specframe_diffusion.plugin`); the checkpoint API is importable directly::

    from specframe_diffusion.checkpoint import load_checkpoint, save_checkpoint
"""

__version__ = "0.1.0"
