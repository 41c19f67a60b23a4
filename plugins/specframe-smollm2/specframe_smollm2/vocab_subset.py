"""``specframe vocab-subset``: frequency-ranked draft vocabularies (FR-Spec) from target-written training data.

The counts are those of the *response* tokens in the shards of :mod:`specframe_smollm2.training.generate_data`
(what the target writes is what a drafter has to propose; prompt tokens are never drafted). Each requested size
becomes an EAGLE-3 ``d2t`` / ``t2d`` mapping (:mod:`specframe.draft_vocab`) holding the target's special tokens
(EOS first of all) and then the most frequent tokens. Shards are read with ``torch.load(weights_only=True)``, so
no pickled code is ever run.

Example::

    specframe train recipes/smollm2/drafter-stage2.yaml --data-only --set data.dir=data-cache/smollm2-vocab ...
    specframe vocab-subset --from data-cache/smollm2-vocab --size 8192 --size 16384 --size 32768 \\
        -o checkpoints/smollm2-135m/draft-vocab
    # -> fr8k.safetensors, fr16k.safetensors, fr32k.safetensors and coverage.json in that directory

``--heldout N`` also reports how well subsets ranked from all but the last ``N`` shards cover those shards'
responses (the mappings themselves always use every shard).

Shards are untrusted: every sequence's ``ids`` must be a 1-D integer tensor of ids in ``[0, vocab)`` and its
``prompt_len`` a plain integer from 1 to its length (:func:`response_ids`), or the shard is named with the
sequence and field at fault. Every argument (each ``--size``, ``--heldout``, the output path) is checked and
every mapping built before anything is written; the files of one run (the mappings and ``coverage.json``) are
then written together through :func:`specframe.files.write_all`, so a failure leaves the old files as they were.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from specframe.draft_vocab import DraftVocab, draft_vocab_bytes, frequency_ranked
from specframe.errors import CheckpointError, ConfigError
from specframe.files import check_output_file, check_writable_dir, write_all
from specframe.tensor_files import load_tensor_file, read_json_object

COVERAGE_FILE = "coverage.json"
#: Largest vocabulary accepted from a target config (real ones hold up to a few hundred thousand tokens).
MAX_VOCAB = 1 << 24
#: Integer dtypes token ids may be stored in.
ID_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def target_vocab_size(model_dir: Path) -> int:
    """``vocab_size`` of the converted target's ``config.json`` (a whole number from 1 to :data:`MAX_VOCAB`)."""
    path = Path(model_dir) / "config.json"
    hint = "--target must be a converted Hugging Face model directory"
    try:
        value = read_json_object(path, what="target config")["vocab_size"]
    except (CheckpointError, KeyError) as exc:
        raise ConfigError(f"cannot read vocab_size from {path}: {exc}", hint=hint) from None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VOCAB:
        raise ConfigError(f"{path}: vocab_size is {value!r}, not a whole number from 1 to {MAX_VOCAB}", hint=hint)
    return value


