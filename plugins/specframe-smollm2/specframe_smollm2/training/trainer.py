"""``train(recipe)``: data, model set-up, the optimisation loop, resumable state and the published export.

Resumability: every ``checkpoint_every`` steps (and when stopping) the trainable weights, the optimizer, the
batch generator's state and the step are written to ``work_dir/state.pt`` (atomically, tensors and plain values
only, so it is read back with ``weights_only=True`` and never unpickles code), and the published-layout checkpoint
is refreshed in ``output``. A restarted run loads the state and continues with the next step; the batches it draws
are the ones the uninterrupted run would have drawn, so no step is lost or repeated. ``work_dir/metrics.jsonl``
holds one line per logged step (loss, lr) and per evaluation (held-out per-slot acceptance and chain τ); lines past
the restored step are dropped on resume (rewritten atomically), a crash-cut last line is dropped, and any other
damaged line is an error naming it. A run holds ``work_dir/.lock`` (``flock``), so a second run on the same
work_dir is refused instead of interleaving with the first.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from specframe_diffusion.checkpoint.head_base import BASE_KEY, base_record

from specframe.distributed import DistContext, from_env
from specframe.draft_vocab import load_draft_vocab
from specframe.errors import CheckpointError, ConfigError
from specframe.files import write_text
from specframe.locking import hold_lock
from specframe.tensor_files import load_tensor_file, save_tensor_file
from specframe_smollm2.training.candidate_objectives import CandidateObjective, new_candidate_head
from specframe_smollm2.training.data_parallel import loss_function
from specframe_smollm2.training.dataset import load_sequences, make_batch, split, tap_rms
from specframe_smollm2.training.export import drafter_config, head_config, write_export
from specframe_smollm2.training.objectives import EvalResult, Objective
from specframe_smollm2.training.recipe import Recipe

STATE = "state.pt"
METRICS = "metrics.jsonl"
LOCK = ".lock"


def _lr_at(step: int, recipe: Recipe) -> float:
    o = recipe.optim
    if step < o.warmup:
        return o.lr * (step + 1) / o.warmup
    frac = (step - o.warmup) / max(1, o.steps - o.warmup)
    return o.lr * (o.lr_min_ratio + (1 - o.lr_min_ratio) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def build_objective(recipe: Recipe, target: Any, train_seqs: list, gen: torch.Generator, *,
                     warm_start: bool = True) -> tuple[Objective | CandidateObjective, dict]:
    """Modules of the recipe kind, and the exported config dict (``warm_start``: apply ``init_from``)."""
    from specframe_diffusion.checkpoint import DraftModelConfig, open_checkpoint
    from specframe_diffusion.models.backbone import DFlashBackbone

    from specframe_smollm2.training.draft_train_model import init_from_target
    from specframe_smollm2.training.warm_start import warm_start_backbone, warm_start_head

    embed = target.get_input_embeddings().weight.detach().float()  # [V, H]
    tcfg = target.config
    if recipe.kind == "drafter":
        d = recipe.drafter
        config = drafter_config(tcfg, num_layers=d.num_layers, block_size=d.block_size,
                                mask_token_id=d.mask_token_id, taps=recipe.data.taps)
        backbone = DFlashBackbone(DraftModelConfig.from_dict(config))
        rms = tap_rms(train_seqs)
        scale = 1.0 / rms if d.normalize_taps else torch.ones_like(rms)
        init_from_target(backbone, target, d.init_layers, rms if d.normalize_taps else torch.ones_like(rms),
                         d.fc_init, len(recipe.data.taps), gen)
        if recipe.init_from and warm_start:
            warm_start_backbone(backbone, scale, open_checkpoint(recipe.init_from), config)
        return Objective(recipe, embed, backbone, scale, None), config
    files = open_checkpoint(recipe.base)
    base_cfg = files.config
    if list(base_cfg.target_layer_ids) != list(recipe.data.taps):
        raise CheckpointError(f"the base drafter {recipe.base} taps layers {list(base_cfg.target_layer_ids)} but the "
                              f"data holds taps of {list(recipe.data.taps)}",
                              hint="train the head on data generated with the drafter's taps")
    backbone = files.load_backbone(dtype=torch.float32)
    h = recipe.head
    if recipe.kind in ("path_selector", "lattice_head"):
        rows = None if h.draft_vocab is None else load_draft_vocab(h.draft_vocab).target_ids
        selector_vocab = rows if recipe.kind == "path_selector" else None
        config = head_config(base_cfg, recipe.kind, h, None if selector_vocab is None else selector_vocab.numel())
        config[BASE_KEY] = base_record(recipe.base)  # the loader checks the pipeline's drafter against it
        head = new_candidate_head(recipe, base_cfg, gen, selector_vocab)
        if recipe.init_from and warm_start:
            warm_start_head(head, open_checkpoint(recipe.init_from), recipe.kind)
        return CandidateObjective(recipe, embed, backbone, head, rows), config
    config = head_config(base_cfg, recipe.kind, h)
    if recipe.kind == "ar_head":
        from specframe_trees.heads.gru import DominoGRUHead, GRUHeadSizes

        head = DominoGRUHead(GRUHeadSizes(tcfg.hidden_size, h.gru_hidden_dim, h.emb_dim, tcfg.vocab_size),
                             generator=gen)
        with torch.no_grad():
            head.embed_proj[2].weight.zero_()  # start as the base drafter
    else:
        from specframe_trees.heads.markov import MarkovHead, MarkovHeadSizes

        head = MarkovHead(MarkovHeadSizes(tcfg.vocab_size, h.markov_rank, tcfg.hidden_size, h.markov_head_type),
                          generator=gen)
        with torch.no_grad():
            head.markov_w2.weight.zero_()
    if recipe.init_from and warm_start:
        warm_start_head(head, open_checkpoint(recipe.init_from), recipe.kind)
    ones = torch.ones(base_cfg.num_taps * base_cfg.hidden_size)
    return Objective(recipe, embed, backbone, ones, head), config


def _read_metrics(path: Path, upto: int) -> list[dict[str, Any]]:
    """The entries of ``metrics.jsonl`` up to step ``upto``; a crash-cut last line is dropped."""
    if not path.exists():
        return []
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc.strerror}", hint="check the work_dir's permissions") from None
    kept = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
                raise ValueError("not an object with an integer 'step'")
        except (ValueError, UnicodeDecodeError) as exc:
            if lineno == len(lines):  # no newline after it: a write cut by a crash
                continue
            raise CheckpointError(f"line {lineno} is not a metrics entry ({exc})", where=f"{path}:{lineno}",
                                  hint="fix or delete that line (the other lines are kept)") from None
        if entry["step"] <= upto:
            kept.append(entry)
    return kept


def _restore(state_path: Path, recipe: Recipe, module: torch.nn.Module, opt: torch.optim.Optimizer,
             batch_gen: torch.Generator, objective: Objective) -> tuple[int, float]:
    """Load ``state.pt`` into the modules; returns (step, CPU seconds so far). Every problem names the file."""
    hint = f"delete {state_path} to start the run over, or use another work_dir"
    state = load_tensor_file(state_path, what="training state", hint=hint)
    if not isinstance(state, dict):
        raise CheckpointError(f"training state {state_path} holds a {type(state).__name__}, not a dict", hint=hint)
    if state.get("recipe_kind") != recipe.kind:
        raise CheckpointError(f"{state_path} belongs to a {state.get('recipe_kind')} run, not {recipe.kind}",
                              hint="use another work_dir, or delete it to start over")
    try:
        module.load_state_dict(state["module"])
        opt.load_state_dict(state["optimizer"])
        batch_gen.set_state(state["batch_gen"])
        tap_scale = state["tap_scale"]
        if not isinstance(tap_scale, torch.Tensor) or tap_scale.shape != objective.tap_scale.shape:
            raise ValueError(f"tap_scale must be a tensor of shape {tuple(objective.tap_scale.shape)}")
        objective.tap_scale = tap_scale
        step, cpu = int(state["step"]), float(state.get("cpu_seconds", 0.0))
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise CheckpointError(f"training state {state_path} does not fit this recipe's model: "
                              f"{type(exc).__name__}: {reason}", hint=hint) from None
    if step < 0:
        raise CheckpointError(f"training state {state_path} says step {step}", hint=hint)
    return step, cpu


def train(recipe: Recipe, *, target_dir: Path, log: Callable[[str], None] = print, progress: bool = True,
          stop_after: int | None = None, target_model: Any = None, dist: DistContext | None = None) -> dict[str, Any]:
    """Run (or resume) ``recipe``; returns a summary with the final evaluation and CPU seconds.

    Under ``torchrun`` (or with ``dist``) every rank trains its slice of each global batch with
    DistributedDataParallel and rank 0 alone evaluates and writes (:mod:`~specframe_smollm2.training.data_parallel`).

    Args:
        recipe: the validated recipe.
        target_dir: the converted target (for weights, and for data generation).
        stop_after: stop after this many steps *in this call* (tests use it to simulate an interruption).
        target_model: an in-memory target instead of loading ``target_dir`` (tests).
    """
    dist = dist or from_env(backend="gloo")  # the trainer computes on the CPU
    if not dist.is_main:
        log, progress = (lambda message: None), False
    torch.set_num_threads(recipe.threads)
    work = Path(recipe.work_dir)
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create work_dir {work}: {exc.strerror}", where="work_dir",
                          hint="give a writable directory") from None
    # Rank 0 holds the lock for the whole launch (the other ranks write nothing in work_dir).
    lock = hold_lock(work / LOCK, message=f"another `specframe train` is using work_dir {work}",
                     hint="wait for it to finish, or give this run another work_dir") if dist.is_main else None
    try:
        return _train(recipe, work, target_dir=target_dir, log=log, progress=progress, stop_after=stop_after,
                      target_model=target_model, dist=dist)
    finally:
        if lock is not None:
            lock.close()


def _train(recipe: Recipe, work: Path, *, target_dir: Path, log: Callable[[str], None], progress: bool,
           stop_after: int | None, target_model: Any, dist: DistContext) -> dict[str, Any]:
    from tqdm import tqdm

    main = dist.is_main

    cpu0 = time.process_time()
    sections = (recipe.data, *recipe.data.include)
    train_seqs, helds = [], []
    for d in sections:  # each directory split on its own prompt indices
        part_train, part_held = split(load_sequences(Path(d.dir), d.max_shards), d.heldout_every)
        train_seqs += part_train
        helds.append(part_held)
    # Round-robin over the directories, so the first eval.seqs held-out sequences sample every one of them.
    held = [s for group in itertools.zip_longest(*helds) for s in group if s is not None]
    names = ", ".join(d.dir for d in sections)
    if not train_seqs or not held:
        raise CheckpointError(f"{names} give {len(train_seqs)} training and {len(held)} held-out sequences",
                              hint="generate more prompts (data.num_prompts) or lower data.heldout_every")
    log(f"data: {len(train_seqs)} training / {len(held)} held-out sequences from {names}")
    if target_model is None:
        from specframe_hf.loading import load_model, model_directory

        target_model = load_model(model_directory(str(target_dir)), dtype=torch.float32, device=torch.device("cpu"),
                                  role="target")
    init_gen = torch.Generator().manual_seed(recipe.seed)
    state_path = work / STATE
    # A resumed run restores its own weights, so init_from is read only by a run that starts afresh.
    objective, export_cfg = build_objective(recipe, target_model, train_seqs, init_gen,
                                             warm_start=not state_path.exists())
    module = objective.trainable
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=recipe.optim.lr, weight_decay=recipe.optim.weight_decay)
    batch_gen = torch.Generator().manual_seed(recipe.seed + 1)
    eval_gen = torch.Generator().manual_seed(recipe.eval.seed)
    bs = objective.block_size
    eval_batches = [make_batch(held[i:i + recipe.optim.batch_seqs], recipe.eval.anchors, bs, eval_gen)
                    for i in range(0, min(len(held), recipe.eval.seqs), recipe.optim.batch_seqs)]
    step, cpu_before = 0, 0.0
    if state_path.exists():
        step, cpu_before = _restore(state_path, recipe, module, opt, batch_gen, objective)
        log(f"resumed {recipe.name} from step {step} ({state_path})")
    loss_fn = loss_function(objective, recipe.optim.batch_seqs, dist)
    metrics_path = work / METRICS
    kept = _read_metrics(metrics_path, step)
    if main:
        text = "".join(json.dumps(entry) + "\n" for entry in kept)
        write_text(metrics_path, text, what="metrics file")
    # The step of the last recorded evaluation: the final evaluation is recorded once, never twice.
    evaluated_at = max((e["step"] for e in kept if "eval_tau" in e), default=-1)
    saved_at = -1

    def record(entry: dict) -> None:
        if not main:
            return
        with metrics_path.open("a") as f:
            f.write(json.dumps(entry) + "\n")

    def all_ranks_cpu() -> float:
        """Training CPU seconds so far, every rank's (a collective: every rank calls it at the same step)."""
        return cpu_before + dist.mean(time.process_time() - cpu0) * dist.world_size

    def checkpoint(cpu: float) -> None:
        nonlocal saved_at
        saved_at = step
        if not main:
            return
        save_tensor_file({"recipe_kind": recipe.kind, "step": step, "module": module.state_dict(),
                      "optimizer": opt.state_dict(), "batch_gen": batch_gen.get_state(),
                      "tap_scale": objective.tap_scale, "cpu_seconds": cpu}, state_path)
        write_export(Path(recipe.output), export_cfg, objective.backbone, objective.tap_scale, objective.head,
                     recipe.kind, source=recipe.name)

    def evaluate() -> EvalResult:
        nonlocal evaluated_at
        module.eval()
        res = objective.evaluate(eval_batches)
        module.train()
        entry = {"step": step, "eval_slot_acc": [round(a, 4) for a in res.slot_acc], "eval_tau": round(res.tau, 4)}
        if res.base_tau is not None:
            entry["base_slot_acc"] = [round(a, 4) for a in res.base_slot_acc or []]
            entry["base_tau"] = round(res.base_tau, 4)
        if evaluated_at != step:
            record(entry)
            evaluated_at = step
        log(f"step {step}: held-out tau {res.tau:.3f}, slot acc {' '.join(f'{a:.2f}' for a in res.slot_acc)}"
            + (f" (base tau {res.base_tau:.3f})" if res.base_tau is not None else ""))
        return res

    start_step, t0 = step, time.perf_counter()
    module.train()
    bar = tqdm(total=recipe.optim.steps, initial=step, desc=recipe.name, disable=not progress, unit="step")
    deadline = None if recipe.optim.max_minutes is None else t0 + 60 * recipe.optim.max_minutes
    ema = None
    while step < recipe.optim.steps:
        if stop_after is not None and step - start_step >= stop_after:
            break
        if deadline is not None and dist.any(time.perf_counter() > deadline):  # every rank stops at one step
            log(f"max_minutes reached at step {step}")
            break
        idx = torch.randint(0, len(train_seqs), (recipe.optim.batch_seqs,), generator=batch_gen)
        batch = make_batch([train_seqs[int(i)] for i in idx], recipe.optim.anchors, bs, batch_gen)
        lr = _lr_at(step, recipe)
        for group in opt.param_groups:
            group["lr"] = lr
        loss = loss_fn(batch, batch_gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, recipe.optim.grad_clip)
        opt.step()
        step += 1
        value = dist.mean(float(loss.detach()))  # the global batch's loss
        ema = value if ema is None else 0.95 * ema + 0.05 * value
        bar.update(1)
        bar.set_postfix(loss=f"{ema:.3f}")
        if step % 10 == 0:
            record({"step": step, "loss": round(value, 5), "lr": lr})
        if step % recipe.eval.every == 0 and main:
            evaluate()
        if step % recipe.checkpoint_every == 0:
            checkpoint(all_ranks_cpu())
    bar.close()
    cpu = all_ranks_cpu()
    if not main:
        return {"name": recipe.name, "kind": recipe.kind, "steps": step, "rank": dist.rank}
    final = evaluate()  # recomputed (deterministic) when this step was just evaluated, but recorded once
    if saved_at != step:
        checkpoint(cpu)
    summary = {"name": recipe.name, "kind": recipe.kind, "steps": step, "cpu_seconds": round(cpu, 1),
               "wall_seconds_this_run": round(time.perf_counter() - t0, 1), "train_sequences": len(train_seqs),
               "heldout_sequences": len(held), "eval_tau": final.tau, "eval_slot_acc": final.slot_acc,
               "base_tau": final.base_tau, "base_slot_acc": final.base_slot_acc}
    summary_text = json.dumps(summary, indent=2) + "\n"
    write_text(work / "summary.json", summary_text, what="training summary")
    log(f"{recipe.name}: {step} steps, CPU {cpu / 3600:.2f} h, held-out tau {final.tau:.3f}")
    return summary
