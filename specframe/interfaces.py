"""Stage interfaces: `TargetModel` (and the optional `SharedEmbeddings`), `Drafter`, `Corrector`, `TreeBuilder`,
`Pruner`, `Verifier`.

A round of the decode loop calls them in this order::

    proposal = drafter.propose(state)                               # DraftProposal [B, L, K]
    tree     = tree_builder.build(proposal, corrector, round_ctx)   # DraftTree [B, N]
    tree     = pruner.prune(tree, round_ctx)                        # DraftTree [B, N' <= N]
    out      = target.forward_tree(tree)                            # TargetOutput logits [B, N', V]
    result   = verifier.verify(tree, out.logits, round_ctx)         # VerifyResult
    target.commit(tree, result.accepted_nodes); drafter.commit(state, tree, result, out)

Each stage interface requires one method (``propose``, ``child_logprobs``, ``build``, ``prune``, ``verify``); the
target adapter requires four (``prefill``, ``forward_tree``, ``commit``, ``cache_len``). Everything else is
optional with a default: hooks such as ``begin``/``commit``/``advance``, ``TargetModel.encode_messages`` and the
``SharedEmbeddings`` interface. Components are built once, when the pipeline is built; nothing here knows about
plugins.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from specframe.prompts import Messages, encode_messages
from specframe.sampling.noise import RoundNoise
from specframe.tree import DraftTree
from specframe.types import DraftProposal, SamplingParams, TargetOutput, VerifyResult


class DecodeState:
    """What the loop knows about one request; drafters read it, only the loop writes it.

    The tokens live in a buffer reserved for the request's whole output (``capacity`` positions), so the loop
    appends each round's tokens in place (:meth:`append`) instead of concatenating a new tensor (which would make
    a request cost O(T^2) copies); ``tokens`` is a view of the filled part.
    """

    def __init__(self, tokens: torch.Tensor, prompt_len: int, sampling: SamplingParams, seed: int = 0, *,
                 capacity: int | None = None) -> None:
        length = int(tokens.shape[1])
        if capacity is not None and capacity > length:
            buffer = tokens.new_zeros(tokens.shape[0], capacity)  # [B, capacity] int64
            buffer[:, :length] = tokens
            tokens = buffer
        self._buffer = tokens  # [B, capacity] int64
        self._length = length
        self.prompt_len = prompt_len  # prompt tokens at the start of ``tokens``
        self.sampling = sampling
        self.seed = seed  # the request's seed: every random draw is keyed by it and a position (sampling.noise)

    @property
    def tokens(self) -> torch.Tensor:  # [B, T] int64, prompt + generated tokens; the last one is the root
        return self._buffer[:, : self._length]

    @tokens.setter
    def tokens(self, value: torch.Tensor) -> None:
        self._buffer, self._length = value, int(value.shape[1])

    @property
    def root(self) -> torch.Tensor:  # [B] int64
        return self._buffer[:, self._length - 1]

    @property
    def cached_len(self) -> int:
        """Tokens in the target's KV cache: everything but the root."""
        return self._length - 1

    @property
    def buffer_data_ptr(self) -> int:
        """The address of the token buffer (tests check that appending does not reallocate it)."""
        return int(self._buffer.data_ptr())

    def append(self, new: Sequence[int] | torch.Tensor) -> None:
        """Append ``new`` token ids (one row; a list, or a ``[n]`` tensor already on the buffer's device) in place;
        the buffer grows by half only when the capacity is exceeded."""
        end = self._length + len(new)
        if end > self._buffer.shape[1]:
            grown = self._buffer.new_zeros(self._buffer.shape[0], max(end, self._buffer.shape[1] * 3 // 2))
            grown[:, : self._length] = self._buffer[:, : self._length]
            self._buffer = grown
        if not isinstance(new, torch.Tensor):
            new = torch.tensor(new, dtype=self._buffer.dtype).to(self._buffer.device)
        self._buffer[:, self._length : end] = new
        self._length = end

    @staticmethod
    def append_rows(states: Sequence[DecodeState], new: Sequence[Sequence[int]]) -> None:
        """Append ``new[i]`` to ``states[i]`` for every row with one host-to-device copy for all of them (the
        rows' tokens packed into one tensor, then each row's slice written into its buffer on the device)."""
        if not states:
            return
        device = states[0]._buffer.device
        flat = torch.tensor([t for row in new for t in row], dtype=torch.long).to(device)  # [sum n_i]: one copy
        start = 0
        for state, row in zip(states, new, strict=True):
            state.append(flat[start : start + len(row)])  # device to device (a view on one device)
            start += len(row)

    def __repr__(self) -> str:
        return (f"DecodeState(tokens={self.tokens!r}, prompt_len={self.prompt_len}, sampling={self.sampling!r}, "
                f"seed={self.seed})")


@dataclass(frozen=True)
class RoundContext:
    """Per-round parameters shared by builders, pruners and verifiers, for the ``B`` rows of the round's tree.

    Every random draw of a stage comes from ``noise``: uniforms keyed by each row's request seed, a stream, the
    absolute position the draw predicts and the node it is made at (:mod:`specframe.sampling.noise`), never from
    the global torch RNG.
    """

    budget: int  # verification budget B: draft nodes, root excluded
    sampling: SamplingParams
    noise: RoundNoise  # [B] rows: request seeds and root positions
    #: Check stage contracts that need a device-to-host read (the pipeline's ``metrics.check_trees``, a debug
    #: mode); stages skip such checks otherwise, so a round makes one read.
    check: bool = False


class TargetModel(ABC):
    """The model whose distribution the pipeline must reproduce exactly.

    The adapter owns the KV cache. ``prefill`` caches the whole prompt; ``forward_tree`` runs the root and
    the draft nodes on top of the cache without committing them; ``commit`` keeps the accepted nodes.
    """

    vocab_size: int
    eos_token_ids: tuple[int, ...] = ()
    tokenizer: Any = None  # optional: encode / decode / chat template (a transformers tokenizer)
    max_length: int | None = None  # context window, when known
    #: Where inputs go and logits come from (the first layer's device when the model is split across devices);
    #: the request's random streams live here.
    device: torch.device = torch.device("cpu")

    @abstractmethod
    def prefill(self, input_ids: torch.Tensor) -> TargetOutput:
        """Cache ``input_ids`` ``[B, P]``; return logits ``[B, 1, V]`` at the last position.

        ``hidden``, when the target was asked for taps, is ``[B, P, n_taps * H]`` for every prompt position.
        """

    @abstractmethod
    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Score every node of ``tree`` with ancestor-only attention over the cached prefix.

        Returns logits ``[B, N, V]``: the target's next-token logits after each node's path. Nothing is
        committed; the nodes' KV entries are held until :meth:`commit`.
        """

    @abstractmethod
    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        """Keep the KV entries of ``accepted_nodes`` ``[B, D + 1]`` (root first, -1 padded), drop the rest."""

    @property
    @abstractmethod
    def cache_len(self) -> int:
        """Number of positions currently committed in the cache."""

    def reset(self) -> None:  # noqa: B027
        """Forget the cached sequence (start of a new request)."""

    def set_taps(self, layers: tuple[int, ...]) -> None:
        """Ask for the hidden states of these decoder layers in every ``TargetOutput``."""
        if layers:
            raise NotImplementedError(f"{type(self).__name__} cannot expose hidden-state taps")

    def encode_messages(self, messages: Messages, *, chat: bool | None = None) -> list[int]:
        """Prompt token ids of chat ``messages``; ``chat`` is the template switch (None: when there is one).

        Optional: the default applies :attr:`tokenizer` through :func:`specframe.prompts.encode_messages`
        (the only chat-template encoder); override it for targets that prompt differently.
        """
        return encode_messages(self.tokenizer, messages, chat=chat)

    def kv_bytes_per_token(self) -> int | None:
        """Bytes one committed position costs the KV cache (2 x layers x KV heads x head dim x dtype bytes, from the
        model's config), or None when unknown; memory reports multiply it by a request's context length
        (:mod:`specframe.metrics.memory`)."""
        return None

    def ragged_batch(self, taps: Sequence[int] = ()) -> TargetRows | None:
        """Fresh `TargetRows` over this model whose forwards tap ``taps``, or None: the decode loop then drives
        this object's own prefill / forward_tree / commit as its one row (no batched decoding)."""
        return None


@runtime_checkable
class TargetRows(Protocol):
    """The decode loop's view of a target: rows (requests) with their own committed lengths, one forward per round.

    Rows join with :meth:`add_row` (the request's prompt prefilled alone) and leave with :meth:`keep_rows`.
    ``forward_tree`` takes one tree per row, padded to the widest row with invalid nodes, and scores each row on
    its own prefix at its own positions; ``commit`` keeps a different number of accepted nodes per row. The
    layer taps given when the rows were made are tapped in their forwards only, until :meth:`close`.
    """

    vocab_size: int
    max_length: int | None
    device: torch.device

    @property
    def lengths(self) -> list[int]:
        """Committed positions per row."""
        ...

    def add_row(self, input_ids: torch.Tensor, capacity: int | None = None) -> TargetOutput:
        """Prefill ``input_ids`` ``[1, P]`` alone and append it as the last row; logits ``[1, 1, V]``.
        ``capacity``: positions the row will hold at most (prompt, decoded tokens and one tree), so an adapter
        can reserve its cache once; None: unknown (the adapter grows as needed)."""
        ...

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows``, in this order."""
        ...

    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Logits ``[B, N, V]`` after each node of each row's tree; nothing committed."""
        ...

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor,
               paths: Sequence[Sequence[int]] | None = None) -> None:
        """Keep each row's ``accepted_nodes`` ``[B, D + 1]`` (root first, -1 padded). ``paths``: the same paths
        as host lists, when the caller has read them already (the decode loop does, in its one read per round);
        an adapter that needs them on the host then reads nothing."""
        ...

    def close(self) -> None:
        """Release the rows' caches and taps."""
        ...


class SharedEmbeddings(ABC):
    """Optional target interface: the weights a drafter or correction head shares with the target.

    DFlash-style drafters own no token embedding and no LM head; they use the target's (frozen), on the
    target's device and dtype. A target adapter that offers them implements this interface next to
    :class:`TargetModel` and declares ``TargetCapabilities(shares_embeddings=True)``; components that need them
    declare ``needs_target_embeddings=True``, and validation checks the pair before anything loads.
    """

    dtype: torch.dtype  # weight and activation dtype of the target
    device: torch.device  # where the target's weights live

    @abstractmethod
    def input_embeddings(self) -> torch.nn.Module:
        """The token embedding: ids ``[..]`` -> ``[.., H]``."""

    @abstractmethod
    def output_embeddings(self) -> torch.nn.Module:
        """The LM head: ``[.., H]`` -> logits ``[.., V]``."""

    def num_layers(self) -> int | None:
        """Decoder layers of the target (bounds of the tap indices), when known."""
        return None


class Drafter(ABC):
    """Proposes per-depth candidates for the next tokens.

    The one-request methods (:meth:`begin`, :meth:`propose`, :meth:`commit`) are all a drafter must define. The
    decode loop drives a drafter through :meth:`rows`, whose default keeps one :meth:`fork` per request and
    drafts them one after another; a drafter that batches requests natively (one forward for every drafting
    row) returns its own `DrafterRows`.
    """

    #: Decoder layers of the target whose outputs the drafter conditions on (empty: none).
    target_layers: tuple[int, ...] = ()
    #: The drafter keeps per-request state only in attributes that :meth:`begin` (re)creates, so each row of a
    #: batch can decode with its own :meth:`fork` (or its :meth:`rows` batches natively). Batched decoding
    #: refuses drafters that do not declare it.
    supports_batch: bool = False
    #: False for a drafter that never proposes anything (plain decoding): the loop then skips every draft stage.
    proposes: bool = True

    def rows(self) -> DrafterRows:
        """The decode loop's per-request state for this drafter (see `DrafterRows`)."""
        return ForkedRows(self)

    def fork(self) -> Drafter:
        """A drafter for one more batch row: shares weights and settings, gets its own state in :meth:`begin`."""
        return copy.copy(self)

    def begin(self, state: DecodeState, prefill: TargetOutput) -> None:  # noqa: B027
        """Start a request; ``prefill.hidden`` carries the prompt's taps when ``target_layers`` is set."""

    @abstractmethod
    def propose(self, state: DecodeState) -> DraftProposal:
        """Return candidates for depths ``1..L`` after ``state.root``."""

    def commit(  # noqa: B027
        self, state: DecodeState, tree: DraftTree, result: VerifyResult, target_out: TargetOutput
    ) -> None:
        """Update drafter caches after verification (``state`` already holds the new tokens)."""

    def state_bytes_per_token(self) -> int | None:
        """Bytes one committed context position costs the drafter's own per-request cache (a block drafter's
        keys and values), or None when it keeps none; see :mod:`specframe.metrics.memory`."""
        return None

    def max_depth(self) -> int | None:
        """The most depths one proposal holds (its ``L``), fixed by the drafter's settings; None when not known.

        A chain over this drafter never holds more than this many nodes a round, so any larger budget decodes
        the same tokens at the same cost (the corrector ablation decodes such cells once). The conformance suite
        checks that no proposal is deeper."""
        return None


class DrafterRows(ABC):
    """A drafter's state for the rows (requests) of one decode loop, in the target rows' order.

    Each round the loop calls :meth:`propose` for the rows that draft (the others cost nothing) and
    :meth:`commit` for every row, with the round's tree, verdict and target output of all rows.
    """

    @abstractmethod
    def add_row(self, state: DecodeState, prefill: TargetOutput) -> None:
        """A request joins as the last row; ``prefill`` is its prompt's target output (``[1, ...]``)."""

    @abstractmethod
    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows``, in this order."""

    @abstractmethod
    def propose(self, rows: Sequence[int], states: Sequence[DecodeState]) -> DraftProposal:
        """Candidates ``[R, L, K]`` for the rows ``rows`` (whose states are ``states``)."""

    @abstractmethod
    def commit(self, states: Sequence[DecodeState], tree: DraftTree, result: VerifyResult,
               target_out: TargetOutput) -> None:
        """Every row's round: ``tree`` ``[B, N]``, ``result`` and ``target_out`` ``[B, N, ...]`` in row order
        (``states`` already hold the new tokens)."""


class ForkedRows(DrafterRows):
    """The default `DrafterRows`: one :meth:`Drafter.fork` per row, drafted one after another.

    A drafter that does not declare ``supports_batch`` decodes its one row itself (no fork).
    """

    def __init__(self, drafter: Drafter) -> None:
        self.drafter = drafter
        self.forks: list[Drafter] = []

    def add_row(self, state: DecodeState, prefill: TargetOutput) -> None:
        fork = self.drafter.fork() if self.drafter.supports_batch else self.drafter
        fork.begin(state, prefill)
        self.forks.append(fork)

    def keep_rows(self, rows: Sequence[int]) -> None:
        self.forks = [self.forks[r] for r in rows]

    def propose(self, rows: Sequence[int], states: Sequence[DecodeState]) -> DraftProposal:
        proposals = [self.forks[r].propose(state) for r, state in zip(rows, states, strict=True)]
        return proposals[0] if len(proposals) == 1 else DraftProposal.stack(proposals)

    def commit(self, states: Sequence[DecodeState], tree: DraftTree, result: VerifyResult,
               target_out: TargetOutput) -> None:
        if len(self.forks) == 1:
            self.forks[0].commit(states[0], tree, result, target_out)
            return
        for b, (fork, state) in enumerate(zip(self.forks, states, strict=True)):
            row = slice(b, b + 1)
            hidden = None if target_out.hidden is None else target_out.hidden[row]
            fork.commit(state, tree.select_rows([b]), VerifyResult(result.accepted_nodes[row], result.num_accepted[row],
                                                                   result.bonus_token[row]),
                        TargetOutput(logits=target_out.logits[row], hidden=hidden))


class Corrector(ABC):
    """Rescores a depth's candidates conditioned on each frontier node's path, for a whole frontier at once.

    A corrector may carry a per-node state of size ``state_size`` (a GRU hidden state, say); stateless
    correctors use size 0. ``child_logprobs`` scores the children of M frontier nodes in one batched call;
    ``advance`` computes the state of the children that a builder decided to keep (computing it for all
    M x K children would waste K times the work).
    """

    state_size: int = 0
    #: True when ``child_logprobs`` depends on the depth only, not on the frontier's tokens or states (the
    #: ``identity`` corrector): builders may then score every depth at once.
    path_independent: bool = False

    def init_state(self, proposal: DraftProposal) -> torch.Tensor:  # [B, 1, S]
        """State of the root (after consuming the root token)."""
        b = proposal.batch_size
        return torch.zeros(b, 1, self.state_size, device=proposal.tokens.device)

    @abstractmethod
    def child_logprobs(
        self,
        proposal: DraftProposal,
        depth: int,
        tokens: torch.Tensor,  # [B, M] int64, frontier node tokens (their depth is ``depth - 1``)
        state: torch.Tensor,  # [B, M, S] frontier node states
    ) -> torch.Tensor:  # [B, M, K] float32 log-probs of proposal.tokens[:, depth - 1] as children
        """Corrected log-probs of the depth's K candidates as children of each frontier node."""

    def advance(
        self,
        proposal: DraftProposal,
        depth: int,
        state: torch.Tensor,  # [B, M, S] states of the kept children's parents
        tokens: torch.Tensor,  # [B, M] int64 kept children's tokens (at ``depth``)
    ) -> torch.Tensor:  # [B, M, S] the kept children's states
        """State of each kept child; stateless correctors return an empty state."""
        return state


class TreeBuilder(ABC):
    """Turns a proposal into a draft tree, calling the corrector depth by depth or node by node."""

    @abstractmethod
    def build(self, proposal: DraftProposal, corrector: Corrector, ctx: RoundContext) -> DraftTree:
        """Return a valid tree rooted at ``proposal.root``."""


class Pruner(ABC):
    """Cuts a tree down to the verification budget, returning an ancestor-closed re-indexed subtree."""

    @abstractmethod
    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        """Return a valid subtree with at most ``budget`` nodes besides the root."""


class Verifier(ABC):
    """Decides which path of the tree to accept so that the output law equals the target's."""

    @abstractmethod
    def verify(
        self,
        tree: DraftTree,
        logits: torch.Tensor,  # [B, N, V] target logits after each node
        ctx: RoundContext,
    ) -> VerifyResult:
        """Accept a root-to-node path and emit a bonus token."""


@dataclass
class BuildContext:
    """What a component factory receives besides its own config."""

    pipeline: Any  # the validated PipelineConfig
    target: TargetModel | None = None  # None while the target itself is being built
    extras: dict[str, Any] = field(default_factory=dict)
