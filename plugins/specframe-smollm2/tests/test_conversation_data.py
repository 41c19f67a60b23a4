"""Data generation answers a conversation turn by turn: the second turn's prompt holds the target's own first
answer, and every turn's sequence carries the conversation's prompt index (one side of the held-out split)."""

from __future__ import annotations

import torch
from specframe_hf.testing import tiny_tokenizer
from specframe_smollm2.testing import TINY_VOCAB, tiny_llama
from specframe_smollm2.training.generate_data import SHARD_KEYS, generate_batch

WORDS = [f"w{i}" for i in range(TINY_VOCAB - 6)]  # with the 6 specials: one token per model id


def test_second_turn_prompt_holds_the_first_answer() -> None:
    model, tok = tiny_llama(), tiny_tokenizer(WORDS)
    assert len(tok) == TINY_VOCAB
    prompts = ["w1 w2", ("w3 w4", "w5 w6 w7")]
    shard = generate_batch(model, tok, prompts, [10, 11], max_new_tokens=6, taps=(0, 1), topk=4)
    assert set(shard) == set(SHARD_KEYS)
    assert shard["index"] == [10, 11, 11]  # turn 0 of both, then turn 1 of the conversation
    ids = [s.tolist() for s in shard["ids"]]
    p0, p1 = shard["prompt_len"][1], shard["prompt_len"][2]
    first_prompt, first_answer = ids[1][:p0], ids[1][p0:]
    user, assistant = tok.convert_tokens_to_ids(["<user>", "<assistant>"])
    assert first_prompt == [user, *tok.convert_tokens_to_ids(["w3", "w4"]), assistant]
    kept = [t for t in first_answer if t not in tok.all_special_ids]  # decoding drops <pad> <s> </s> <unk>
    expected = first_prompt + kept + [user, *tok.convert_tokens_to_ids(["w5", "w6", "w7"]), assistant]
    assert ids[2][:p1] == expected
    for i, seq in enumerate(ids):  # every sequence's fields agree in length
        p = shard["prompt_len"][i]
        assert shard["taps"][i].shape[0] == len(seq) - 1
        assert shard["topk_ids"][i].shape[0] == len(seq) - p
        assert torch.equal(shard["topk_ids"][i][:, 0].long(), torch.tensor(seq[p:]))  # greedy = top-1
