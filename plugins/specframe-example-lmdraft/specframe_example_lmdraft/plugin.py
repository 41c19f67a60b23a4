"""Entry point ``lmdraft`` of the ``specframe`` group: registers the ``lm_draft`` drafter.

specframe imports this module when it loads plugins and calls ``specframe_drafters``; the factory runs when a
pipeline with ``drafter: {type: lm_draft, ...}`` is built, after the target, so it can check the draft model
against the target's vocabulary and tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterator

import specframe
from specframe.interfaces import BuildContext
from specframe.registry import ComponentSpec, DrafterCapabilities
from specframe_example_lmdraft.config import LMDraftConfig
from specframe_example_lmdraft.drafter import LMDrafter
from specframe_example_lmdraft.loading import check_fits_target, load_draft_model, model_directory, resolve_placement


def build_lm_draft(config: LMDraftConfig, ctx: BuildContext) -> LMDrafter:
    """Load the draft model next to the target and wrap it."""
    directory = model_directory(config.model)
    dtype, device = resolve_placement(config, ctx.target)
    model = load_draft_model(directory, dtype, device)
    vocab = check_fits_target(model, directory, ctx.target, config.check_tokenizer)
    return LMDrafter(model, vocab_size=vocab, depth=config.num_speculative_tokens,
                     num_candidates=config.num_candidates)


@specframe.hookimpl
def specframe_drafters() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="drafter", name="lm_draft", config=LMDraftConfig, factory=build_lm_draft,
        capabilities=DrafterCapabilities(emits_logits=True),
        summary="small causal LM sharing the target's tokenizer: top-K candidates along its greedy rollout",
    )
