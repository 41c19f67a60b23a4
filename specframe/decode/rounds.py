"""One round of the decode loop for every in-flight row: draft, build, prune, budget, verify, commit.

::

    plan     = budget: auto's drafting rows and node counts      # from the last round's statistics; all rows
                                                               # draft under a fixed budget
    proposal = drafter.propose(drafting rows)                  # ONE call for the drafting rows
    tree     = pruner.prune(builder.build(proposal, corrector))  # batched over the drafting rows
    tree     = fit to each row's context; budget: auto keeps each row's planned k best nodes (no read)
    full     = the drafted rows' trees + root-only trees for the other rows, padded to one width   [B, N]
    out      = target.forward_tree(full)                       # ONE target forward
    result   = verifier.verify(full, out.logits)               # a plain round: the target's own draw
    outcome  = every row's path, counts and tokens in ONE device-to-host transfer (checked on the host)
    target.commit(full, result.accepted_nodes, outcome.paths)  # per-row commit from the host paths: no read
    states append their tokens in place (one host-to-device copy); drafter.commit(all rows)
    rows take their tokens, check stop strings and record the round

Host reads: the outcome is the round's one read for every verifier (none in build, prune or verify for the
built-in stages, `tests/core/test_host_reads.py`). `budget: auto` adds none: it plans the drafting rows and their
node counts before the round from the statistics after the last one (:meth:`AutoBudget.plan`), so the forward's
shape is known before drafting, and its drafted trees' sorted ``p`` ride along in the outcome's read.

Every random draw is keyed by the row's request seed and the position it predicts (:mod:`specframe.sampling.noise`),
so a row's tokens do not depend on its batch-mates, and with the WALK or greedy verifier they equal plain
decoding's for the seed. A single request is a batch of one.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import torch

from specframe.cost.auto_budget import RoundPlan
from specframe.decode.row import Row
from specframe.decode.session import Session
from specframe.errors import ContractError
from specframe.interfaces import DecodeState, RoundContext
from specframe.sampling import sample
from specframe.sampling.noise import TARGET, RoundNoise
from specframe.tree import DraftTree, check_tree
from specframe.tree.score_order import path_score_order
from specframe.tree.siblings import path_sibling_ranks
from specframe.types import DraftProposal, VerifyResult


def run_round(session: Session, rows: list[Row]) -> None:
    """Advance every row of ``rows`` (the rows of ``session.target``, in order) by one round."""
    st, cfg, clock = session.stages, session.settings, session.clock
    timed = clock.start_round()
    session.rounds += 1
    states = [row.state for row in rows]
    assert all(s is not None for s in states), "every row starts before its first round"
    noise = RoundNoise.for_rows([r.inputs.seed for r in rows], [r.root_position for r in rows],
                                session.target.device)
    drafting = [i for i, row in enumerate(rows) if cfg.drafts]
    rooms = [room_of(state, session.target.max_length) for state in states]  # type: ignore[arg-type]
    plan = None
    if drafting and session.auto is not None:  # decided before drafting, from the statistics after the last round
        plan = session.auto.plan([row.budget for row in rows], rooms)  # type: ignore[misc]
        drafting = plan.drafting
    extra = None
    t0 = clock()
    if drafting:
        sub_noise = noise if len(drafting) == len(rows) else noise.rows(drafting)
        ctx = RoundContext(budget=cfg.budget, sampling=cfg.sampling, noise=sub_noise, check=cfg.check_trees)
        assert session.drafter is not None, "a pipeline that drafts has drafter rows"
        proposal = session.drafter.propose(drafting, [states[i] for i in drafting])  # type: ignore[misc]
        t1 = clock()
        tree = st.tree_builder.build(proposal, st.corrector, ctx)
        t2 = clock()
        tree = fit_context(st.pruner.prune(tree, ctx), proposal, session.target.max_length,
                           [states[i] for i in drafting])  # type: ignore[misc]
        if plan is not None and session.auto is not None:  # each row's planned count of its best nodes: no read
            counts = [plan.counts[i] for i in drafting]
            tree, p_sorted = session.auto.keep(tree, counts)
            tree = replace(tree, row_nodes=tuple(k + 1 for k in counts))
            extra = session.auto.packed_profile(p_sorted, drafting, len(rows))
        full = merge_rows(tree, drafting, roots_of(states), len(rows))  # type: ignore[arg-type]
    else:
        full = DraftTree.root_only(roots_of(states))  # type: ignore[arg-type]
        t1 = t2 = t0
    t3 = clock()
    if cfg.check_trees:
        check_round_tree(full)
    if full.tokens.device != session.target.device:  # drafted on another device: the verifier needs it here
        full = full.to(session.target.device)
    out = session.target.forward_tree(full)
    t4 = clock()
    round_ctx = RoundContext(budget=cfg.budget, sampling=cfg.sampling, noise=noise, check=cfg.check_trees)
    result = st.verifier.verify(full, out.logits, round_ctx) if drafting else plain_step(out.logits, round_ctx)
    t5 = clock()
    outcome = RoundOutcome.read(full, result, extra)
    session.target.commit(full, result.accepted_nodes, outcome.paths)
    DecodeState.append_rows(states, outcome.emitted)  # type: ignore[arg-type]  # one copy; the drafter sees them
    if session.drafter is not None:
        session.drafter.commit(states, full, result, out)  # type: ignore[arg-type]
    t6 = clock()
    stage_ns = {"draft": t1 - t0, "build": t2 - t1, "prune": t3 - t2, "target": t4 - t3, "verify": t5 - t4,
                "commit": t6 - t5}
    stages = dict(stage_ns) if cfg.stage_timing and timed else None  # one dict per round, shared by the rows
    drafted = [False] * len(rows)
    for i in drafting:
        drafted[i] = True
    for i, row in enumerate(rows):  # a few integers per row (RoundLog), no object per row
        row.take_round(outcome.emitted[i], outcome.nodes[i], outcome.depths[i], outcome.accepted[i], drafted[i],
                       None if plan is None else plan.counts[i], stages, outcome.ranks[i],
                       outcome.end_has_children[i],
                       plain_reason(i, plan, drafting, outcome.nodes[i], rooms[i], cfg.drafts), outcome.orders[i])
        if session.alarm is not None:  # host counts this round has read already
            session.alarm.observe(outcome.nodes[i], outcome.accepted[i])
    if session.auto is not None and plan is not None:
        _observe(session, rows, plan, full, result, outcome, stage_ns if timed else None)


def plain_reason(row: int, plan: RoundPlan | None, drafting: list[int], nodes: int, room: int,
                 drafts: bool) -> str | None:
    """Why row ``row`` verified no draft node this round (None: it verified some), one of
    :data:`specframe.cost.reasons.PLAIN_REASONS`."""
    if nodes > 0:
        return None
    if not drafts:
        return "no_drafter"
    if row not in drafting:
        return plan.reasons[row] if plan is not None else "context_full"
    return "context_full" if room <= 0 else "drafter_refused"


def room_of(state: DecodeState, max_length: int | None) -> int:
    """The deepest draft node the row's context still holds (a large number without a context limit)."""
    return 1 << 30 if max_length is None else max_length - 1 - state.cached_len