def response_ids(shard: object, path: Path, vocab_size: int) -> list[torch.Tensor]:  # each [L - P] int64
    """The response token ids of every sequence of a loaded shard, each value checked (see the module doc)."""
    def bad(message: str) -> ConfigError:
        return ConfigError(f"data shard {path}: {message}", hint="delete it and rerun the data generation "
                                                                  "(it resumes); shards hold what it writes")

    if not isinstance(shard, dict) or "ids" not in shard or "prompt_len" not in shard:
        found = ", ".join(map(repr, shard)) if isinstance(shard, dict) else type(shard).__name__
        raise bad(f"expected a mapping with 'ids' and 'prompt_len', found {found or 'an empty mapping'}")
    ids_list, lens = shard["ids"], shard["prompt_len"]
    for name, value in (("ids", ids_list), ("prompt_len", lens)):
        if not isinstance(value, (list, tuple)):
            raise bad(f"'{name}' is a {type(value).__name__}, expected a list with one entry per sequence")
    if len(ids_list) != len(lens):
        raise bad(f"'ids' holds {len(ids_list)} sequences but 'prompt_len' {len(lens)}")
    out = []
    for i, (ids, prompt_len) in enumerate(zip(ids_list, lens, strict=True)):
        if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype not in ID_DTYPES:
            shown = f"a {ids.dim()}-D {str(ids.dtype).removeprefix('torch.')} tensor" \
                if isinstance(ids, torch.Tensor) else f"a {type(ids).__name__}"
            raise bad(f"ids[{i}] is {shown}, expected a 1-D tensor of integer token ids")
        if isinstance(prompt_len, torch.Tensor) and prompt_len.dim() == 0 and prompt_len.dtype in ID_DTYPES:
            prompt_len = int(prompt_len)
        if isinstance(prompt_len, bool) or not isinstance(prompt_len, int) or not 1 <= prompt_len <= len(ids):
            raise bad(f"prompt_len[{i}] is {prompt_len!r}, expected a whole number from 1 to the sequence's "
                      f"length {len(ids)}")
        if ids.numel():
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= vocab_size:
                raise bad(f"ids[{i}] holds token id {low if low < 0 else high}, outside the target vocabulary "
                          f"[0, {vocab_size}) (were the shards generated by another target?)")
        out.append(ids[prompt_len:].long())
    return out


def count_response_tokens(directories: Iterable[Path], vocab_size: int) -> torch.Tensor:  # [S, V] int64
    """Per-shard counts of the response tokens of every shard under ``directories`` (sorted shard order)."""
    directories = list(directories)  # read twice: here and in the error message below
    per_shard: list[torch.Tensor] = []
    for directory in directories:
        paths = sorted(Path(directory).glob("shard-*.pt"))
        if not paths:
            raise ConfigError(f"no data shards (shard-*.pt) in {directory}",
                              hint="generate them first: specframe train RECIPE --data-only")
        for path in paths:
            try:
                shard = load_tensor_file(path, what="data shard")
            except CheckpointError as exc:  # an unreadable shard is named
                raise ConfigError(f"cannot read data shard {path}: {exc.message}",
                                  hint="delete it and rerun the data generation (it resumes)") from None
            counts = torch.zeros(vocab_size, dtype=torch.long)
            for response in response_ids(shard, path, vocab_size):
                counts += torch.bincount(response, minlength=vocab_size)
            per_shard.append(counts)
    stacked = torch.stack(per_shard)
    if int(stacked.sum()) == 0:
        raise ConfigError(f"the data shards in {', '.join(map(str, directories))} hold no response tokens",
                          hint="every sequence ends at its prompt; regenerate the data")
    return stacked


def heldout_coverage(per_shard: torch.Tensor, sizes: Sequence[int], always: Sequence[int],
                     heldout: int) -> dict[int, float]:
    """Coverage of the last ``heldout`` shards' response tokens by subsets ranked from the other shards.

    ``per_shard`` is ``[S, V]`` from :func:`count_response_tokens`; at least one shard must remain for ranking.
    """
    if not 0 < heldout < per_shard.shape[0]:
        raise ConfigError(f"--heldout {heldout} must leave at least one of the {per_shard.shape[0]} shards for "
                          "ranking", hint=f"use 1 .. {per_shard.shape[0] - 1}")
    ranking, test = per_shard[:-heldout].sum(0), per_shard[-heldout:].sum(0)
    total = max(int(test.sum()), 1)
    return {size: round(int(test[frequency_ranked(ranking, size, always=always).target_ids].sum()) / total, 6)
            for size in sizes}


def subset_file_name(size: int) -> str:
    """``fr16k.safetensors`` for 16384, ``fr1000.safetensors`` for 1000."""
    return f"fr{size // 1024}k.safetensors" if size % 1024 == 0 else f"fr{size}.safetensors"


