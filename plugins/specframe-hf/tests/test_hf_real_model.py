"""The hf adapter on the converted SmolLM2-135M-Instruct (a real Llama; skipped when the cache is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from specframe_hf.target import HFTarget

from specframe.pipeline import Pipeline
from specframe.plugins import PluginHost
from specframe.tree import DraftTree

MODEL_DIR = Path(os.environ.get("SPECFRAME_CACHE", "~/.cache/specframe")).expanduser() / "smollm2-135m-instruct"

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(not (MODEL_DIR / "config.json").is_file(),
                       reason=f"no converted SmolLM2 at {MODEL_DIR} (run `specframe setup-target`)"),
]


@pytest.fixture(scope="module")
def smollm2() -> HFTarget:
    return HFTarget.from_pretrained(str(MODEL_DIR), dtype="float32", device="cpu", attn="sdpa")


def test_loads_with_tokenizer_chat_template_and_metadata(smollm2):
    assert smollm2.model_type == "llama" and smollm2.vocab_size == 49152
    assert smollm2.max_length == 8192 and smollm2.eos_token_ids == (2,)
    ids = smollm2.encode("Hi")
    assert smollm2.decode(ids[0], skip_special_tokens=False).startswith("<|im_start|>")


def test_tree_nodes_match_causal_paths(smollm2):
    model = smollm2.model
    prompt = smollm2.encode("Name three colours.", chat=False)[0].tolist()
    smollm2.prefill(torch.tensor([prompt]))
    tokens = smollm2.encode("red green blue and yellow", chat=False)[0].tolist()[:5]
    tree = DraftTree.from_lists(tokens, [-1, 0, 0, 1, 1])
    logits = smollm2.forward_tree(tree).logits
    for node in range(5):
        path = [tokens[j] for j in tree.path_to(0, node)]
        with torch.no_grad():
            ref = model(input_ids=torch.tensor([prompt + path])).logits[0, -1]
        assert (logits[0, node] - ref).abs().max() < 1e-3, f"node {node}"


def test_ngram_pipeline_equals_generate(smollm2):
    host = PluginHost(autoload=True, allowlist=["hf", "trees", "verifiers"], disabled=(), trace=False)
    pipe = Pipeline.from_dict({"drafter": {"type": "ngram"}, "tree_builder": {"type": "chain"},
                               "pruner": {"type": "none"}, "sampling": {"temperature": 0.0}, "budget": 8},
                              target=smollm2, host=host)
    ids = smollm2.encode("Repeat exactly: one two three, one two three, one two three.")
    expected = smollm2.model.generate(ids, max_new_tokens=20, do_sample=False)[0, ids.shape[1]:].tolist()
    result = pipe.generate(ids, max_new_tokens=20)
    assert result.tokens == expected
    assert result.tau > 1.0  # prompt lookup finds the repetition
