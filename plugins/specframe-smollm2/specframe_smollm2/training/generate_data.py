"""Training data from the target itself: batched greedy responses with hidden-state taps and top-k soft labels.

For each batch of prompts (chat template, **left padding**) one ``model.generate`` call decodes greedily while

* forward hooks on the tapped decoder layers record every forward's outputs (the prefill gives ``[B, P, H]``, each
  decode step ``[B, 1, H]``), so the taps come from the generation itself, not from a second pass;
* a logits processor records the target's top-k log-probabilities at every step (soft labels for distillation).

Each batch becomes one shard file ``shard-00012.pt`` written atomically
(:func:`specframe.tensor_files.save_tensor_file`); an existing shard is skipped, so an interrupted generation
resumes where it stopped. Per sequence a shard holds::

    ids        [L] int32     prompt + response (through the first EOS), left padding removed
    prompt_len int           P: the response starts at position P
    taps       [L-1, n*H] fp16   tapped layer outputs at positions 0..L-2 (the last token was never fed)
    topk_ids   [L-P, k] int32    target's top-k tokens at positions P-1..L-2 (predicting ids[P..L-1])
    topk_logp  [L-P, k] fp16     their log-probabilities
    index      int           the prompt's index in the generated prompt list (for the held-out split)

A conversation prompt (a tuple of user turns) gives one sequence per turn, each holding the earlier turns and the
target's answers to them in its prompt part.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from specframe.errors import ConfigError
from specframe.files import write_text
from specframe.locking import hold_lock
from specframe.prompts import encode_messages, user_message
from specframe.tensor_files import read_json_object, save_tensor_file
from specframe_smollm2.training.prompt_files import Prompt
from specframe_smollm2.training.self_chat import UserTurnWriter, parse_sentinel

META = "meta.json"
#: The fields of a shard, one list entry per sequence (see the module docstring).
SHARD_KEYS = ("ids", "prompt_len", "taps", "topk_ids", "topk_logp", "index")


class _TopKRecorder:
    """A logits processor that stores the top-k log-probabilities of every step and changes nothing."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.steps: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:  # scores [B, V]
        logp = torch.log_softmax(scores.float(), dim=-1)
        values, ids = torch.topk(logp, self.k, dim=-1)  # [B, k]
        self.steps.append((ids.to(torch.int32), values.to(torch.float16)))
        return scores


class _TapRecorder:
    """Forward hooks that append each forward's output of the chosen decoder layers."""

    def __init__(self, layers: Sequence[torch.nn.Module], layer_ids: Sequence[int]) -> None:
        self.layer_ids = list(layer_ids)
        self.outputs: dict[int, list[torch.Tensor]] = {i: [] for i in self.layer_ids}
        self.handles = [layers[i].register_forward_hook(self._hook(i)) for i in self.layer_ids]

    def _hook(self, layer_id: int) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            hidden = output[0] if isinstance(output, (tuple, list)) else output
            self.outputs[layer_id].append(hidden.detach().to(torch.float16))  # [B, Q, H]

        return hook

    def stacked(self) -> torch.Tensor:  # [B, T_fed, n*H]
        return torch.cat([torch.cat(self.outputs[i], dim=1) for i in self.layer_ids], dim=-1)

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def generate_batch(model: Any, tokenizer: Any, prompts: Sequence[Prompt], indices: Sequence[int], *,
                   max_new_tokens: int, taps: Sequence[int], topk: int,
                   writer: UserTurnWriter | None = None) -> dict[str, list]:
    """Greedy responses for ``prompts`` (chat template, left padding) with taps and top-k labels.

    Prompts are encoded by :func:`specframe.prompts.encode_messages`, the encoder ``run`` and ``bench`` use. A
    conversation (a tuple of user turns) is answered turn by turn: pass ``t`` prompts every conversation that
    has a turn ``t`` with its earlier turns and the target's own answers to them, so one conversation gives one
    sequence per turn (all with its prompt index, so they fall on the same side of the held-out split). A
    sentinel turn of a ``self_chat`` prompt is first written by the target (``writer``,
    :mod:`specframe_smollm2.training.self_chat`), then answered.
    """
    turns = [(p,) if isinstance(p, str) else tuple(p) for p in prompts]
    history: list[list[dict[str, str]]] = [[] for _ in turns]
    eos = _eos_id(model)
    shard: dict[str, list] = {key: [] for key in SHARD_KEYS}
    for t in range(max(len(c) for c in turns)):
        rows = [i for i, c in enumerate(turns) if len(c) > t]
        written = [i for i in rows if parse_sentinel(turns[i][t]) is not None]
        if written:
            turn_writer = writer or UserTurnWriter()
            texts = turn_writer.write(model, tokenizer, [history[i] for i in written], [turns[i][t] for i in written])
            wrote = dict(zip(written, texts, strict=True))
        for i in rows:
            history[i] += user_message(wrote[i] if i in written else turns[i][t])
        encoded = [encode_messages(tokenizer, history[i], chat=True) for i in rows]
        width = max(len(r) for r in encoded)
        pad = int(tokenizer.pad_token_id)
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in encoded], dtype=torch.long)  # [B, Pmax]
        attn = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in encoded], dtype=torch.long)  # [B, Pmax]
        part = generate_batch_ids(model, input_ids, attn, [indices[i] for i in rows],
                                  max_new_tokens=max_new_tokens, taps=taps, topk=topk)
        for key in SHARD_KEYS:
            shard[key] += part[key]
        for i, ids, p in zip(rows, part["ids"], part["prompt_len"], strict=True):
            answer = ids[p:].tolist()
            if answer and answer[-1] == eos:
                answer = answer[:-1]
            history[i].append({"role": "assistant", "content": tokenizer.decode(answer, skip_special_tokens=True)})
    return shard


