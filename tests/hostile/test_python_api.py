"""Hostile values through the Python API (issue 28, class 4; issue 27, stop strings without a tokenizer).

Each value enters through one check (`specframe.decode.request`): a prompt is text, token ids or an integer tensor
of one row; anything else is a `GenerationError` naming what was given, and in a list of prompts it refuses that
element alone while the others decode. A ``str`` for ``stop`` is one stop string.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from specframe.decode.request import RefusedRequest, Request
from specframe.errors import ConfigError, GenerationError
from specframe.metrics.records import GenerationResult
from specframe.pipeline import Pipeline
from specframe.testing.toy import ToyTarget
from tests.bench.toy_plugin import toy_host

from .probe import toy_pipe


@pytest.fixture(scope="module")
def pipe(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return toy_pipe(tmp_path_factory.mktemp("toy"))


@pytest.mark.parametrize("bad, says", [
    (5, "the prompt is int 5"),
    (None, "the prompt is None"),
    (b"hi", "the prompt is bytes"),
    (1.5, "the prompt is float"),
    ({"prompt": "hi"}, "the prompt is dict"),
    (torch.tensor([1.5, 2.7]), "must hold integer token ids, got dtype float32"),
    (torch.tensor([True, False]), "got dtype bool"),
    (torch.tensor([[1, 2], [3, 4]]), "got shape [2, 2]"),
    (torch.tensor(3), "got shape []"),
    ([1, 2.5], "element 1 of the prompt is 2.5"),
    ([1, True], "element 1 of the prompt is True"),
    (("a", "b"), "element 0 of the prompt is 'a'"),
    ([1, -4], "token id -4 at element 1"),
    ([1, 10**30], "at element 1"),
], ids=["int", "None", "bytes", "float", "dict", "float-tensor", "bool-tensor", "two-rows", "0-d", "float-id",
        "bool-id", "tuple-of-texts", "negative-id", "huge-id"])
def test_what_is_not_a_prompt_is_refused_naming_it(pipe: Any, bad: Any, says: str) -> None:
    with pytest.raises(GenerationError) as info:
        pipe.generate(bad, 4)
    assert says in info.value.message and info.value.hint


def test_a_malformed_element_of_a_list_is_refused_alone(pipe: Any) -> None:
    """``generate(["hi", 5])`` decodes "hi" and refuses element 1 (it raised a bare TypeError and lost "hi")."""
    alone = pipe.generate("hi", 6)
    for bad in (5, None, b"hi", torch.tensor([[1, 2], [3, 4]]), Request("ho", max_new_tokens=True),
                Request("ho", seed=-1), Request("ho", stop=[""])):
        out = pipe.generate(["hi", bad], 6)
        assert isinstance(out[0], GenerationResult) and out[0].tokens == alone.tokens, bad
        assert isinstance(out[1], RefusedRequest) and out[1].index == 1 and str(out[1]).startswith("request 1: "), bad


def test_valid_prompt_forms_decode_the_same_tokens(pipe: Any) -> None:
    ids = pipe.encode("hi").view(-1).tolist()
    expected = pipe.generate(ids, 6).tokens
    for form in (torch.tensor(ids), torch.tensor([ids]), torch.tensor(ids, dtype=torch.int32), tuple(ids),
                 np.array(ids), [np.int64(i) for i in ids]):
        assert pipe.generate(form, 6).tokens == expected
    assert [r.tokens for r in pipe.generate_batch(torch.tensor([ids, ids]), 6)] == [expected, expected]


@pytest.mark.parametrize("bad, says", [("abc", "got a str"), (b"abc", "got a bytes"), (torch.tensor([1, 2]),
                                                                                        "shape [2]"),
                                       (7, "got a int")])
def test_generate_batch_refuses_what_is_not_a_list_of_prompts(pipe: Any, bad: Any, says: str) -> None:
    with pytest.raises(GenerationError, match="generate_batch takes") as info:
        pipe.generate_batch(bad, 4)
    assert says in info.value.message


def test_a_str_stop_is_one_stop_string(pipe: Any) -> None:
    """``stop="pd"`` stops where "pd" starts (it had become the stop strings "p" and "d": an empty output)."""
    full = pipe.generate("hi", 8).text
    assert full is not None and "pd" in full
    cut = pipe.generate("hi", 8, stop="pd")
    assert cut.text == full[:full.index("pd")] and cut.text and cut.stop_reason == "stop_string"
    assert pipe.generate(["hi"], 8, stop="pd")[0].text == cut.text
    assert pipe.generate_batch([Request("hi", stop="pd")], 8)[0].text == cut.text
    with pytest.raises(GenerationError, match="stop must be a string or a list of strings"):
        pipe.generate("hi", 8, stop=b"pd")


def test_stop_strings_without_a_tokenizer_are_refused() -> None:
    """Stop strings match text; a target without a tokenizer has none, so they were silently ignored."""
    target = ToyTarget.random(vocab_size=16, seed=3)
    config = {"drafter": {"type": "toy", "depth": 4}, "budget": 8, "sampling": {"temperature": 0}}
    pipe = Pipeline.from_dict(config, target=target, host=toy_host())
    assert pipe.generate([1, 2, 3], 6).tokens
    with pytest.raises(GenerationError, match="has no tokenizer"):
        pipe.generate([1, 2, 3], 6, stop=["x"])
    out = pipe.generate_batch([[1, 2, 3], Request([4, 5], stop="x")], 6)
    assert isinstance(out[0], GenerationResult) and isinstance(out[1], RefusedRequest)
    with pytest.raises(ConfigError, match=r"generation\.stop") as info:
        Pipeline.from_dict({**config, "generation": {"stop": ["x"]}}, target=ToyTarget.random(vocab_size=16, seed=3),
                           host=toy_host())
    assert "no tokenizer" in info.value.message


def test_a_prompt_file_path_is_text_not_a_file(pipe: Any, tmp_path: Path) -> None:
    """A `Path` is neither text nor token ids (it is not read: the API takes prompts, the CLI takes files)."""
    with pytest.raises(GenerationError, match=r"the prompt is [A-Za-z]*Path"):
        pipe.generate(tmp_path / "prompt.txt", 4)


def test_stop_strings_from_a_generator_serve_every_request(pipe: Any) -> None:
    """A generator for ``stop=`` was consumed by the first request; the others decoded without stop strings."""
    full = pipe.generate("hi", 8).text
    assert full is not None and "pd" in full
    out = pipe.generate_batch(["hi", "hi", "hi"], 8, stop=(s for s in ["pd"]))
    assert [r.text for r in out] == [full[:full.index("pd")]] * 3
    assert all(r.stop_reason == "stop_string" for r in out)


@pytest.mark.parametrize("bad", [2.7, True, "2", float("nan"), "x"])
def test_a_batch_size_that_is_not_a_whole_number_is_refused(pipe: Any, bad: Any) -> None:
    """``batch_size`` 2.7, True and "2" became 2, 1 and 2 without a word; NaN and "x" raised a bare ValueError."""
    with pytest.raises(GenerationError, match="batch_size must be a whole number") as info:
        pipe.generate_batch(["hi", "ho"], 4, batch_size=bad)
    assert info.value.hint
    with pytest.raises(GenerationError, match="batch_size must be a whole number"):
        pipe.generate(["hi", "ho"], 4, batch_size=bad)
    assert len(pipe.generate_batch(["hi", "ho"], 4, batch_size=np.int64(2))) == 2


def test_a_drafter_whose_drafts_are_never_accepted_raises_the_alarm_once(tmp_path: Path) -> None:
    """A drafter that runs but is always rejected (NaN weights, a head on the wrong drafter, taps in another order)
    gave exact outputs at τ 1.00 without a word. The pipeline now warns once when WINDOW drafted rounds in a row
    accept nothing; a healthy drafter never triggers it."""
    from specframe.decode.acceptance_alarm import WINDOW, DraftAcceptanceWarning
    from specframe.testing.toy import ToyDrafter

    healthy = toy_pipe(tmp_path)
    prompts = ["what is two and two", "hi", "name three colours", "ho"]
    rounds = -(-WINDOW // len(prompts)) + 8  # enough drafted rows for the window and some
    with warnings.catch_warnings():
        warnings.simplefilter("error", DraftAcceptanceWarning)
        good = healthy.generate_batch(prompts, rounds)
    broken = toy_pipe(tmp_path)
    wrong = ToyDrafter(broken.target, depth=4, num_candidates=1, distance=0.0)
    wrong.table = -broken.target.table  # its argmax is the target's argmin: every draft is rejected
    broken.stages.drafter = wrong
    with pytest.warns(DraftAcceptanceWarning, match=r"accepted none of the last \d+ drafts") as seen:
        out = broken.generate_batch(prompts, rounds)
    assert [r.tokens for r in out] == [r.tokens for r in good]  # still exact: only the speed is lost
    assert len([w for w in seen if w.category is DraftAcceptanceWarning]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", DraftAcceptanceWarning)
        broken.generate_batch(prompts, rounds)  # once per pipeline
