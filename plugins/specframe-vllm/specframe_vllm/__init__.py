"""specframe-vllm: serve specframe's block drafters in vLLM (docs/serving-vllm.md).

Two environments use this package, so nothing is imported here:

* the main one (specframe, transformers 5.x): :mod:`specframe_vllm.export` (``specframe vllm-export``), the
  specframe side of the cross-check and of the peer benchmark;
* the vLLM one (``make vllm-setup``: vLLM 0.32 pins an older transformers): :mod:`specframe_vllm.vllm_plugin` and
  :mod:`specframe_vllm.shift_model` (loaded by vLLM), the vLLM sides of the cross-check and the benchmark. Those
  modules import vLLM, torch and the standard library only, plus :mod:`specframe_vllm.layout`.
"""
