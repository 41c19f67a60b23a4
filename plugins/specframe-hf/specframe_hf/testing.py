"""Test helpers: tiny random causal LMs and tokenizers built offline, plus plain-forward references.

Weights are drawn from a private ``torch.Generator`` (the global torch RNG is left as it was), so the same
``seed`` always gives the same model. ``init_std`` larger than the usual 0.02 spreads the logits, which keeps
greedy decoding away from near-ties where two numerically equivalent forwards could disagree.

Example::

    model = tiny_causal_lm("qwen3", attn="eager", seed=1)     # Qwen3ForCausalLM, vocab 512, hidden 64, 2 layers
"""

from __future__ import annotations

from typing import Any, Literal

import torch

Family = Literal["llama", "mistral", "qwen2", "qwen3"]


def tiny_config(family: Family, *, vocab_size: int = 512, hidden_size: int = 64, num_layers: int = 2,
                max_position_embeddings: int = 512, **overrides: Any) -> Any:
    """A small config of ``family`` (4 heads, 2 KV heads, head_dim 16, no sliding window unless overridden)."""
    from transformers import LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config

    classes = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config}
    fields: dict[str, Any] = dict(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
        head_dim=hidden_size // 4, max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )
    if family == "mistral":
        fields["sliding_window"] = None
    fields.update(overrides)
    return classes[family](**fields)


def tiny_causal_lm(family: Family, *, attn: str = "sdpa", seed: int = 0, init_std: float = 0.25,
                   dtype: torch.dtype = torch.float32, **config_overrides: Any) -> Any:
    """A random ``*ForCausalLM`` of ``family`` in eval mode; see :func:`tiny_config` for the sizes."""
    from transformers import AutoModelForCausalLM

    config = tiny_config(family, **config_overrides)
    with torch.random.fork_rng(devices=[]):  # the default init draws from the global RNG; restore it
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attn)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2:  # embeddings and projections; norms keep their weights of one
                param.copy_(torch.randn(param.shape, generator=gen) * init_std)
    return model.to(dtype).eval()


#: The two tokens a :func:`two_way_lm` emits greedily.
TWO_WAY_TOKENS = (300, 301)


@torch.no_grad()
def two_way_lm(model: Any, *, offset: float = 40.0, gain: float = 0.5, lean: float = 40.0) -> Any:
    """Turn a tiny random LM (vocabulary above 301) into one whose greedy tokens alternate between 300 and 301.

    Every embedding gets ``offset`` in feature 1 (which keeps the final hidden's feature 1 positive) and
    ``+-lean`` in feature 0 (300: ``-lean``, 301: ``+lean``, others a fixed random sign). The LM head maps
    feature 0 to ``+-gain`` for 300 / 301 and feature 1 to ``-10 * gain`` for every other token, so any hidden
    state ranks 300 and 301 first, in the order set by the sign of feature 0, which the last token mostly
    decides. Drafters sharing or copying these tables then hit often but not always, so verification accepts
    varying numbers of tokens through varying tree nodes (tests and the loop-overhead benchmark); greedy equality
    with plain decoding still has to hold exactly. Modifies ``model`` in place and returns it.
    """
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    signs = torch.randint(0, 2, (embed.shape[0],), generator=torch.Generator().manual_seed(0)) * 2 - 1
    embed[:, 0] = lean * signs
    a, b = TWO_WAY_TOKENS
    embed[a, 0], embed[b, 0] = -lean, lean
    embed[:, 1] = offset
    head.zero_()
    head[:, 1] = -10.0 * gain
    head[a, 0], head[b, 0] = gain, -gain
    head[a, 1] = head[b, 1] = 0.0
    return model


CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def tiny_tokenizer(words: list[str], *, chat_template: bool = True) -> Any:
    """A whitespace word-level tokenizer over ``<pad> <s> </s> <unk> <user> <assistant>`` + ``words``.

    Ids: ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2 (eos), ``<unk>`` 3, ``<user>`` 4, ``<assistant>`` 5, then ``words``.
    With ``chat_template`` it renders ``[{"role": "user", "content": "hi"}]`` as ``<user> hi <assistant>``.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>", "<user>", "<assistant>"]
    vocab = {w: i for i, w in enumerate(specials + [w for w in words if w not in specials])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>", unk_token="<unk>")
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def causal_logits(model: Any, ids: list[int] | torch.Tensor) -> torch.Tensor:  # [T, V]
    """Reference: next-token logits after every position of one sequence, from a plain causal forward."""
    seq = torch.as_tensor(ids, dtype=torch.long).view(1, -1)
    with torch.no_grad():
        return model(input_ids=seq).logits[0].float()


def causal_hidden(model: Any, ids: list[int] | torch.Tensor, layers: tuple[int, ...]) -> torch.Tensor:  # [T, n*H]
    """Reference: decoder-layer outputs from ``output_hidden_states`` (index 0 is the embeddings)."""
    seq = torch.as_tensor(ids, dtype=torch.long).view(1, -1)
    with torch.no_grad():
        states = model(input_ids=seq, output_hidden_states=True).hidden_states
    return torch.cat([states[i + 1][0] for i in layers], dim=-1)


def committed_kv(rows: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, the committed keys and values ``[B, H_kv, L, D]`` of a target's rows whose lengths are all ``L``,
    whichever engine holds them (`SlotRows`' block pool or `HFRows`' DynamicCache)."""
    from specframe_hf.slot_rows import SlotRows

    length = rows.lengths[0]
    if any(n != length for n in rows.lengths):
        raise ValueError(f"rows of different lengths {rows.lengths}")
    if isinstance(rows, SlotRows):
        entries = torch.stack([rows.cache.read(r, length) for r in range(rows.batch_size)], dim=2)
        return [(entries[i, 0], entries[i, 1]) for i in range(entries.shape[0])]  # [B, H_kv, L, D] each
    return [(layer.keys[:, :, :length], layer.values[:, :, :length]) for layer in rows.cache.layers]


def random_ids(n: int, *, seed: int, vocab: int = 512) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n,), generator=gen).tolist()


def random_tree_parents(n: int, *, seed: int) -> list[int]:
    """Parents of a random topologically ordered tree of n nodes (node 0 is the root)."""
    gen = torch.Generator().manual_seed(seed)
    return [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]


def random_rounds(target: Any, prompt: list[int], *, rounds: int = 5, nodes: int = 8, seed: int = 0
                  ) -> list[torch.Tensor]:
    """Prefill ``prompt``, then score random trees and commit random paths (mostly off the block's prefix, so
    KV compaction moves entries); return the logits of the prefill and of every tree."""
    from specframe.tree import DraftTree

    gen = torch.Generator().manual_seed(seed)
    out = [target.prefill(torch.tensor([prompt])).logits]
    for r in range(rounds):
        tree = DraftTree.from_lists(random_ids(nodes, seed=seed * 100 + r, vocab=target.vocab_size),
                                    random_tree_parents(nodes, seed=seed * 100 + r))
        out.append(target.forward_tree(tree).logits)
        path = tree.path_to(0, int(torch.randint(1, nodes, (1,), generator=gen)))
        accepted = torch.full((1, nodes), -1, dtype=torch.long)
        accepted[0, : len(path)] = torch.tensor(path)
        target.commit(tree, accepted)
    return out
