"""`Pipeline`: a validated configuration with its stages built around a target, and the public API.

``generate`` / ``generate_batch`` check the requests (one check per value: :mod:`specframe.decode.request`) and run
the one decode loop (:mod:`specframe.decode`), one round of which is::

    proposal = drafter.propose(rows)                         # draft
    tree = tree_builder.build(proposal, corrector, ctx)      # correct + build
    tree = pruner.prune(tree, ctx)                           # prune (budget: auto trims further)
    out = target.forward_tree(tree)                          # target forward with tree attention
    result = verifier.verify(tree, out.logits, ctx)          # accept a path, emit a bonus token
    target.commit(tree, result.accepted_nodes); drafter.commit(...)   # compact caches

Plugins are consulted only in :meth:`Pipeline.from_config`; the loop calls the resolved objects directly.

Threads: every call that uses the target (``generate``, ``generate_batch``, ``encode``, ``request_inputs``,
``prepare_auto_budget``) holds the target's lock (:mod:`specframe.decode.exclusive`), so concurrent calls on
pipelines that share a target (``with_stage`` shares it) run one after the other, each as if alone.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import torch

from specframe.config.bounds import check_max_new_tokens
from specframe.config.loader import config_hash
from specframe.config.pipeline import STAGE_FIELDS, PipelineConfigBase
from specframe.config.validate import check_variables, load_pipeline_config, validate_pipeline
from specframe.cost.auto_budget import AutoBudget
from specframe.cost.setup import build_auto_budget, save_learned
from specframe.decode.acceptance_alarm import AcceptanceAlarm
from specframe.decode.exclusive import exclusive, target_lock
from specframe.decode.loop import FinishFn, StreamFn, check_batch_support, decode
from specframe.decode.request import (
    Prompt,
    RefusedRequest,
    Request,
    RequestInputs,
    check_batch_size_value,
    check_prompt,
    check_prompt_ids,
    check_stops,
    materialise_stops,
    prompt_list,
)
from specframe.decode.session import DecodeSettings, Stages
from specframe.errors import ConfigError, ContractError, GenerationError
from specframe.files.cache import measuring
from specframe.interfaces import BuildContext, TargetModel
from specframe.metrics.records import GenerationResult
from specframe.plugins import PluginHost, PluginInfo
from specframe.prompts import user_message
from specframe.registry import TreeBuilderCapabilities, VerifierCapabilities
from specframe.sampling import validate_sampling
from specframe.seeds import check_seed, derive_seed, fresh_seed
from specframe.types import SamplingParams

__all__ = ["Pipeline", "Prompt", "RefusedRequest", "Request", "Stages"]


class Pipeline:
    """A validated pipeline with its stages built; call :meth:`generate`."""

    def __init__(self, config: PipelineConfigBase, target: TargetModel, stages: Stages,
                 plugins: list[PluginInfo], host: PluginHost) -> None:
        self.config = config
        self.target = target
        self.stages = stages
        self.plugins = plugins
        self.host = host
        self.config_hash = config_hash(config.model_dump(mode="json"))
        self.sampling = SamplingParams(**config.sampling.model_dump())
        validate_sampling(self.sampling)
        if config.generation.stop and getattr(target, "tokenizer", None) is None:
            raise ConfigError(f"generation.stop holds stop strings {list(config.generation.stop)!r}, but the target "
                              f"{type(target).__name__} has no tokenizer to turn tokens into the text they match",
                              where="generation.stop",
                              hint="remove generation.stop, or load the target from a directory with a tokenizer")
        self.auto_budget: AutoBudget | None = None  # built on the first request with `budget: auto`
        self._served = 0  # requests seeded by the pipeline so far (the index of the next one's derived seed)
        #: Warns once when no draft is accepted for a window of drafted rounds (τ ≈ 1 with drafts).
        self.acceptance_alarm = AcceptanceAlarm(config.name or "pipeline")
        self.settings = DecodeSettings(sampling=self.sampling, budget=config.max_budget,
                                       stage_timing=config.metrics.stage_timing,
                                       check_trees=config.metrics.check_trees,
                                       stop_at_eos=config.generation.stop_at_eos, drafts=stages.drafter.proposes,
                                       devices=self.devices())

    # -------------------------------------------------------------------------------------- building
    @classmethod
    def from_yaml(cls, path: str | Path, *, overrides: Sequence[str] = (), target: TargetModel | None = None,
                  host: PluginHost | None = None) -> Pipeline:
        host = host or PluginHost()
        config, _ = load_pipeline_config(str(path), tuple(overrides), host=host,
                                         has_target_object=target is not None)
        return cls.from_config(config, target=target, host=host)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, target: TargetModel | None = None,
                  host: PluginHost | None = None) -> Pipeline:
        host = host or PluginHost()
        config = validate_pipeline(data, host, has_target_object=target is not None)
        return cls.from_config(config, target=target, host=host)

    @classmethod
    def from_config(cls, config: PipelineConfigBase, *, target: TargetModel | None = None,
                    host: PluginHost | None = None, reuse: Pipeline | None = None) -> Pipeline:
        """Instantiate every stage through the registry's factories.

        Plugins are used while a pipeline is validated and built (here and in :mod:`specframe.config.validate`),
        never while it decodes.
        """
        host = host or PluginHost()
        registry = host.registry
        check_variables(config, {}, "<pipeline>")
        ctx = BuildContext(pipeline=config)
        if target is None:
            if config.target is None:
                raise ConfigError("the pipeline has no `target:` and no target object was given")
            target = registry.get("target", config.target.type).spec.factory(config.target, ctx)
        refuse_without_float64(target, "the target")
        ctx.target = target
        built: dict[str, Any] = {}
        for field, kind in STAGE_FIELDS.items():
            if field == "target":
                continue
            section = getattr(config, field)
            # Reuse an unchanged stage; stages other than the drafter may read the drafter's section (a
            # correction head loaded from the drafter's checkpoint), so they are reused only with it.
            same_drafter = reuse is not None and reuse.config.drafter == config.drafter
            if reuse is not None and getattr(reuse.config, field) == section and (field == "drafter" or same_drafter):
                built[field] = getattr(reuse.stages, field)
            else:
                built[field] = registry.get(kind, section.type).spec.factory(section, ctx)
        for field, stage in built.items():
            refuse_without_float64(stage, f"the {field}")
        return cls(config, target, Stages(**built), host.plugins(), host)

    def with_stage(self, field: str, section: dict[str, Any] | None = None, **top_level: Any) -> Pipeline:
        """A pipeline with one stage (or top-level fields) replaced; unchanged stages and the target are reused.

        What it replaces:

        * ``section`` replaces the whole ``field`` section: it is not merged with the old one, so fields it
          leaves out take their defaults (``{"type": "dartree"}`` drops the old builder's ``width``);
        * each ``top_level`` keyword replaces that whole top-level field: another stage's section
          (``corrector={"type": "identity"}``), ``name=``, ``budget=``, ``sampling={...}``, ...;
        * everything else is kept, and the result is validated again like a file (``verifier: auto`` is
          resolved again, so it may pick another verifier).

        What it reuses: the target object (always; a ``target=`` keyword does not reload it) and every stage
        object whose section is unchanged (stages other than the drafter only while the drafter section is
        unchanged, since their factories may read it).

        Example: ``pipe.with_stage("tree_builder", {"type": "dartree", "width": 8})``.
        """
        data = self.config.model_dump(mode="python", exclude_none=True)
        if section is not None:
            if field not in STAGE_FIELDS:
                raise ConfigError(f"unknown stage '{field}'", hint=f"stages: {', '.join(STAGE_FIELDS)}")
            data[field] = section
        data.update(top_level)
        config = validate_pipeline(data, self.host, has_target_object=True)
        return Pipeline.from_config(config, target=self.target, host=self.host, reuse=self)

    # ------------------------------------------------------------------------------------ generation
    def encode(self, prompt: Prompt, *, chat: bool | None = None) -> torch.Tensor:  # [1, P] int64
        """Token ids of a prompt; strings go through the target's ``encode_messages`` (and its chat template)."""
        with exclusive(self.target, "encode()"):
            return self._encode(prompt, chat=chat)

    def _encode(self, prompt: object, *, chat: bool | None) -> torch.Tensor:  # [1, P] int64
        checked = check_prompt(prompt)
        if isinstance(checked, torch.Tensor):
            return checked
        if self.target.tokenizer is None:
            raise GenerationError("a text prompt needs a tokenizer, but the target has none",
                                  hint="pass token ids, or load the target from a directory with a tokenizer")
        use_chat = self.config.generation.chat_template if chat is None else chat
        return torch.tensor([self.target.encode_messages(user_message(checked), chat=None if use_chat else False)],
                            dtype=torch.long)

    @overload
    def generate(self, prompt: Prompt, max_new_tokens: int | None = None, *, seed: int | None = None,
                 stream: Callable[[str], None] | None = None, chat: bool | None = None,
                 stop: str | Sequence[str] | None = None) -> GenerationResult: ...

    @overload
    def generate(self, prompt: list[Prompt | Request], max_new_tokens: int | None = None, *,
                 seed: int | None = None, stream: Callable[[str], None] | None = None, chat: bool | None = None,
                 stop: str | Sequence[str] | None = None,
                 batch_size: int | None = None) -> list[GenerationResult | RefusedRequest]: ...

    def generate(self, prompt: Prompt | list[Prompt | Request], max_new_tokens: int | None = None, *,
                 seed: int | None = None, stream: Callable[[str], None] | None = None, chat: bool | None = None,
                 stop: str | Sequence[str] | None = None,
                 batch_size: int | None = None) -> GenerationResult | list[GenerationResult | RefusedRequest]:
        """Decode one request; the output law equals the target's own (exactly, at temperature 0).

        A Python list of prompts (strings, id lists, tensors or `Request` objects; a flat list of ints stays one
        prompt of token ids) decodes them in one batched loop: see :meth:`generate_batch`. One request is a batch
        of one: ``generate(p)`` and ``generate_batch([p])[0]`` give the same tokens, rounds and τ. ``stop`` is one
        stop string (``stop="\\n"``) or a list of them. A prompt that is not text or token ids (``None``, bytes, a
        float tensor, several rows) is a :class:`GenerationError`; in a list it refuses that element alone.
        """
        if isinstance(prompt, list) and _is_batch(prompt):
            if stream is not None:
                raise GenerationError("stream= takes the text of one request, but a list of prompts was given",
                                      hint="use generate_batch(prompts, stream=fn) with fn(request_index, text)")
            return self.generate_batch(prompt, max_new_tokens, seed=seed, chat=chat, stop=stop,
                                       batch_size=batch_size)
        with exclusive(self.target, "generate()"):
            inputs = self._request_inputs(Request(prompt, max_new_tokens, seed, stop), chat=chat)
            row_stream = None if stream is None else _in_callback(self.target, lambda _index, text: stream(text))
            outcome = self._decode([inputs], 1, row_stream)[0]
        if isinstance(outcome, RefusedRequest):
            raise outcome.error
        return outcome

    def generate_batch(self, prompts: Sequence[Prompt | Request], max_new_tokens: int | None = None, *,
                       seed: int | None = None, chat: bool | None = None, stop: str | Sequence[str] | None = None,
                       batch_size: int | None = None, stream: StreamFn | None = None,
                       on_finish: FinishFn | None = None) -> list[GenerationResult | RefusedRequest]:
        """Decode many requests with up to ``batch_size`` rows in flight (default: all of them at once).

        Every request keeps its own seed (a fresh or derived one when none is given; ``result.seed``), limit and
        stop strings (a `Request` overrides the call's defaults), and its random draws do not depend on its
        batch-mates (its logits can, in the last bits: docs/concepts/batched-decoding.md); one result per
        request, in order, a `RefusedRequest` for a request that cannot run (see :mod:`specframe.decode.loop`), a
        malformed prompt included. ``prompts`` is a list (or tuple) of prompts or a ``[B, P]`` tensor.
        ``on_finish(index, outcome)`` is called as each request is refused or ends (a server or a command line can
        hand results out then).
        """
        items = prompt_list(prompts)
        stop = materialise_stops(stop)  # type: ignore[assignment]  # a generator serves every request, not the first
        size = None if batch_size is None else check_batch_size_value(batch_size)
        with exclusive(self.target, "generate_batch()"):
            checked: list[RequestInputs | GenerationError] = []
            for item in items:
                r = item if isinstance(item, Request) else Request(item)
                merged = Request(r.prompt, max_new_tokens if r.max_new_tokens is None else r.max_new_tokens,
                                 seed if r.seed is None else r.seed, stop if r.stop is None else r.stop)
                try:
                    checked.append(self._request_inputs(merged, chat=chat))
                except GenerationError as exc:
                    checked.append(exc)
            return self._decode(checked, max(len(items), 1) if size is None else size,
                                _in_callback(self.target, stream), _in_callback(self.target, on_finish))

    def request_inputs(self, request: Request, *, chat: bool | None) -> RequestInputs:
        """One request's checked inputs (the pipeline's ``generation`` defaults where the request leaves None)."""
        with exclusive(self.target, "request_inputs()"):
            return self._request_inputs(request, chat=chat)

    def _request_inputs(self, request: Request, *, chat: bool | None) -> RequestInputs:
        gen = self.config.generation
        max_new = check_max_new_tokens(gen.max_new_tokens if request.max_new_tokens is None
                                       else request.max_new_tokens)
        stops = check_stops(gen.stop if request.stop is None else request.stop)
        if stops and getattr(self.target, "tokenizer", None) is None:
            raise GenerationError(f"stop strings {list(stops)!r} were given, but the target "
                                  f"{type(self.target).__name__} has no tokenizer to turn tokens into the text they "
                                  "match", hint="leave out stop=, or load the target from a directory with a "
                                                "tokenizer")
        ids = self._encode(request.prompt, chat=chat)
        limit = self.target.max_length
        check_prompt_ids(ids, self.target.vocab_size, limit)
        cap = max_new if limit is None else min(max_new, limit - int(ids.shape[1]))
        return RequestInputs(ids=ids, max_new=max_new, cap=cap, stops=stops, seed=self._request_seed(request.seed))

    def _request_seed(self, seed: int | None) -> int:
        """The seed of the next request: its own, else one derived from the pipeline's ``seed`` and the request's
        index among those this pipeline has served, else fresh entropy (:mod:`specframe.seeds`)."""
        if seed is not None:
            return check_seed(seed)
        index, self._served = self._served, self._served + 1
        return fresh_seed() if self.config.seed is None else derive_seed(self.config.seed, index)

    def check_batch_size(self, batch_size: int) -> None:
        """Refuse a batch size this pipeline cannot decode (below 1, or above 1 with a drafter that keeps no
        per-row state)."""
        check_batch_support(self.stages, self.config.drafter.type, batch_size)

    def _decode(self, requests: list[RequestInputs | GenerationError], batch_size: int,
                stream: StreamFn | None, on_finish: FinishFn | None = None) -> list[GenerationResult | RefusedRequest]:
        """Run the loop (the caller holds the target's lock)."""
        self.check_batch_size(batch_size)
        if self.config.auto and self.settings.drafts and self.auto_budget is None:
            self.auto_budget = self._build_auto_budget(requests)
        auto = self.auto_budget if self.settings.drafts else None  # a pipeline that never drafts learns nothing
        try:
            if auto is None:
                return decode(self.target, self.stages, self.settings, requests, batch_size, auto=None,
                              stream=stream, on_finish=on_finish, alarm=self.acceptance_alarm)
            with measuring() as window:  # what the controller learns is cached only from a quiet machine
                outcomes = decode(self.target, self.stages, self.settings, requests, batch_size, auto=auto,
                                  stream=stream, on_finish=on_finish, alarm=self.acceptance_alarm)
        except ContractError as exc:
            self._attribute(exc)
            raise
        save_learned(auto, window.load)
        return outcomes

    def prepare_auto_budget(self, prompt_ids: torch.Tensor) -> AutoBudget:
        """Build the `budget: auto` controller now (its profile measured on ``prompt_ids`` ``[1, P]`` when none is
        cached); otherwise the first request builds it."""
        with exclusive(self.target, "prepare_auto_budget()"):
            return self._prepare_auto_budget(prompt_ids)

    def _prepare_auto_budget(self, prompt_ids: torch.Tensor) -> AutoBudget:
        self.auto_budget = build_auto_budget(self.target, self.config, prompt_ids,
                                             sibling_prefix=self._sibling_prefix())
        return self.auto_budget

    def _build_auto_budget(self, requests: list[RequestInputs | GenerationError]) -> AutoBudget | None:
        """The controller, measured on the first prompt that leaves room for it (None without a runnable one)."""
        failure: GenerationError | None = None
        for req in requests:
            if isinstance(req, GenerationError):
                continue
            try:
                return self._prepare_auto_budget(req.ids)
            except GenerationError as exc:
                failure = exc
        if failure is not None:
            raise failure
        return None

    def _sibling_prefix(self) -> bool:
        """Whether the verifier tries sampled siblings in order (rejection over a sampled tree)."""
        registry = self.host.registry
        builder = registry.get("tree_builder", self.config.tree_builder.type).spec.caps(TreeBuilderCapabilities)
        verifier = registry.get("verifier", self.config.verifier.type).spec.caps(VerifierCapabilities)
        return bool(verifier.requires_q and builder.draft_regime == "sampled")

    def _attribute(self, exc: ContractError) -> None:
        """Name the component at fault (its registered type and distribution) in a contract violation."""
        section = getattr(self.config, exc.stage, None) if exc.stage in STAGE_FIELDS else None
        if section is None or exc.component:
            return
        exc.component = section.type
        if (STAGE_FIELDS[exc.stage], section.type) in self.host.registry:
            exc.distribution = self.host.registry.get(STAGE_FIELDS[exc.stage], section.type).distribution

    def devices(self) -> tuple[torch.device, ...]:
        """Every device the target and the stages compute on (the target's first); stage timing waits for all."""
        found = [torch.device(self.target.device), *getattr(self.target, "devices", ())]
        for stage in vars(self.stages).values():
            device = getattr(stage, "device", None)
            if device is not None:
                found.append(torch.device(device))
        return tuple(dict.fromkeys(found))


_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def _in_callback(target: Any, fn: _Fn | None) -> _Fn | None:
    """``fn`` run inside the target lock's callback mark (:mod:`specframe.decode.exclusive`): a waiter on a holder
    stuck in a user callback gives up with a message instead of waiting forever."""
    if fn is None:
        return None
    lock = target_lock(target)

    def marked(*args: Any) -> Any:
        with lock.callback():
            return fn(*args)

    return marked  # type: ignore[return-value]


def _is_batch(prompt: list[Any]) -> bool:
    """A list of prompts (not a flat list of token ids, which is one prompt)."""
    return bool(prompt) and not _is_token_id(prompt[0])


def _is_token_id(value: object) -> bool:
    """An integer (numpy's and 0-d integer tensors included; a bool is not one)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, torch.Tensor):
        return value.dim() == 0 and not value.is_floating_point() and value.dtype != torch.bool
    try:
        operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def refuse_without_float64(component: object, what: str) -> None:
    """A :class:`ConfigError` when ``component`` sits on a device without float64 (Apple's ``mps``): tree building
    accumulates path scores, and verification and sampling draw, in float64 on the component's device, so a round
    there would fail at its first float64 tensor instead of with this message."""
    device = getattr(component, "device", None)
    if isinstance(device, torch.device | str) and torch.device(device).type == "mps":
        raise ConfigError(f"{what} is on Apple's mps device, which has no float64; specframe builds trees, verifies "
                          "and samples in float64 on the device the stages run on",
                          hint="put it on cpu or cuda (its `device:` field)")
