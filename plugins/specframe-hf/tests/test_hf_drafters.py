"""The ngram (prompt lookup) and none drafters on hand-made sequences, and their registration."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from specframe_hf.config import NgramConfig
from specframe_hf.ngram_drafter import NgramDrafter, lookup_continuation

from specframe.builtin.no_drafter import NoDrafter
from specframe.interfaces import DecodeState
from specframe.plugins import PluginHost
from specframe.types import SamplingParams


def state_of(*rows: list[int]) -> DecodeState:
    return DecodeState(tokens=torch.tensor(list(rows)), prompt_len=1, sampling=SamplingParams(),
                       seed=0)


def lookup(tokens: list[int], *, lo: int = 1, hi: int = 3, limit: int = 8) -> list[int]:
    return lookup_continuation(np.array(tokens, dtype=np.int64), min_ngram=lo, max_ngram=hi, limit=limit).tolist()


def test_docstring_worked_example():
    assert lookup([4, 8, 15, 16, 4, 8, 23, 4, 8], limit=3) == [23, 4, 8]


def test_longest_suffix_wins_over_a_more_recent_shorter_match():
    # suffix [1, 2, 3] occurred at 0 (followed by 9); the 1-gram [3] occurred more recently (followed by 7)
    assert lookup([1, 2, 3, 9, 5, 3, 7, 1, 2, 3], limit=2) == [9, 5]


def test_most_recent_occurrence_is_continued():
    assert lookup([5, 6, 1, 5, 6, 2, 5, 6], hi=2, limit=1) == [2]


def test_continuation_may_run_into_the_suffix_and_is_cut_at_the_context_end():
    # a periodic context: the most recent earlier [a, b] is two tokens back, so only [a, b] follows it
    assert lookup([7, 8, 7, 8, 7, 8], hi=2, limit=5) == [7, 8]


def test_min_ngram_and_no_match():
    assert lookup([1, 2, 3, 4, 5]) == []
    assert lookup([3, 1, 2, 3], lo=2, hi=3) == []  # only the 1-gram [3] matches, below min_ngram
    assert lookup([3, 1, 2, 3], lo=1, hi=3) == [1, 2, 3]
    assert lookup([9]) == []  # a lone root has no earlier context


def test_proposal_shape_and_match_length_scores():
    """The docstring's example matched a 2-token suffix of at most 3: every token scores log(2/3); a 3-token match
    scores 0."""
    drafter = NgramDrafter(NgramConfig(num_speculative_tokens=3))
    proposal = drafter.propose(state_of([4, 8, 15, 16, 4, 8, 23, 4, 8]))
    assert proposal.tokens.tolist() == [[[23], [4], [8]]]
    assert torch.allclose(proposal.logprobs, torch.full((1, 3, 1), math.log(2 / 3)))
    assert proposal.root.tolist() == [8] and proposal.logits is None
    longest = drafter.propose(state_of([1, 2, 3, 9, 5, 1, 2, 3]))
    assert longest.tokens[0, :, 0].tolist() == [9, 5, 1] and longest.logprobs.eq(0).all()


def test_no_match_gives_an_empty_proposal():
    proposal = NgramDrafter(NgramConfig()).propose(state_of([1, 2, 3, 4]))
    assert proposal.depth == 0 and proposal.root.tolist() == [4]


def test_batch_rows_with_shorter_matches_are_padded_with_minus_inf():
    proposal = NgramDrafter(NgramConfig(num_speculative_tokens=4)).propose(
        state_of([1, 2, 3, 4, 5, 1], [6, 7, 8, 5, 9, 9]))  # row 1: [9] matched right before the end
    assert proposal.tokens.shape == (2, 4, 1)
    assert proposal.tokens[0, :, 0].tolist() == [2, 3, 4, 5]
    assert proposal.tokens[1, 0, 0] == 9 and proposal.logprobs[1, 0, 0] == pytest.approx(math.log(1 / 3))
    assert proposal.logprobs[1, 1:, 0].tolist() == [float("-inf")] * 3


def test_none_drafter_always_proposes_nothing():
    proposal = NoDrafter().propose(state_of([5, 5, 5, 5]))
    assert proposal.depth == 0 and proposal.root.tolist() == [5]


def test_config_validation():
    with pytest.raises(ValidationError, match="min_ngram"):
        NgramConfig(min_ngram=4, max_ngram=2)
    with pytest.raises(ValidationError):
        NgramConfig(num_speculative_tokens=0)


def test_entry_point_registers_target_and_drafters():
    host = PluginHost(autoload=True, allowlist=["hf"], disabled=(), trace=False)
    registry = host.registry
    assert registry.names("target") == ["hf"]
    assert registry.names("drafter") == ["ngram", "none"]
    record = registry.get("drafter", "ngram")
    assert record.distribution == "specframe-hf"
    drafter = record.spec.factory(NgramConfig(), None)
    assert isinstance(drafter, NgramDrafter)


def test_loading_the_plugin_does_not_import_transformers():
    code = ("import sys, specframe_hf.plugin, specframe_hf; "
            "assert 'transformers' not in sys.modules, 'transformers imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
