"""The cross-check of vLLM against specframe (docs/serving-vllm.md): two sides in two environments, one comparer.

* :mod:`.specframe_side` (main environment): specframe's DFlash chain decodes the held-out prompts (float32,
  greedy) and writes their token ids, outputs, per-round acceptance and the drafter's best candidates per round,
  plus the target's exact law of a short sampled continuation (transformers) at the test temperature and at a
  wrong one (the law's negative control);
* :mod:`.vllm_side` (vLLM environment): vLLM decodes the same token ids with the exported drafter, one engine step
  (one round) at a time, and writes its outputs, its per-round acceptance and drafter candidates, its counters and
  the sampled continuations;
* :mod:`.rounds` and :mod:`.compare` (main environment): the target numerics (greedy outputs identical), the
  drafter round by round (per prompt and position, its log-probabilities within a float32 bound), the sample law;
* :mod:`.controls` (main environment): wrong exports (noisy weights, swapped layers) the comparer must catch;
* :mod:`.trace` (both environments): splits the engines' drafter log-probability difference into the target's taps
  and the drafter's own kernels (how the comparer's bound was derived).
"""