def special_token_ids(model_dir: Path) -> list[int]:
    """EOS / BOS / PAD and every other special or added token id of the target's tokenizer."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    except Exception as exc:  # transformers raises many types for a directory without a usable tokenizer
        raise ConfigError(f"cannot load the target's tokenizer from {model_dir}: {type(exc).__name__}: "
                          f"{str(exc).strip()[:200]}", hint="--target must be a converted target directory "
                                                            "(config.json, weights and tokenizer)") from None
    ids = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    ids |= {i for i in (tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id) if i is not None}
    return sorted(int(i) for i in ids)


def check_sizes(sizes: Sequence[int], vocab_size: int, always: Sequence[int]) -> None:
    """Every ``--size`` must hold the always-kept tokens and fit the vocabulary (checked before any work)."""
    keep = max(len(set(always)), 1)
    for size in sizes:
        if not keep <= size <= vocab_size:
            least = f"{keep} (the always-kept special tokens)" if always else "1"
            raise ConfigError(f"--size {size} must lie between {least} and the vocabulary size {vocab_size}",
                              hint="choose e.g. --size 16384; nothing was written")


def output_paths(sizes: Sequence[int], output: Path) -> tuple[bool, list[Path]]:
    """Whether ``output`` is one mapping file, and the mapping files of ``sizes``; the output is checked
    (a writable directory, or a file path) before anything is computed or written."""
    single = len(sizes) == 1 and output.suffix == ".safetensors"
    if single:
        return True, [check_output_file(output, what="draft-vocabulary file")]
    if output.suffix == ".safetensors" and not output.is_dir():
        raise ConfigError(f"-o {output} names one .safetensors file, but {len(sizes)} sizes were given",
                          hint="give a directory for several sizes (frNk.safetensors + coverage.json go there)")
    check_writable_dir(output, what="vocab-subset output directory")
    paths = [output / subset_file_name(size) for size in sizes]
    for path in (*paths, output / COVERAGE_FILE):
        check_output_file(path, what="vocab-subset output")
    return False, paths


def write_subsets(counts: torch.Tensor, sizes: Sequence[int], always: Sequence[int], output: Path, *,
                  sources: Sequence[str], heldout: dict[int, float] | None = None,
                  ) -> dict[int, dict[str, float | int | str]]:
    """Write one mapping per size (a file for one size, else files in the directory ``output``) + coverage.

    Every size is checked and every mapping built before the first byte is written; the files are then written
    together (:func:`specframe.files.write_all`). Returns per size: the file, the share of the counted response
    tokens the subset covers, and the held-out coverage when ``heldout`` (from :func:`heldout_coverage`) is given.
    """
    check_sizes(sizes, int(counts.shape[0]), always)
    vocabs: list[DraftVocab] = [frequency_ranked(counts, size, always=always, source=f"--size {size}")
                                for size in sizes]
    single, paths = output_paths(sizes, output)
    total = max(int(counts.sum()), 1)
    summary: dict[int, dict[str, float | int | str]] = {}
    files = []
    for size, vocab, path in zip(sizes, vocabs, paths, strict=True):
        meta = {"method": "frequency-ranked (FR-Spec) over target-written responses", "size": str(size),
                "sources": ",".join(sources), "tokens_counted": str(int(counts.sum()))}
        data = draft_vocab_bytes(vocab, metadata=meta)
        files.append((path, lambda handle, data=data: handle.write(data)))
        covered = int(counts[vocab.target_ids].sum())
        summary[size] = {"file": path.name, "coverage": round(covered / total, 6), "size": size}
        if heldout is not None:
            summary[size]["heldout_coverage"] = heldout[size]
    if not single:
        report = {"tokens_counted": int(counts.sum()), "sources": list(sources),
                  "always_kept": list(always), "subsets": list(summary.values())}
        text = (json.dumps(report, indent=2) + "\n").encode()
        files.append((output / COVERAGE_FILE, lambda handle: handle.write(text)))
    write_all(files, what="vocab-subset output")
    return summary
