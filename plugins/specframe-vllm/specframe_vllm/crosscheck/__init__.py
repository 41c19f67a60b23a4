"""The cross-check of vLLM against specframe (docs/serving-vllm.md): two sides in two environments, one comparer.

* :mod:`.specframe_side` (main environment): specframe's DFlash chain decodes the held-out prompts (float32,
  greedy) and writes their token ids, outputs and per-depth acceptance, plus the target's exact law of a short
  sampled continuation (transformers) at the test temperature and at a wrong one (the negative control);
* :mod:`.vllm_side` (vLLM environment): vLLM decodes the same token ids with the exported drafter and writes its
  outputs, its per-position acceptance counters and the sampled continuations;
* :mod:`.compare` (main environment): outputs identical, acceptance per position within tolerance, the sample
  law equal to the target's and different from the wrong one.
"""
