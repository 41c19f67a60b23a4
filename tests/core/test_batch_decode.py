"""The batched loop on the exact toy target: per-request randomness, output law per row, rows coming and going."""

from __future__ import annotations

import types
from typing import Literal

import pytest
import torch

from specframe import ComponentConfig, ComponentSpec, PluginHost, hookimpl
from specframe.decode.request import Request
from specframe.interfaces import RoundContext, Verifier
from specframe.pipeline import Pipeline
from specframe.registry import VerifierCapabilities
from specframe.sampling import probs
from specframe.testing.stats import exact_first_two_law, g_test, joint_counts
from specframe.testing.toy import ToyTarget
from specframe.tree import DraftTree
from specframe.types import SamplingParams, VerifyResult

from .test_decode_loop import BASE, make_host, plain_greedy

SAMPLED = {**BASE, "sampling": {"temperature": 1.0}, "verifier": {"type": "walk"}}
PROMPT = [2, 5]
OTHERS = [[1], [6, 6, 0, 1], [3, 4, 4], [0, 2, 2, 2, 6]]  # batch-mates of other lengths


class OffByOneConfig(ComponentConfig):
    type: Literal["off_by_one_walk"] = "off_by_one_walk"


def off_by_one_walk() -> Verifier:
    """Negative control: the walk reading each node's decision from its parent's logits."""
    from specframe_verifiers import WalkVerifier

    class OffByOneWalk(WalkVerifier):
        def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
            index = tree.parent.clamp(min=0)[:, :, None].expand_as(logits)
            return super().verify(tree, torch.gather(logits, 1, index), ctx)

    return OffByOneWalk()


def sampled_host(target: ToyTarget) -> PluginHost:
    host = make_host(target, 0.8)
    import specframe_verifiers.plugin as verifiers_plugin

    host.register(verifiers_plugin, "verifiers")
    control = types.ModuleType("off_by_one_control")

    @hookimpl
    def specframe_verifiers():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="verifier", name="off_by_one_walk", config=OffByOneConfig, summary="control",
                            factory=lambda cfg, ctx: off_by_one_walk(),
                            capabilities=VerifierCapabilities(
                                lossless=True, supported_regimes=frozenset({"deterministic", "sampled"})))

    control.specframe_verifiers = specframe_verifiers  # type: ignore[attr-defined]
    host.register(control, "off_by_one_control")
    import specframe_trees.plugin as trees_plugin

    host.register(trees_plugin, "trees")
    return host


def mixed_requests(n: int, new_tokens: int) -> list[Request]:
    """Request ``i`` of ``PROMPT`` has seed ``i``; batch-mates with other prompts and limits in between."""
    out = []
    for i in range(n):
        out.append(Request(PROMPT, new_tokens, seed=i))
        other = OTHERS[i % len(OTHERS)]
        out.append(Request(other, 1 + (i * 7) % 4, seed=10_000 + i))
    return out


def test_greedy_rows_equal_plain_decoding_with_rows_joining() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(BASE, target=target, host=make_host(target, 0.8))
    prompts = [[1], [2, 5, 3], [6, 6, 0, 1], [3, 3], [4], [0, 1, 2, 3, 4, 5]]
    limits = [20, 3, 11, 1, 30, 7]
    results = pipe.generate_batch([Request(p, n) for p, n in zip(prompts, limits, strict=True)], batch_size=3)
    for prompt, n, result in zip(prompts, limits, results, strict=True):
        assert result.tokens == plain_greedy(target, prompt, n)
        assert result.batch_size == 3 and len(result.tokens) == n
    assert pipe.generate([[1], [4]], 5)[1].tokens == plain_greedy(target, [4], 5)  # a list goes to the batch loop


def test_a_requests_sampled_output_does_not_depend_on_its_batch_mates() -> None:
    target = ToyTarget.random(vocab_size=7, seed=3)
    pipe = Pipeline.from_dict(SAMPLED, target=target, host=sampled_host(target))
    alone = [pipe.generate(PROMPT, 12, seed=s).tokens for s in range(4)]
    mixed = pipe.generate_batch(mixed_requests(4, 12), batch_size=3)
    other_mates = pipe.generate_batch(list(reversed(mixed_requests(4, 12))), batch_size=5)
    assert [r.tokens for r in mixed[0::2]] == alone
    assert [r.tokens for r in other_mates[1::2]] == list(reversed(alone))
    assert len({tuple(t) for t in alone}) > 1  # the seeds matter: the test would see a shared stream


def row_pair_law(target: ToyTarget, params: SamplingParams) -> torch.Tensor:  # [V, V]
    """Exact law of the 2nd and 3rd new tokens after ``PROMPT`` (the 1st is the prefill sample)."""
    first = probs(target.logits_after(PROMPT), params).double()  # [V]
    return sum(first[t] * exact_first_two_law(target, PROMPT[-1], t, params) for t in range(target.vocab_size))


#: (tree builder, verifier, lossless): deterministic trees with the walk, sampled chains and trees with rejection
#: sampling (draft, accept and residual streams all drawn per row), and two negative controls: an argmax walk and
#: a walk that reads each node's decision from its parent's logits.
REGIMES = [
    ({"type": "spine"}, "walk", True),
    ({"type": "sampled_chain"}, "chain_rejection", True),
    ({"type": "sampled_tree", "branching": [2, 2, 1]}, "tree_rejection", True),
    ({"type": "dartree", "mode": "pruned", "width": 2}, "lossy", False),
    ({"type": "spine"}, "off_by_one_walk", False),
]


@pytest.mark.parametrize(("builder", "verifier", "lossless"), REGIMES, ids=lambda x: str(x).replace(" ", ""))
def test_each_rows_law_in_a_mixed_batch_is_the_targets(builder: dict, verifier: str, lossless: bool) -> None:
    target = ToyTarget.random(vocab_size=7, seed=4, scale=1.0)
    pruner = {"type": "keep_all"} if builder["type"] in ("spine", "dartree") else {"type": "none"}
    data = {**SAMPLED, "tree_builder": builder, "pruner": pruner, "verifier": {"type": verifier},
            "allow_lossy": not lossless}
    pipe = Pipeline.from_dict(data, target=target, host=sampled_host(target))
    results = pipe.generate_batch(mixed_requests(1500, 3), batch_size=8)
    rows = torch.tensor([r.tokens for r in results[0::2]])  # [1500, 3]
    counts = joint_counts(rows[:, 1], rows[:, 2], target.vocab_size)
    p = g_test(counts, row_pair_law(target, SamplingParams(temperature=1.0))).p_value
    assert (p >= 1e-6) if lossless else (p < 1e-6), p

