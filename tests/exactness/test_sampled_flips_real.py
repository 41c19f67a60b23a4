"""At T > 0 on the real SmolLM2 target, the default pipeline's tokens equal plain decoding's for a seed, except
where a draw lands within ε of a CDF boundary and the two forwards' logits differ in the last bits.

Why the condition. Plain decoding draws the token at position ``t`` as ``F_t⁻¹(u_t)`` from the logits of a
one-token step; the WALK verifier draws it with the same uniform ``u_t`` from the logits of the tree forward.
The two forwards run different kernels over different row counts (with ``cpu_linear: auto``, default BLAS for
one row and oneDNN for a tree), so the logits agree only to about 1e-6 and the CDF steps move by as much. A
uniform that falls that close to a step picks the neighbouring token on one side: a numeric flip. The law is
intact (each step moves by ~1e-6 of its mass); a bug (a wrong law, a wrong uniform, a wrong prefix) moves the
draw anywhere.

What the test holds. For several prompts and seeds, alone and in a batch of four, either the outputs are equal,
or at their first differing position ``t`` the uniform ``u_t`` (recomputed from the seed and the position) lies
within :data:`EPS` of the CDF boundary that separates plain decoding's token from the speculative one, under the
target's processed law recomputed from a fresh forward over the common prefix, with at most :data:`EPS` of mass
between the two tokens. Controls: a synthetic flip on the real law is accepted, and a speculative pipeline drawing
from a deliberately wrong law (T = 1.0 against plain's 0.7) is refused.

Worked example (issue 38): at the first differing draw ``u`` fell inside a tail token of probability 2.2e-6,
1e-6 from its CDF boundary: a flip (distance 1e-6 <= ε, no mass between the tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from specframe_smollm2.testing import CONVERTED_TARGET
from specframe_smollm2.testing import private_cache as link_private_cache

from specframe import PluginHost
from specframe.decode.exclusive import exclusive
from specframe.decode.request import Request
from specframe.pipeline import Pipeline
from specframe.sampling import inverse_cdf, probs
from specframe.sampling.noise import TARGET, RoundNoise
from specframe.types import SamplingParams

pytestmark = [pytest.mark.real_model, pytest.mark.slow,
              pytest.mark.skipif(not (CONVERTED_TARGET / "manifest.json").is_file(),
                                 reason="no converted SmolLM2 target (make setup-target)")]

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "examples/smollm2/dartree-pruned.yaml"
PLAIN = ROOT / "examples/smollm2/plain.yaml"
#: Largest distance (as a share of the CDF's total mass) from a boundary that a numeric flip may have, and the most
#: mass between the two tokens: float32 logits of the two forwards differ by about 1e-6, so steps move by as much.
EPS = 1e-4
SAMPLING = SamplingParams(temperature=0.7)
NEW_TOKENS = 32
PROMPTS = ["Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
           "How many clips did Natalia sell altogether in April and May?",
           "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
           "Write a short note to a friend recommending a book you enjoyed.",
           "Translate into French: the weather is lovely today and we are going to the beach."]
SEEDS = [101, 102, 103, 104]


@dataclass(frozen=True)
class Verdict:
    """The first difference of two outputs: where, the two tokens, and how far the uniform lies from the CDF
    boundary between them (``distance``) with how much mass lies strictly between them (``between``), both as
    shares of the law's total mass."""

    position: int
    plain: int
    spec: int
    distance: float
    between: float

    @property
    def flip(self) -> bool:
        return self.distance <= EPS and self.between <= EPS

    def __str__(self) -> str:
        return (f"new token {self.position}: plain {self.plain}, speculative {self.spec}; the uniform lies "
                f"{self.distance:.3g} from the boundary between them, {self.between:.3g} of mass between them "
                f"(a numeric flip needs both <= {EPS})")


def boundary_distance(weights: torch.Tensor, u: float, a: int, b: int) -> tuple[float, float]:
    """For a law ``weights`` ``[V]`` and a uniform ``u``: the distance of ``u`` from the CDF steps that separate
    tokens ``a`` and ``b``, and the mass strictly between them, as shares of the total mass.

    Inverse-CDF sampling picks token ``i`` when ``cdf[i-1] <= u·total < cdf[i]``, so between the cells of
    ``lo = min(a, b)`` and ``hi = max(a, b)`` lie the steps from ``cdf[lo]`` to ``cdf[hi-1]`` (one step when they are
    neighbours). Example: weights ``[.5, .3, .2]``, ``u = .4999``, tokens 0 and 1: distance 1e-4, nothing between.
    """
    w = weights.to(torch.float64).clamp(min=0.0)
    cdf = w.cumsum(dim=-1)
    total = float(cdf[-1])
    x = u * total
    lo, hi = min(a, b), max(a, b)
    left, right = float(cdf[lo]), float(cdf[hi - 1])
    distance = 0.0 if left <= x <= right else min(abs(x - left), abs(x - right))
    return distance / total, (right - left) / total


def uniform_at(seed: int, prompt_len: int, j: int) -> float:
    """The uniform plain decoding draws new token ``j`` with (absolute position ``prompt_len + j``)."""
    noise = RoundNoise.for_rows([seed], [prompt_len - 1], "cpu")
    return float(noise.uniforms(TARGET, torch.tensor([j], dtype=torch.long))[0])


