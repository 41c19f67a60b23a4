"""`Pipeline`: resolved stages around a target, and the decode loop.

One round::

    proposal = drafter.propose(state)                        # draft
    tree = tree_builder.build(proposal, corrector, ctx)      # correct + build
    tree = pruner.prune(tree, ctx)                           # prune
    out = target.forward_tree(tree)                          # target forward with tree attention
    result = verifier.verify(tree, out.logits, ctx)          # accept a path, emit a bonus token
    target.commit(tree, result.accepted_nodes); drafter.commit(...)   # compact caches

Plugins are consulted only in :meth:`Pipeline.from_config`; the loop calls the resolved objects directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import torch

from specframe.batch_decode import BatchDecode, BatchStreamFn, RefusedRequest, Request
from specframe.config.bounds import check_max_new_tokens
from specframe.config.loader import config_hash
from specframe.config.pipeline import STAGE_FIELDS, PipelineConfigBase
from specframe.config.validate import check_variables, load_pipeline_config, validate_pipeline
from specframe.cost.auto_budget import AutoBudget
from specframe.cost.setup import build_auto_budget, save_learned_profile
from specframe.device_sync import StageClock
from specframe.errors import ConfigError, ContractError, GenerationError
from specframe.interfaces import (
    BuildContext,
    Corrector,
    DecodeState,
    Drafter,
    Pruner,
    RoundContext,
    TargetModel,
    TreeBuilder,
    Verifier,
)
from specframe.metrics.records import GenerationResult, RoundRecord
from specframe.plugins import PluginHost, PluginInfo
from specframe.prompts import user_message
from specframe.sampling import sample, validate_sampling
from specframe.tree import DraftTree, check_tree
from specframe.types import RngStreams, SamplingParams, TargetOutput, VerifyResult

Prompt = str | Sequence[int] | torch.Tensor


@dataclass
class Stages:
    """The resolved stage objects of a pipeline."""

    drafter: Drafter
    corrector: Corrector
    tree_builder: TreeBuilder
    pruner: Pruner
    verifier: Verifier


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
        self.auto_budget: AutoBudget | None = None  # built on the first request with `budget: auto`

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
            if config.target is None:  # type: ignore[attr-defined]
                raise ConfigError("the pipeline has no `target:` and no target object was given")
            target = registry.get("target", config.target.type).spec.factory(config.target, ctx)  # type: ignore[attr-defined]
        ctx.target = target
        built: dict[str, Any] = {}
        for field, kind in STAGE_FIELDS.items():
            if field == "target":
                continue
            section = getattr(config, field)
            # Reuse an unchanged stage; stages other than the drafter may read the drafter's section (a
            # correction head loaded from the drafter's checkpoint), so they are reused only with it.
            same_drafter = reuse is not None and reuse.config.drafter == config.drafter  # type: ignore[attr-defined]
            if reuse is not None and getattr(reuse.config, field) == section and (field == "drafter" or same_drafter):
                built[field] = getattr(reuse.stages, field)
            else:
                built[field] = registry.get(kind, section.type).spec.factory(section, ctx)
        drafter: Drafter = built["drafter"]
        if drafter.target_layers:
            target.set_taps(tuple(drafter.target_layers))
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
        if isinstance(prompt, torch.Tensor):
            ids = prompt.long().view(1, -1)
        elif isinstance(prompt, str):
            if self.target.tokenizer is None:
                raise GenerationError("a text prompt needs a tokenizer, but the target has none",
                                      hint="pass token ids, or load the target from a directory with a tokenizer")
            use_chat = self.config.generation.chat_template if chat is None else chat
            ids = torch.tensor([self.target.encode_messages(user_message(prompt), chat=None if use_chat else False)],
                               dtype=torch.long)
        else:
            ids = torch.tensor([list(prompt)], dtype=torch.long)
        if ids.numel() == 0:
            raise GenerationError("the prompt is empty", hint="give at least one token")
        return ids

    @overload
    def generate(self, prompt: Prompt, max_new_tokens: int | None = None, *, seed: int | None = None,
                 stream: Callable[[str], None] | None = None, chat: bool | None = None,
                 stop: Sequence[str] | None = None) -> GenerationResult: ...

    @overload
    def generate(self, prompt: list[Prompt | Request], max_new_tokens: int | None = None, *,
                 seed: int | None = None, stream: Callable[[str], None] | None = None, chat: bool | None = None,
                 stop: Sequence[str] | None = None,
                 batch_size: int | None = None) -> list[GenerationResult | RefusedRequest]: ...

    def generate(self, prompt: Prompt | list[Prompt | Request], max_new_tokens: int | None = None, *,
                 seed: int | None = None, stream: Callable[[str], None] | None = None, chat: bool | None = None,
                 stop: Sequence[str] | None = None,
                 batch_size: int | None = None) -> GenerationResult | list[GenerationResult | RefusedRequest]:
        """Decode one request; the output law equals the target's own (exactly, at temperature 0).

        A Python list of prompts (strings, id lists, tensors or `Request` objects; a flat list of ints stays one
        prompt of token ids) decodes them in one batched loop: see :meth:`generate_batch`.
        """
        if _is_batch(prompt):
            if stream is not None:
                raise GenerationError("stream= takes the text of one request, but a list of prompts was given",
                                      hint="use generate_batch(prompts, stream=fn) with fn(request_index, text)")
            return self.generate_batch(prompt, max_new_tokens, seed=seed, chat=chat, stop=stop,
                                       batch_size=batch_size)
        ids, max_new, stops = self.request_inputs(prompt, max_new_tokens, stop, chat=chat)
        if self.config.auto and self.auto_budget is None:
            self.auto_budget = build_auto_budget(self, ids)
        try:
            return RequestDecode(self, ids, max_new, stops, stream, self.config.seed if seed is None else seed).run()
        except ContractError as exc:
            self._attribute(exc)
            raise

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

    def request_inputs(self, prompt: Prompt, max_new_tokens: int | None, stop: Sequence[str] | None, *,
                       chat: bool | None) -> tuple[torch.Tensor, int, tuple[str, ...]]:
        """One request's checked inputs, for single and batched decoding alike: prompt ids ``[1, P]``, the token
        limit and the stop strings (the pipeline's ``generation`` defaults where None)."""
        gen = self.config.generation
        max_new = check_max_new_tokens(gen.max_new_tokens if max_new_tokens is None else max_new_tokens)
        stops = tuple(gen.stop if stop is None else stop)
        if any(not isinstance(s, str) or not s for s in stops):
            raise GenerationError(f"stop strings must be non-empty strings, got {list(stops)!r}",
                                  hint="an empty stop string matches at once and would end every output empty")
        ids = self.encode(prompt, chat=chat)
        limit = self.target.max_length
        if limit is not None and ids.shape[1] >= limit:
            raise GenerationError(f"the prompt has {ids.shape[1]} tokens but the target's context is {limit}",
                                  hint="shorten the prompt")
        return ids, max_new, stops

    def generate_batch(self, prompts: Sequence[Prompt | Request], max_new_tokens: int | None = None, *,
                       seed: int | None = None, chat: bool | None = None, stop: Sequence[str] | None = None,
                       batch_size: int | None = None,
                       stream: BatchStreamFn | None = None) -> list[GenerationResult | RefusedRequest]:
        """Decode many requests with up to ``batch_size`` rows in flight (default: all of them at once).

        Every request keeps its own seed, limit and stop strings (a `Request` overrides the call's
        defaults) and its output law is its single-request law; one result per request, in order, a
        `RefusedRequest` for a request whose prompt does not fit (see :mod:`specframe.batch_decode`).
        """
        requests = [p if isinstance(p, Request) else Request(p) for p in prompts]
        requests = [Request(r.prompt, max_new_tokens if r.max_new_tokens is None else r.max_new_tokens,
                            seed if r.seed is None else r.seed, stop if r.stop is None else r.stop)
                    for r in requests]
        size = max(len(requests), 1) if batch_size is None else int(batch_size)
        return BatchDecode(self, requests, size, stream=stream, chat=chat).run()


class RequestDecode:
    """One request's decode loop (kept apart from Pipeline so the loop's state is local)."""

    def __init__(self, pipe: Pipeline, ids: torch.Tensor, max_new: int, stops: tuple[str, ...],
                 stream: Callable[[str], None] | None, seed: int) -> None:
        self.pipe = pipe
        self.ids = ids
        self.max_new = max_new
        self.stops = stops
        self.stream = stream
        self.seed = seed
        limit = pipe.target.max_length
        # The whole sequence (prompt + new tokens) must fit the target's context window.
        self.cap = max_new if limit is None else min(max_new, limit - int(ids.shape[1]))
        self.eos = set(pipe.target.eos_token_ids) if pipe.config.generation.stop_at_eos else set()
        self.new: list[int] = []
        self.checked = 0  # tokens whose text holds no stop string
        self.streamed_text = ""

    def stop_reason(self) -> str | None:
        if self.new and self.new[-1] in self.eos:
            return "eos"
        if len(self.new) >= self.cap:
            return "length" if self.cap == self.max_new else "context"
        return None

    def accept_tokens(self, tokens: list[int]) -> list[int]:
        """Append tokens up to EOS and the length limit; return those appended."""
        taken = []
        for t in tokens:
            if len(self.new) >= self.cap:
                break
            self.new.append(t)
            taken.append(t)
            if t in self.eos:
                break
        return taken

    def _decode(self, tokens: list[int]) -> str:
        return self.pipe.target.tokenizer.decode(tokens, skip_special_tokens=True)

    def _stop_at(self, text: str) -> int | None:
        """Where the earliest stop string starts in ``text``, or None."""
        hits = [at for at in (text.find(s) for s in self.stops) if at >= 0]
        return min(hits) if hits else None

    def _held_back(self, text: str) -> int:
        """Characters at the end of ``text`` that may still grow into a stop string (or an unfinished character)."""
        hold = 0
        for stop in self.stops:
            for k in range(min(len(stop) - 1, len(text)), hold, -1):
                if text.endswith(stop[:k]):
                    hold = k
                    break
        if text.endswith("\ufffd"):  # an incomplete multi-byte character: its bytes may still arrive
            hold = max(hold, len(text) - len(text.rstrip("\ufffd")))
        return hold

    def emit(self, text: str, upto: int) -> None:
        """Stream ``text[:upto]`` past what was already streamed (never anything the final text drops)."""
        shown = text[:upto]
        if self.stream is not None and shown.startswith(self.streamed_text) and len(shown) > len(self.streamed_text):
            self.stream(shown[len(self.streamed_text):])
            self.streamed_text = shown

    def check_text(self) -> tuple[str | None, int | None]:
        """(text so far, tokens removed) after the newest tokens; ``removed`` is None unless a stop string hit.

        On a hit the tokens are cut to the shortest prefix whose text contains a stop string, so tokens,
        counts and speed never include what the user does not get, and the text ends before the stop string.
        """
        if self.pipe.target.tokenizer is None:
            return None, None
        text = self._decode(self.new)
        if not self.stops or self._stop_at(text) is None:
            self.checked = len(self.new)
            self.emit(text, len(text) - self._held_back(text))
            return text, None
        keep = next(n for n in range(self.checked + 1, len(self.new) + 1)
                    if self._stop_at(self._decode(self.new[:n])) is not None)
        removed = len(self.new) - keep
        del self.new[keep:]
        text = self._decode(self.new)
        text = text[:self._stop_at(text)]
        self.emit(text, len(text))
        return text, removed

    def run(self) -> GenerationResult:
        pipe, st = self.pipe, self.pipe.stages
        target, timing = pipe.target, pipe.config.metrics.stage_timing
        auto = pipe.auto_budget
        check = pipe.config.metrics.check_trees
        rng = RngStreams.from_seed(self.seed, device=target.device)
        # Stage times (and `budget: auto`'s cost model) need the device idle before each clock reading.
        clock = StageClock(pipe.devices(), sync=timing or auto is not None)
        t_start = clock()
        with torch.inference_mode():
            target.reset()
            prefill = target.prefill(self.ids)
            first = sample(prefill.logits[:, -1], pipe.sampling, rng.target)  # [1]
            self.accept_tokens([int(first[0])])
            prefill_ns = clock() - t_start
            state = DecodeState(tokens=torch.cat([self.ids, first.view(1, 1).to(self.ids.device)], dim=1),
                                prompt_len=self.ids.shape[1], sampling=pipe.sampling, rng=rng)
            st.drafter.begin(state, prefill)
            ctx = RoundContext(budget=pipe.config.max_budget, sampling=pipe.sampling, rng=rng)
            if auto is not None:
                auto.start_request()
            rounds: list[RoundRecord] = []
            text, removed = self.check_text()
            reason = "stop_string" if removed is not None else self.stop_reason()
            while reason is None:
                drafted = auto is None or auto.should_draft()
                chosen: int | None = None
                t0 = clock()
                if drafted:
                    tree, t1, t2 = draft_tree(st, st.drafter, state, ctx, target, clock)
                    if auto is not None:
                        tree, chosen = auto.choose(tree)
                    t3 = clock()
                else:  # budget: auto decided that drafting does not pay this round: the root alone
                    tree = DraftTree.root_only(state.root)
                    t1 = t2 = t3 = t0
                if check:
                    check_round_tree(tree)
                if tree.tokens.device != target.device:  # drafted on another device: the verifier needs it here
                    tree = tree.to(target.device)
                out = target.forward_tree(tree)
                t4 = clock()
                result = st.verifier.verify(tree, out.logits, ctx) if drafted else plain_step(out, pipe, rng)
                t5 = clock()
                target.commit(tree, result.accepted_nodes)
                outcome = _round_outcome(tree, result)
                committed = self.accept_tokens(outcome.emitted)
                emitted = torch.tensor([outcome.emitted], dtype=torch.long, device=state.tokens.device)  # [1, a + 1]
                state.tokens = torch.cat([state.tokens, emitted], dim=1)
                st.drafter.commit(state, tree, result, out)
                t6 = clock()
                stage_ns = {"draft": t1 - t0, "build": t2 - t1, "prune": t3 - t2, "target": t4 - t3,
                            "verify": t5 - t4, "commit": t6 - t5}
                if auto is not None:
                    stage_ms = {k: v / 1e6 for k, v in stage_ns.items()}
                    if drafted:
                        auto.observe_drafted(tree, result.accepted_nodes[0], outcome.accepted, stage_ms)
                    else:
                        auto.observe_plain(stage_ms)
                rounds.append(RoundRecord(nodes=outcome.nodes, depth=outcome.depth, accepted=outcome.accepted,
                                          committed=len(committed),
                                          stage_ns=stage_ns if timing else {}, drafted=drafted,
                                          budget=chosen))
                text, removed = self.check_text()
                if removed:  # the round is credited only with the tokens before the stop string
                    last = rounds[-1]
                    kept = last.committed - removed
                    last.committed, last.accepted = kept, min(last.accepted, kept)
                reason = "stop_string" if removed is not None else self.stop_reason()
            if text is not None and reason != "stop_string":
                self.emit(text, len(text))  # the end: nothing held back can become a stop string now
        if auto is not None:
            save_learned_profile(pipe)
        return GenerationResult(tokens=self.new, text=text, prompt_len=int(self.ids.shape[1]), rounds=rounds,
                                prefill_ns=prefill_ns, total_ns=clock() - t_start, stop_reason=reason)


@dataclass(frozen=True)
class _Outcome:
    """What the host needs from a round (row 0)."""

    nodes: int  # draft nodes verified (root excluded)
    depth: int  # deepest valid node
    accepted: int  # draft tokens accepted
    emitted: list[int]  # accepted path tokens, then the bonus


def _round_outcome(tree: DraftTree, result: VerifyResult) -> _Outcome:
    """The round's outcome in one device-to-host transfer (instead of one per scalar)."""
    dev = result.accepted_nodes.device
    path = result.accepted_nodes[0, 1:].clamp(min=0)  # [D]; -1 padding reads node 0, cut off below
    depth = torch.where(tree.valid[0], tree.depth[0], torch.zeros_like(tree.depth[0])).amax().view(1)  # [1]
    packed = torch.cat([tree.num_nodes[:1].to(dev), depth.to(dev), result.num_accepted[:1].long(),
                        tree.tokens[0].to(dev)[path], result.bonus_token[:1].long()])  # [4 + D]
    values = packed.tolist()
    nodes, deepest, accepted = values[0] - 1, values[1], values[2]
    return _Outcome(nodes=nodes, depth=deepest, accepted=accepted, emitted=values[3 : 3 + accepted] + [values[-1]])


def _is_batch(prompt: object) -> bool:
    """A list of prompts (not a flat list of token ids, which is one prompt)."""
    return isinstance(prompt, list) and bool(prompt) and not isinstance(prompt[0], int)


def plain_step(out: TargetOutput, pipe: Pipeline, rng: RngStreams) -> VerifyResult:
    """The verdict of a root-only round: no draft to accept, the bonus drawn from the target's own law."""
    logits = out.logits[:, 0]  # [B, V]
    b = logits.shape[0]
    bonus = sample(logits, pipe.sampling, rng.target)  # [B]
    return VerifyResult(accepted_nodes=torch.zeros(b, 1, dtype=torch.long, device=logits.device),
                        num_accepted=torch.zeros(b, dtype=torch.long, device=logits.device), bonus_token=bonus)


def draft_tree(stages: Stages, drafter: Drafter, state: DecodeState, ctx: RoundContext, target: TargetModel,
               clock: Callable[[], int]) -> tuple[DraftTree, int, int]:
    """One row's draft, build and prune, fitted to the context window; with the clock after drafting and after
    building (the loop times the stages from them)."""
    proposal = drafter.propose(state)
    t1 = clock()
    tree = stages.tree_builder.build(proposal, stages.corrector, ctx)
    t2 = clock()
    return fit_context(stages.pruner.prune(tree, ctx), proposal.depth, target, state), t1, t2


def fit_context(tree: DraftTree, proposal_depth: int, target: TargetModel, state: DecodeState) -> DraftTree:
    """Drop nodes whose positions would run past the target's context window.

    A tree is never deeper than its proposal, so the common case is decided without reading the tree (no
    device synchronisation).
    """
    limit = target.max_length
    if limit is None:
        return tree
    room = limit - 1 - state.cached_len  # deepest allowed depth: position cached_len + depth < limit
    if proposal_depth <= room or tree.max_depth <= room:
        return tree
    return tree.subtree(tree.valid & (tree.depth <= max(room, 0)))


def check_round_tree(tree: DraftTree) -> None:
    problems = check_tree(tree)
    if problems:
        raise AssertionError("stage produced an invalid DraftTree:\n  " + "\n  ".join(problems))