def _observe(session: Session, rows: list[Row], plan: RoundPlan, full: DraftTree, result: VerifyResult,
             outcome: RoundOutcome, stage_ns: dict[str, int] | None) -> None:
    """Teach `budget: auto` what the round did: calibration from every drafted row, each row's own calibration and
    outlook from the round's read, and costs only from exactly timed rounds."""
    auto = session.auto
    assert auto is not None
    drafting = plan.drafting
    if drafting:
        index = torch.tensor(drafting, dtype=torch.long, device=full.tokens.device)
        auto.observe_tree(full.select_rows(index), result.accepted_nodes.index_select(0, index))
    stage_ms = {k: v / 1e6 for k, v in stage_ns.items()} if stage_ns is not None else {}
    ran = getattr(session.target, "forward_tokens", None) or full.batch_size * full.capacity  # what really ran
    auto.observe_round([row.budget for row in rows], plan, outcome.extra, outcome.nodes,  # type: ignore[misc]
                       outcome.accepted, stage_ms, ran)


def roots_of(states: list[DecodeState]) -> torch.Tensor:  # [B] int64
    """Every row's root token."""
    return torch.cat([s.root for s in states])


def plain_step(logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
    """The verdict of a root-only round: no draft to accept, the bonus drawn from the target's own law with the
    uniform plain decoding uses at that position."""
    b = logits.shape[0]
    u = None if ctx.sampling.greedy else ctx.noise.uniforms(TARGET, torch.zeros(b, dtype=torch.long))
    bonus = sample(logits[:, 0], ctx.sampling, u)  # [B]
    return VerifyResult(accepted_nodes=torch.zeros(b, 1, dtype=torch.long, device=logits.device),
                        num_accepted=torch.zeros(b, dtype=torch.long, device=logits.device), bonus_token=bonus)


def merge_rows(tree: DraftTree, drafting: list[int], roots: torch.Tensor, rows: int) -> DraftTree:
    """The round's tree ``[rows, N]``: the drafted rows' trees ``tree`` ``[R, N]`` at rows ``drafting`` and root-only
    trees (the root, then padding) elsewhere."""
    if len(drafting) == rows:
        return tree
    dev = tree.tokens.device
    n = tree.capacity
    index = torch.tensor(drafting, dtype=torch.long, device=dev)

    def fill(drafted: torch.Tensor, root: float | int | bool, pad: float | int | bool) -> torch.Tensor:
        out = torch.full((rows, n, *drafted.shape[2:]), pad, dtype=drafted.dtype, device=dev)
        out[:, 0] = root
        return out.index_copy(0, index, drafted)

    tokens = fill(tree.tokens, 0, 0)
    tokens[:, 0] = roots.to(dev)  # the drafted rows' roots are their own roots too
    # The draft laws at their own size [R, N, K] -> [rows, N, K]: the other rows get zero-probability laws.
    child_ids = None if tree.child_ids is None else fill(tree.child_ids, 0, 0)
    child_probs = None if tree.child_probs is None else fill(tree.child_probs, 0.0, 0.0)
    drafted = dict(zip(drafting, tree.row_nodes or (n,) * len(drafting), strict=True))
    return DraftTree(tokens=tokens, parent=fill(tree.parent, -1, -1), depth=fill(tree.depth, 0, 0),
                     logq=fill(tree.logq, 0.0, float("-inf")), score=fill(tree.score, 0.0, float("-inf")),
                     valid=fill(tree.valid, True, False), child_ids=child_ids, child_probs=child_probs,
                     child_vocab=tree.child_vocab, depth_bound=tree.depth_bound,
                     width_bound=tree.width_bound, row_nodes=tuple(drafted.get(b, 1) for b in range(rows)))


def fit_context(tree: DraftTree, proposal: DraftProposal, max_length: int | None,
                states: list[DecodeState]) -> DraftTree:
    """Drop nodes whose positions would run past the target's context window.

    A tree is never deeper than its proposal, so the common case is decided without reading the tree (no
    device synchronisation).
    """
    if max_length is None:
        return tree
    rooms = [max_length - 1 - s.cached_len for s in states]  # deepest allowed depth per row
    if proposal.depth <= min(rooms) or tree.max_depth <= min(rooms):
        return tree
    room = torch.tensor(rooms, dtype=torch.long, device=tree.depth.device).clamp(min=0)[:, None]  # [R, 1]
    return tree.subtree(tree.valid & (tree.depth <= room))


def check_round_tree(tree: DraftTree) -> None:
    problems = check_tree(tree)
    if problems:
        raise ContractError("a stage produced an invalid DraftTree:\n  " + "\n  ".join(problems),
                            stage="tree_builder")


class RoundOutcome:
    """What the host needs from a round, for every row, read in one device-to-host transfer and checked here."""

    def __init__(self, nodes: list[int], depths: list[int], paths: list[list[int]], emitted: list[list[int]],
                 ranks: list[list[int]] | None = None, end_has_children: list[bool] | None = None,
                 extra: list[list[int]] | None = None, orders: list[list[int]] | None = None) -> None:
        self.extra = extra  # [B, E] the caller's extra integers (budget: auto's sorted p), read with the rest
        self.nodes = nodes  # [B] draft nodes verified (root excluded)
        self.depths = depths  # [B] deepest valid node
        self.paths = paths  # [B] accepted node indices, root first (what the target commits)
        self.emitted = emitted  # [B] accepted path tokens, then the bonus
        self.accepted = [len(p) - 1 for p in paths]  # [B] draft tokens accepted (the bonus excluded)
        self.ranks = ranks or [[] for _ in paths]  # [B] sibling rank of each accepted node (root excluded)
        self.end_has_children = end_has_children or [False] * len(paths)  # [B] the path's last node has a child
        self.orders = orders or [[] for _ in paths]  # [B] score order of each accepted node (root excluded)

    @classmethod
    def read(cls, tree: DraftTree, result: VerifyResult, extra: torch.Tensor | None = None) -> RoundOutcome:
        """Pack every row's node count, depth, accepted count, bonus, path, path tokens, the path nodes' sibling
        ranks and child flags (:mod:`specframe.tree.siblings`), their score orders (:mod:`specframe.tree.score_order`)
        and ``extra`` ``[B, E]`` int64 (when given) into one
        tensor, read it once, and check the verifier's path on the host (root first, increasing, inside the tree,
        -1 padded)."""
        b = tree.batch_size
        shapes = (tuple(result.accepted_nodes.shape), tuple(result.num_accepted.shape), tuple(result.bonus_token.shape))
        if len(shapes[0]) != 2 or shapes[0][0] != b or shapes[1] != (b,) or shapes[2] != (b,):
            raise ContractError(f"the verifier returned accepted_nodes {shapes[0]}, num_accepted {shapes[1]} and "
                                f"bonus_token {shapes[2]} for a tree of {b} rows; expected [B, D + 1], [B] and [B]",
                                stage="verifier")
        dev = result.accepted_nodes.device
        nodes = result.accepted_nodes.long()  # [B, D + 1]
        width = int(nodes.shape[1])
        # Out-of-tree indices read a clamped node here and are refused by the check below.
        tokens = tree.tokens.to(dev).gather(1, nodes.clamp(0, tree.capacity - 1))  # [B, D + 1]
        depth = torch.where(tree.valid, tree.depth, torch.zeros_like(tree.depth)).amax(dim=1)  # [B]
        ranks, has_child = path_sibling_ranks(tree, nodes)  # [B, D + 1] each
        columns = [tree.num_nodes.to(dev)[:, None] - 1, depth.to(dev)[:, None], result.num_accepted.long()[:, None],
                   result.bonus_token.long()[:, None], nodes, tokens, ranks, has_child.long(),
                   path_score_order(tree, nodes)]
        if extra is not None:
            columns.append(extra.to(dev))
        packed = torch.cat(columns, dim=1).tolist()  # [B, 4 + 5 (D + 1) + E]: the round's one read
        paths, emitted, path_ranks, end_open, orders = [], [], [], [], []
        for b, row in enumerate(packed):
            path_row, token_row = row[4 : 4 + width], row[4 + width : 4 + 2 * width]
            rank_row, child_row = row[4 + 2 * width : 4 + 3 * width], row[4 + 3 * width : 4 + 4 * width]
            count = row[2] + 1
            path = path_row[:count]
            if not (path and path[0] == 0 and all(a < c for a, c in itertools.pairwise(path))
                    and path[-1] <= row[0] and all(v == -1 for v in path_row[count:])):
                raise ContractError(f"the verifier's accepted_nodes for row {b}, {path_row}, with num_accepted "
                                    f"{row[2]}, is not a root-first increasing path of the tree's {row[0] + 1} nodes "
                                    "padded with -1", stage="verifier")
            paths.append(path)
            emitted.append(token_row[1:count] + [row[3]])
            path_ranks.append(rank_row[1:count])
            end_open.append(bool(child_row[count - 1]))
            orders.append(row[4 + 4 * width + 1 : 4 + 4 * width + count])
        return cls(nodes=[r[0] for r in packed], depths=[r[1] for r in packed], paths=paths, emitted=emitted,
                   ranks=path_ranks, end_has_children=end_open, orders=orders,
                   extra=None if extra is None else [r[4 + 5 * width:] for r in packed])