def reference_law(pipe: Pipeline, ids: torch.Tensor) -> torch.Tensor:  # [V]
    """The target's processed law after ``ids`` ``[1, P]``, from a fresh forward over the whole prefix."""
    with exclusive(pipe.target, "the reference law"), torch.inference_mode():
        pipe.target.reset()
        logits = pipe.target.prefill(ids).logits[0, -1]
        pipe.target.reset()
    return probs(logits.float(), SAMPLING)


def first_difference(pipe: Pipeline, ids: torch.Tensor, seed: int, plain: list[int],
                     spec: list[int]) -> Verdict | None:
    """None when the outputs are equal; else the verdict at their first differing token."""
    if plain == spec:
        return None
    j = next((i for i, (p, s) in enumerate(zip(plain, spec, strict=False)) if p != s), None)
    if j is None:  # one output is a prefix of the other: they stopped differently, which no flip explains
        return Verdict(min(len(plain), len(spec)), -1, -1, float("inf"), float("inf"))
    prefix = torch.cat([ids, torch.tensor([plain[:j]], dtype=ids.dtype)], dim=1)
    law = reference_law(pipe, prefix)
    distance, between = boundary_distance(law, uniform_at(seed, int(ids.shape[1]), j), plain[j], spec[j])
    return Verdict(j, plain[j], spec[j], distance, between)


@pytest.fixture(scope="module")
def pipes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    monkeypatch = pytest.MonkeyPatch()
    link_private_cache(tmp_path_factory.mktemp("cache"), monkeypatch)  # kernel choices stay out of the user's cache
    host = PluginHost()
    spec = Pipeline.from_yaml(DEFAULT, overrides=["sampling.temperature=0.7", "budget=16"], host=host)
    plain = Pipeline.from_yaml(PLAIN, overrides=["sampling.temperature=0.7"], target=spec.target, host=host)
    wrong = spec.with_stage("sampling", None, sampling={"temperature": 1.0})
    prompts = [spec.request_inputs(Request(p, NEW_TOKENS), chat=None).ids for p in PROMPTS]
    plain_out = [plain.generate(ids, NEW_TOKENS, seed=seed).tokens for ids, seed in zip(prompts, SEEDS, strict=True)]
    yield {"spec": spec, "wrong": wrong, "prompts": prompts, "plain": plain_out}
    monkeypatch.undo()


def verdicts(pipes: dict[str, Any], outputs: list[list[int]]) -> list[Verdict | None]:
    return [first_difference(pipes["spec"], ids, seed, plain, out)
            for ids, seed, plain, out in zip(pipes["prompts"], SEEDS, pipes["plain"], outputs, strict=True)]


def test_default_pipeline_equals_plain_decoding_up_to_numeric_flips(pipes: dict[str, Any]) -> None:
    spec: Pipeline = pipes["spec"]
    alone = [spec.generate(ids, NEW_TOKENS, seed=seed).tokens for ids, seed in zip(pipes["prompts"], SEEDS,
                                                                                   strict=True)]
    batch = spec.generate([Request(ids, NEW_TOKENS, seed=seed) for ids, seed in zip(pipes["prompts"], SEEDS,
                                                                                      strict=True)])
    batched = [r.tokens for r in batch]  # type: ignore[union-attr]
    for how, outputs in (("alone", alone), ("in a batch of 4", batched)):
        for prompt, verdict in zip(PROMPTS, verdicts(pipes, outputs), strict=True):
            assert verdict is None or verdict.flip, f"{how}, prompt {prompt[:40]!r}: {verdict}"


def test_a_wrong_law_is_not_taken_for_a_numeric_flip(pipes: dict[str, Any]) -> None:
    """Negative control: the speculative pipeline drawing at T = 1.0 (the verifier's law is not plain decoding's
    T = 0.7) differs from plain decoding, and no difference passes as a flip."""
    wrong: Pipeline = pipes["wrong"]
    outputs = [wrong.generate(ids, NEW_TOKENS, seed=seed).tokens for ids, seed in zip(pipes["prompts"], SEEDS,
                                                                                      strict=True)]
    found = [v for v in verdicts(pipes, outputs) if v is not None]
    assert found, "a pipeline at another temperature emitted plain decoding's tokens on every prompt"
    assert not any(v.flip for v in found), [str(v) for v in found]


def test_a_draw_at_a_cdf_boundary_of_the_real_law_is_a_flip(pipes: dict[str, Any]) -> None:
    """Positive control of the check: uniforms just either side of the step after the likeliest token of the real
    law pick neighbouring tokens, and the check calls that a flip; a uniform in the middle of that token's cell is
    not one."""
    law = reference_law(pipes["spec"], pipes["prompts"][0]).double()
    law = law / law.sum()
    a = int(law.argmax())
    step = float(law.cumsum(-1)[a])  # the right edge of token a's cell
    assert law[a] > 0.01 and step < 1 - 1e-6
    below, above = (int(inverse_cdf(law, torch.tensor(step + d, dtype=torch.float64))) for d in (-1e-7, 1e-7))
    assert below == a != above
    assert Verdict(0, below, above, *boundary_distance(law, step - 1e-7, below, above)).flip
    middle = step - float(law[a]) / 2
    assert int(inverse_cdf(law, torch.tensor(middle, dtype=torch.float64))) == a
    assert not Verdict(0, a, above, *boundary_distance(law, middle, a, above)).flip