def _eos_id(model: Any) -> int:
    eos = model.generation_config.eos_token_id
    return int(eos if isinstance(eos, int) else eos[0])


def generate_batch_ids(model: Any, input_ids: torch.Tensor, attn: torch.Tensor, indices: Sequence[int], *,
                       max_new_tokens: int, taps: Sequence[int], topk: int) -> dict[str, list]:
    """The shard of left-padded prompts ``input_ids`` / ``attn`` ``[B, Pmax]`` (see the module docstring)."""
    eos = _eos_id(model)
    recorder = _TopKRecorder(topk)
    tap_rec = _TapRecorder(model.model.layers, taps)
    try:
        with torch.inference_mode():
            out = model.generate(input_ids=input_ids, attention_mask=attn, do_sample=False,
                                 max_new_tokens=max_new_tokens, logits_processor=[recorder],
                                 pad_token_id=eos, eos_token_id=eos)
        hidden = tap_rec.stacked()  # [B, Pmax + steps - 1, n*H]
    finally:
        tap_rec.close()
    pmax = input_ids.shape[1]
    steps = len(recorder.steps)
    top_ids = torch.stack([s[0] for s in recorder.steps], dim=1)  # [B, steps, k]
    top_lp = torch.stack([s[1] for s in recorder.steps], dim=1)
    shard: dict[str, list] = {key: [] for key in SHARD_KEYS}
    for row in range(input_ids.shape[0]):
        p = int(attn[row].sum())
        response = out[row, pmax:pmax + steps]
        hits = (response == eos).nonzero()
        r = int(hits[0]) + 1 if len(hits) else int(response.shape[0])
        ids = torch.cat([input_ids[row, pmax - p:], response[:r]]).to(torch.int32)  # [L]
        length = p + r
        shard["ids"].append(ids)
        shard["prompt_len"].append(p)
        shard["taps"].append(hidden[row, pmax - p:pmax - p + length - 1].clone())
        shard["topk_ids"].append(top_ids[row, :r].clone())
        shard["topk_logp"].append(top_lp[row, :r].clone())
        shard["index"].append(int(indices[row]))
    return shard


def generate_dataset(model_dir: Path, out_dir: Path, prompts: Sequence[Prompt], meta: dict[str, Any], *,
                     batch_size: int, max_new_tokens: int, taps: Sequence[int], topk: int,
                     log: Callable[[str], None] = print, progress: bool = True,
                     max_shards: int | None = None, rank: int = 0, world_size: int = 1,
                     writer: UserTurnWriter | None = None) -> list[Path]:
    """Write (or complete) the shards of ``prompts`` under ``out_dir`` (the first ``max_shards``); return the paths.

    The directory is locked while this runs, so two runs never generate into one directory at once. Under
    ``torchrun`` each rank writes the missing shards ``i`` with ``i % world_size == rank`` (rank 0 holds the lock
    for the launch; the caller waits for all ranks before reading them); the shards are a single process's."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the data directory {out_dir}: {exc.strerror}", where="data.dir",
                          hint="give a writable directory") from None
    lock = hold_lock(out_dir / ".lock", message=f"another run is generating data in {out_dir}",
                     hint="wait for it to finish (its shards are then reused), or give this recipe another data.dir"
                     ) if rank == 0 else None
    try:
        return _generate_locked(model_dir, out_dir, prompts, meta, batch_size=batch_size,
                                max_new_tokens=max_new_tokens, taps=taps, topk=topk, log=log, progress=progress,
                                max_shards=max_shards, rank=rank, world_size=world_size, writer=writer)
    finally:
        if lock is not None:
            lock.close()


def _generate_locked(model_dir: Path, out_dir: Path, prompts: Sequence[str], meta: dict[str, Any], *,
                     batch_size: int, max_new_tokens: int, taps: Sequence[int], topk: int,
                     log: Callable[[str], None], progress: bool, max_shards: int | None, rank: int,
                     world_size: int, writer: UserTurnWriter | None) -> list[Path]:
    from specframe_hf.loading import load_model, load_tokenizer, model_directory
    from tqdm import tqdm

    meta_path = out_dir / META
    if meta_path.exists():
        old = read_json_object(meta_path, what="data settings")
        if old != meta:
            raise ConfigError(f"{out_dir} holds data generated with other settings",
                              hint="use another data.dir, or delete the directory to regenerate")
    else:
        text = json.dumps(meta, indent=2) + "\n"
        write_text(meta_path, text, what="data settings")
    # Batches keep the (random) prompt order, so any prefix of the shards is a fair sample of every kind.
    order = list(range(len(prompts)))
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    paths = [out_dir / f"shard-{i:05d}.pt" for i in range(len(batches))]
    todo = [i for i, p in enumerate(paths[:max_shards]) if not p.exists() and i % world_size == rank]
    if not todo:
        return paths
    directory = model_directory(str(model_dir))
    tokenizer = load_tokenizer(directory)
    model = load_model(directory, dtype=torch.float32, device=torch.device("cpu"), role="target")
    t0, tokens = time.perf_counter(), 0
    bar = tqdm(todo, desc="generating data", disable=not progress, unit="batch")
    for i in bar:
        batch = batches[i]
        shard = generate_batch(model, tokenizer, [prompts[j] for j in batch], batch, max_new_tokens=max_new_tokens,
                               taps=taps, topk=topk, writer=writer)
        save_tensor_file(shard, paths[i])
        tokens += sum(len(t) for t in shard["topk_ids"])
        rate = tokens / (time.perf_counter() - t0)
        bar.set_postfix(tokens=tokens, tok_s=f"{rate:.0f}")
        log(f"shard {i}: {len(batch)} prompts, {tokens} response tokens so far, {rate:.0f} tok/s")
    return paths
