"""Model cards list every training stage with its steps, held-out τ, data and CPU time."""

from __future__ import annotations

import json

import yaml
from specframe_smollm2.testing import tiny_recipe
from specframe_smollm2.training.model_card import write_model_card
from specframe_smollm2.training.trainer import train


def test_two_stage_card(tmp_path, tiny_target, tiny_data) -> None:
    quiet = {"target_dir": tmp_path, "target_model": tiny_target, "progress": False, "log": lambda m: None}
    first = tiny_recipe("drafter", tmp_path / "s1", tiny_data, steps=2)
    second = tiny_recipe("drafter", tmp_path / "s2", tiny_data, steps=3, init_from=first.output,
                         output=first.output)
    paths = []
    for i, recipe in enumerate((first, second)):
        train(recipe, **quiet)
        path = tmp_path / f"stage{i + 1}.yaml"
        path.write_text(yaml.safe_dump(json.loads(recipe.model_dump_json())))
        paths.append((path, recipe.work_dir))
    card = write_model_card(tmp_path / "s1" / "out-drafter", [(p, type(p)(w)) for p, w in paths]).read_text()
    assert "### Stage 1" in card and "### Stage 2" in card
    assert f"warm-started from `{first.output}`" in card
    assert "2 steps" in card and "3 steps" in card
    assert "shards written outside `specframe train`" in card
    assert "training: " in card and "CPU-hours" in card

    # A checkpoint built on the machine, not shipped, says so and carries the auto-budget block for docs_gen.
    built = write_model_card(tmp_path / "s1" / "out-drafter", [(p, type(p)(w)) for p, w in paths],
                             built_here=True).read_text()
    assert "**`model.safetensors` is not in git**" in built and "not in git" not in card
    assert "<!-- generated: auto-budget-table -->\n<!-- /generated: auto-budget-table -->" in built
    write_model_card(tmp_path / "s1" / "out-drafter", [(p, type(p)(w)) for p, w in paths])

    # A later session without the first stage's run directory keeps the card's record of that stage.
    (type(paths[0][0])(first.work_dir) / "summary.json").unlink()
    again = write_model_card(tmp_path / "s1" / "out-drafter", [(p, type(p)(w)) for p, w in paths]).read_text()
    assert again == card


def test_the_shipped_cards_measured_sections_are_rendered_from_eval_json() -> None:
    """Every speed figure on a shipped card is reproducible from `checkpoints/smollm2-135m/eval.json` (rerender with
    `python -m specframe_smollm2.training.model_card --measured-only`), quoted as two gains apart."""
    import json
    from pathlib import Path

    from specframe_smollm2.training.model_card import SHIPPED_KINDS, with_measured_section

    root = Path(__file__).resolve().parents[3]
    report = json.loads((root / "checkpoints" / "smollm2-135m" / "eval.json").read_text())
    for directory, kind in SHIPPED_KINDS.items():
        card = (root / directory / "README.md").read_text()
        assert with_measured_section(card, report, kind) == card, f"{directory}: rerender the measured section"
        assert "specframe's plain loop vs transformers' generate()" in card
        assert "speculation vs specframe's plain loop" in card and "vs generate() |" not in card


def test_the_measured_section_never_multiplies_the_two_gains() -> None:
    from specframe_smollm2.training.model_card import with_measured_section

    row = {"tau": 2.0, "tokens_per_s": 10.0, "exact": True, "per_prompt_tau": [2.0, 2.0]}
    report = {"n": 2, "max_new_tokens": 8, "datasets": {"gsm8k": [
        {**row, "method": "plain decoding", "tau": 1.0, "speedup": 1.0, "speedup_vs_generate": 1.5,
         "vs_generate_interval": {"value": 1.5, "low": 1.4, "high": 1.6, "n": 2}},
        {**row, "method": "DDTree", "speedup": 1.2, "speedup_vs_generate": 1.8,
         "speedup_interval": {"value": 1.2, "low": 1.1, "high": 1.3, "n": 2}}]}}
    card = with_measured_section("# card\n\n## Notes\n\n* n\n", report, "drafter")
    assert "| gsm8k | 1.50× [1.40, 1.60], 2 prompts |" in card
    assert "| gsm8k | DDTree | 2.00 | 10.00 | 1.20× [1.10, 1.30], 2 prompts | yes |" in card
    assert "1.80" not in card and card.endswith("## Notes\n\n* n\n")


def test_a_card_measured_off_the_protocol_says_so() -> None:
    """The measured section carries the protocol's verdict on its file: figures from a run with no load record, few
    prompts and no split are labelled, not presented as published measurements."""
    from specframe_smollm2.training.model_card import with_measured_section

    plain = {"method": "plain decoding", "tau": 1.0, "tokens_per_s": 10.0, "exact": True, "speedup": 1.0,
             "speedup_vs_generate": 1.1, "per_prompt_tau": [1.0]}
    report = {"n": 1, "max_new_tokens": 8, "datasets": {"gsm8k": [plain]}}
    card = with_measured_section("# card\n\n## Notes\n\n* n\n", report, "drafter")
    assert "**Not under the quiet rule**" in card and "1 prompts per set (at least 20)" in card
