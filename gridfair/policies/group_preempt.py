"""Preemption to the group tree's entitlement (`--preempt group-fair`, with the `hdrf` order;
`--policy hdrf-fair`): a group below its entitlement takes room from the group most over its
own, siblings first.

H-DRF (`policies/hdrf.py`) only gives out free room: on a full pool, a group whose quota was
lent as surplus waits for the borrowers' jobs to end. This stage gives it back by vacating:

1. receivers: the groups whose own users wait and which hold less than their entitlement
   (`group_entitlement`: quota plus their fair part of the surplus, divided per resource),
   furthest below first, up to `RECEIVER_GROUPS`; of each, the user H-DRF would serve
   first, its jobs as `reclaim` and `fair` try theirs (`reclaim.first_move`);
2. victims: the groups whose own users run jobs and which hold at least their guarantee;
   the nearest in the tree first (the deepest common ancestor: a sibling before a cousin),
   then the furthest over their entitlement, up to `VICTIM_GROUPS`; of each, the youngest
   running jobs (least work lost), up to `VICTIM_CANDIDATES`, on whose machine the
   receiver's job fits once that job leaves;
2b. several victims on one machine, when no one job's room holds the receiver's job (its
   3-4 cpus on a machine of 1-cpu jobs) or the rule refuses each such move: the jobs a move
   may vacate are, of each of those victim groups, its `VICTIM_LOOKS` youngest vacatable
   jobs not vacated within the window and holding only resources the receiver's job asks
   for, taken by machine (the machines that could hold the job); on each machine, the
   fewest of them whose room, with what is free there, holds the job, then the least work
   lost, then submitted first (`victims.cheapest`); of the machines whose set the rule
   allows, the fewest victims, then the least work lost, then the machine's name. Cost:
   at most `VICTIM_GROUPS` x `VICTIM_LOOKS` jobs looked at, on as many machines at most,
   and a search on each machine among its candidates (bounded by `victims.SEARCH_STEPS`):
   never a pass over the pool, nor over a machine's every job;
3. the rule. Before the vacate, each group of the receiver's side (from its own users up to,
   not including, the deepest group on both paths, where the sides meet) holds less than its
   entitlement, and each group of the victim's side holds at least its guarantee (the product
   of the quotas on its path): a victim may be at or below its entitlement, and a move leaves
   it below its guarantee by less than the vacated job. The move is taken only when it lowers
   the distance from the entitlements, the sum over the division's leaves (each group's own
   users) of |dominant share held - entitled|, by more than `LEAST_DECREASE`: of the two
   leaves it changes, the receiver's gets closer to its entitlement by more than the victim's
   moves away from its own. The receiver's job uses every resource the vacated job frees (a
   GPU job is vacated only for another GPU job: a freed GPU nobody waiting uses would idle).
   The victim's job was not vacated, nor did the victim's side take room from the
   receiver's, within `WINDOW` seconds. A move of several jobs is held to the same rule as
   one: each victim's side as above, each of their groups holding at least its guarantee
   before each of its jobs leaves, its largest last (so it ends below its guarantee by less
   than one of its jobs, as with one victim); the distance over every leaf it changes falls;
   the receiver's job uses every resource each victim frees, and needs every victim (the
   set is the fewest that hold it).

Why each clause. Groups' jobs come in units of different sizes (one GPU job can be a quarter
of its group's dominant share where a cpu job of the sibling is a twentieth): a rule that
compares each side with its own entitlement, a victim required over it, lets the coarse group
lose every tie (live, Showcase 4: the GPU project held 3 GPUs of the 4 it was entitled to, the
fourth idle for 100 s, because the cpu department was 0.02 below its entitlement after the
third move). The distance counts the error both leaves make, so the fourth GPU moves when it
lowers the sum (0.25 closer for the GPU project, one cpu job's 0.06-0.11 further for the
other). While the entitlements do not change, the distance falls by more than `LEAST_DECREASE`
with every move and never goes below 0: moves stop, and no move is taken back (the move back
would raise the distance by what this one lowered). A vacated job rejoins its group's waiting
demand, which may change the entitlements: the window keeps the same job from being vacated
again, and two sides from trading room back and forth, while they settle (the daemon keeps
this memory from cycle to cycle: `export_state`). The guarantee keeps the victim's quota: a
group never gives room from under its quota. The daemon's safety rules
(`daemon.safety`) apply through the negotiator's guard, as for every stage. Each vacate and
allocation names the level and the figures (shares and entitlements before and after at the
level where the sides meet, the distance before and after).

Ties: the group listed first; among a group's jobs, the one started last, then submitted
first; among moves of several jobs, 2b's order. When a receiver finds no move, why is noted
(`group_refusals`: the daemon journals it once per change).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from gridfair.core.pool import CPUS, GPUS, MEMORY, Node, Pool, Task, UserState
from gridfair.core.stages import Decision, OrderPolicy, Preemption, PreemptPolicy
from gridfair.core.victims import cheapest, sizes
from gridfair.errors import InputError
from gridfair.policies.drf import resource_shares
from gridfair.policies.fair_preempt import moved, usage_on
from gridfair.policies.group_entitlement import LeafFigures, Part, division_of, entitlements
from gridfair.policies.group_refusals import Refusals, lacked_text, refusal
from gridfair.policies.hdrf import GroupNode, HdrfOrder
from gridfair.policies.owner_share import preemption_of
from gridfair.policies.ranking import RunningTasks
from gridfair.policies.reclaim import first_move

#: How many groups below their entitlement are tried, furthest below first.
RECEIVER_GROUPS = 4
#: How many groups over their entitlement are looked at, and how many of each one's jobs.
VICTIM_GROUPS = 4
VICTIM_CANDIDATES = 16
#: How many of a victim group's youngest jobs are looked at for those candidates.
VICTIM_LOOKS = 64
#: Slack on a share against an entitlement: float noise is neither below nor above.
EPSILON = 1e-9
#: The least fall of the distance from the entitlements a move must make (shares of the
#: pool): float noise is no fall, and moves that each lower it by this much stop.
LEAST_DECREASE = 1e-6
#: Seconds within which a vacated job is not vacated again, nor room moved back between the
#: same two sides (a vacated job's return to the waiting demand may move the entitlements).
WINDOW = 600.0

_VACATE = ("vacate {victim_job} of {victim_user} (group {victim_group}) on {machine} (group "
           "entitlement, level {level}): {victim_side} holds {victim_share:.4g} of the pool "
           "against an entitlement of {victim_entitlement:.4g}, {victim_share_after:.4g} "
           "after; {receiver_side} holds {receiver_share:.4g} against "
           "{receiver_entitlement:.4g}, {receiver_share_after:.4g} once {receiver_job} runs; "
           "distance from the entitlements {distance:.4g}, {distance_after:.4g} after")
_ALLOCATE = ("{receiver_job} of {receiver} (group {receiver_group}) onto {machine} (group "
             "entitlement, level {level}): {receiver_side} goes from {receiver_share:.4g} to "
             "{receiver_share_after:.4g} of the pool, entitled to {receiver_entitlement:.4g}; "
             "freed from {victim_side} ({victim_share:.4g} to {victim_share_after:.4g}, "
             "entitled to {victim_entitlement:.4g})")


def own_part(node: GroupNode) -> Part:
    """The part a group's own users make: the group itself when it is a leaf."""
    return Part(node, bool(node.subgroups))


def meeting(receiver: GroupNode, victim: GroupNode) -> GroupNode:
    """The deepest group on both paths."""
    on_path = set(map(id, receiver.path()))
    return next(node for node in victim.path() if id(node) in on_path)


def side(node: GroupNode, top: GroupNode) -> list[Part]:
    """The parts from `node`'s own users up to, not including, `top`, deepest first."""
    if node is top:
        return [Part(node, True)]
    parts = [Part(node, True)] if node.subgroups else []
    for group in node.path():
        if group is top:
            break
        parts.append(Part(group, False))
    return parts


class GroupFairPreempt(PreemptPolicy):
    """Room for a group below its entitlement from the nearest group over its own."""

    name = "group-fair"
    needs_order = HdrfOrder
    needs_order_text = "the H-DRF order"

    @classmethod
    def from_options(cls, options: Any, order: OrderPolicy) -> GroupFairPreempt:
        assert isinstance(order, HdrfOrder)  # needs_order
        return cls(order)

    def __init__(self, order: HdrfOrder) -> None:
        self.order = order
        # What was journaled of each receiver group's refusals: kept as the window is.
        self.refusals = Refusals()

    def attach(self, pool: Pool) -> None:
        self.pool = pool
        # By group: a group's youngest jobs are a victim group's candidates.
        self.running = RunningTasks(self.victim_key, owner=self.order.tree.group_of)
        self.division_users = -1
        self.division: list[tuple[GroupNode, list[Part]]] = []
        self.leaf_figures: dict[Part, LeafFigures] = {}
        # When each job was last vacated, and when each (giving side, taking side) last
        # moved room: the window's memory.
        self.vacated: dict[str, float] = {}
        self.gave: dict[tuple[str, str], float] = {}
        self.receiver_groups: list[str] = []

    def shares_of(self, usage: Sequence[float]) -> list[float]:
        """`usage`'s shares of the pool per resource the H-DRF order counts."""
        return resource_shares(usage, self.pool.capacity, self.order.counted)

    @staticmethod
    def victim_key(task: Task, node: Node | None = None) -> float:
        """Least work lost first: the run started last."""
        return -task.start_time

    def export_state(self, now: float) -> dict[str, Any]:
        """The window's memory, which the daemon saves after each cycle and restores into
        the next cycle's stage (`Stateful`): when each job was vacated, and when room moved
        from one side to another."""
        return {"policy": self.name, "time": now, "vacated": dict(self.vacated),
                "gave": [[giver, taker, when] for (giver, taker), when in self.gave.items()],
                "declined": dict(self.refusals.journaled)}

    def import_state(self, state: Mapping[str, Any], source: str = "state") -> None:
        """Restore the memory `export_state` saved."""
        if state.get("policy") != self.name:
            raise InputError(f"state is for policy {state.get('policy')!r}, not {self.name!r}",
                             source=source)
        try:
            self.vacated = {str(job): float(when) for job, when in state["vacated"].items()}
            self.gave = {(str(giver), str(taker)): float(when)
                         for giver, taker, when in state["gave"]}
            # A state saved before refusals were journaled has none.
            self.refusals.journaled = {str(group): list(signature) for group, signature
                                       in state.get("declined", {}).items()}
        except (KeyError, AttributeError, TypeError, ValueError) as error:
            raise InputError(f"state's window memory is malformed ({error})", source=source,
                             attribute="vacated") from None

    def task_started(self, task: Task, now: float) -> None:
        self.running.started(task)

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        self.running.stopped(task, node)

    def declined(self, now: float) -> Decision | None:
        """Why a group below its entitlement found no move in the cycle's last phase: the
        furthest below whose refusal changed since it was last journaled
        (`group_refusals`)."""
        return self.refusals.declined(self.name, self.receiver_groups)

    # ---------------------------------------------------------------- the rule
    def choose(self, now: float) -> Preemption | None:
        order = self.order
        self.refusals.clear()
        self.receiver_groups = []
        if order.tree.flat:
            return None
        root = order.tree_root()
        if self.division_users != len(order.group_of):  # a group may have its first user
            self.division_users = len(order.group_of)
            self.division = division_of(root)
        self.entitled, self.held = entitlements(root, self.division, self.shares_of,
                                                order.tree.none_accepts_surplus,
                                                self.leaf_figures, self.pool.generation)
        # Groups whose own users wait, below their entitlement, furthest below first; groups
        # at least at their guarantee whose own users run jobs, furthest over their
        # entitlement first; ties: listed first.
        below: list[tuple[float, int, GroupNode]] = []
        over: list[tuple[float, int, GroupNode]] = []
        for listed, node in enumerate(order.nodes.values()):
            part = own_part(node)
            entitled = self.entitled.get(part)
            if entitled is None:
                continue
            held = self.held[part]
            if held < entitled - EPSILON and len(node.ranking):
                below.append((held - entitled, listed, node))
            if held >= self.guaranteed(part) - EPSILON and any(user.running
                                                               for user in node.users.values()):
                over.append((entitled - held, listed, node))
        if not below:
            return None
        below.sort()
        self.receiver_groups = [node.name for _, _, node in below[:RECEIVER_GROUPS]]
        if not over:
            for _, _, node in below[:RECEIVER_GROUPS]:
                self._refuse(node, "none over", 0.0, None, {}, now)
            return None
        self.over = sorted(over)
        self.now = now
        for memory in (self.vacated, self.gave):
            for key in [key for key, when in memory.items() if when <= now - WINDOW]:
                del memory[key]
        self.victim_groups: dict[str, list[GroupNode]] = {}
        self.candidates: dict[tuple[str, tuple[float, float, float]], list[Task]] = {}
        # A receiver no victim group's side allows a move with is not tried: its jobs would
        # each be looked at, and set aside, for nothing.
        receivers = []
        for _, _, node in below[:RECEIVER_GROUPS]:
            if self._victim_groups_of(node):
                receivers.append(order.first_in(node, now))
            else:
                self._refuse_sides(node, now)
        return first_move(self.pool, receivers, self._choose_for, now, free_room_waits=True)

    # ---------------------------------------------------------- refusals
    def _refuse(self, receiver_node: GroupNode, clause: str, closeness: float,
                machine: Node | None, figures: dict[str, Any], now: float,
                receiver: Task | None = None) -> None:
        """Note why `receiver_node`'s job (its first user's next, by default) found no move;
        a group whose next job fits free room waits for nothing, and is not noted."""
        if receiver is None:
            user = self.order.first_in(receiver_node, now)
            receiver = self.pool.head(user) if user is not None else None
            if receiver is None or self.pool.best_node(receiver) is not None:
                return
            figures["receiver"] = user.name
        part = own_part(receiver_node)
        held, entitled = self.held[part], self.entitled[part]
        figures.update(receiver_job=receiver.id, receiver_group=receiver_node.name,
                       receiver_share=held, receiver_entitlement=entitled,
                       below=entitled - held, machine=machine.name if machine else None)
        self.refusals.note(receiver_node.name, refusal(clause, closeness, receiver, machine,
                                                       figures))

    def _refuse_sides(self, receiver_node: GroupNode, now: float) -> None:
        """Note why the nearest group of `over` is refused as a victim group of
        `receiver_node`'s (the first clause of `_sides_allow` that fails)."""
        nearest = sorted((-meeting(receiver_node, node).depth, rank, node)
                         for rank, (*_, node) in enumerate(self.over)
                         if node is not receiver_node)
        if not nearest:  # the receiver alone holds its guarantee with jobs running
            self._refuse(receiver_node, "none over", 0.0, None, {}, now)
            return
        victim_node = nearest[0][2]
        top = meeting(receiver_node, victim_node)
        receiver_side, victim_side = side(receiver_node, top), side(victim_node, top)
        why = next((f"{part.name} holds {self.held[part]:.4g}, at or over its entitlement "
                    f"{self.entitled[part]:.4g}" for part in receiver_side
                    if self.held[part] >= self.entitled[part] - EPSILON), None) \
            or next((f"{part.name} holds {self.held[part]:.4g}, below its guarantee "
                     f"{self.guaranteed(part):.4g}" for part in victim_side
                     if self.held[part] < self.guaranteed(part) - EPSILON), None) \
            or (f"{victim_side[-1].name} took room from {receiver_side[-1].name} within the "
                f"last {WINDOW:g} s")
        self._refuse(receiver_node, "sides", 0.0, None,
                     {"victim_group": victim_node.name, "why": why}, now)

    def _victim_groups_of(self, receiver_node: GroupNode) -> list[GroupNode]:
        """The victim groups tried for `receiver_node`'s users this phase: the nearest of
        `over` first (a sibling before a cousin), then the furthest over (`over`'s order:
        the sort is stable), up to `VICTIM_GROUPS`, whose sides the rule allows a move
        between whatever the jobs (the module docstring's step 3, its figures before)."""
        groups = self.victim_groups.get(receiver_node.name)
        if groups is None:
            nearest = sorted((node for *_, node in self.over if node is not receiver_node),
                             key=lambda node: -meeting(receiver_node, node).depth)
            groups = self.victim_groups[receiver_node.name] = [
                node for node in nearest[:VICTIM_GROUPS]
                if self._sides_allow(receiver_node, node)]
        return groups

    def _sides_allow(self, receiver_node: GroupNode, victim_node: GroupNode) -> bool:
        """Each group of the receiver's side holds less than its entitlement, each of the
        victim's side at least its guarantee, and the victim's side took no room from the
        receiver's within the window."""
        top = meeting(receiver_node, victim_node)
        receiver_side, victim_side = side(receiver_node, top), side(victim_node, top)
        return (all(self.held[part] < self.entitled[part] - EPSILON for part in receiver_side)
                and all(self.held[part] >= self.guaranteed(part) - EPSILON
                        for part in victim_side)
                and (receiver_side[-1].name, victim_side[-1].name) not in self.gave)

    @staticmethod
    def guaranteed(part: Part) -> float:
        """The product of the quotas on `part`'s path (its own users': their weight too)."""
        share = math.prod(group.weight for group in part.node.path())
        return share * part.node.members_weight if part.own else share

    def _choose_for(self, receiver_user: UserState, receiver: Task,
                    now: float) -> Preemption | None:
        pool = self.pool
        if pool.too_big(receiver) is not None:
            return None
        receiver_node = self.order.group_of[receiver_user.index]
        for victim_node in self._victim_groups_of(receiver_node):
            for victim in self._candidates(victim_node, receiver):
                if victim.id in self.vacated \
                        or not pool.fits_after_vacate(receiver, victim):  # another job of its size
                    continue
                figures = self._allowed(receiver_node, receiver, victim.node, (victim,))
                if not isinstance(figures, str):
                    return self._move(receiver_user, receiver, (victim,), figures, now)
        return self._several(receiver_user, receiver_node, receiver, now)

    def _several(self, receiver_user: UserState, receiver_node: GroupNode, receiver: Task,
                 now: float) -> Preemption | None:
        """The move of several jobs on one machine for `receiver`, when no one job's room
        holds it (or the rule refused every such move): on each candidate machine, the
        fewest of the jobs a move may vacate there (`_vacatable_by_machine`) whose room,
        with what is free, holds the job, then the least work lost (`victims.cheapest`); of
        the machines whose set the rule allows, the set of fewest jobs, then least work
        lost, then the machine first by name. None, and why noted (`_refuse`: the rule's
        refusal of the fewest jobs, else the machine that lacks least), if there is none.

        Cost: the victim groups' `VICTIM_LOOKS` youngest jobs each (at most `VICTIM_GROUPS`
        x `VICTIM_LOOKS` jobs, on as many machines at most) and a search on each machine
        among those of its jobs (bounded by `victims.SEARCH_STEPS`): never a pass over the
        pool, nor over a machine's every job."""
        pool = self.pool
        best: tuple[tuple[int, float, str], tuple[Task, ...], dict[str, Any]] | None = None
        refused: tuple[tuple[int, str], Node, tuple[Task, ...], str] | None = None
        lacking: tuple[tuple[float, str], Node, list[Task]] | None = None
        for node, allowed in self._vacatable_by_machine(receiver_node, receiver):
            # A machine needing more jobs than the best set so far cannot beat it.
            victims = cheapest(pool, receiver, node, allowed, now,
                               most=best[0][0] if best is not None else None)
            if victims is None:
                if best is not None:
                    continue
                lacks = self._lacks(receiver, node, allowed)
                if lacking is None or (lacks, node.name) < lacking[0]:
                    lacking = ((lacks, node.name), node, allowed)
                continue
            if not victims:  # the job fits free room there: the next allocation's
                continue
            cost = (len(victims), sum(pool.lost_work_if_vacated(task, now) for task in victims),
                    node.name)
            if best is not None and cost >= best[0]:
                continue
            allowed_move = self._allowed(receiver_node, receiver, node, victims)
            if isinstance(allowed_move, str):
                if refused is None or (len(victims), node.name) < refused[0]:
                    refused = ((len(victims), node.name), node, victims, allowed_move)
                continue
            best = (cost, victims, allowed_move)
        if best is not None:
            return self._move(receiver_user, receiver, best[1], best[2], now)
        figures: dict[str, Any] = {"receiver": receiver_user.name}
        if refused is not None:
            (count, _), node, victims, why = refused
            self._refuse(receiver_node, "rule", count, node, dict(
                figures, victims=", ".join(task.id for task in victims), why=why), now,
                receiver)
        elif lacking is not None:
            (lacks, _), node, allowed = lacking
            self._refuse(receiver_node, "room", lacks, node, dict(
                figures, victims=", ".join(task.id for task in allowed) or "none",
                lacked=lacked_text(self._short(receiver, node, allowed))), now, receiver)
        return None

    def _short(self, receiver: Task, node: Node, victims: Sequence[Task]) -> list[float]:
        """What `node` would lack of `receiver`'s cpus, memory and GPUs once `victims` left."""
        return [max(0.0, asked - free - math.fsum(sizes(task)[dimension] for task in victims))
                for dimension, (asked, free)
                in enumerate(zip(sizes(receiver), self.pool.room(node), strict=True))]

    def _lacks(self, receiver: Task, node: Node, victims: Sequence[Task]) -> float:
        """`_short` as the largest share of the pool it is of a resource."""
        pool = self.pool
        capacity = pool.capacity
        return max((part / capacity[index] for part, index
                    in zip(self._short(receiver, node, victims), (CPUS, MEMORY, GPUS),
                           strict=True)
                    if part > pool.fit_tolerance and capacity[index] > 0), default=0.0)

    def _move(self, receiver_user: UserState, receiver: Task, victims: tuple[Task, ...],
              figures: dict[str, Any], now: float) -> Preemption:
        """The preemption of `victims` for `receiver`, with the rule's `figures` (each
        vacate's own victim side's, `_allowed`), remembered in the window."""
        sides = figures.pop("sides")
        for victim in victims:
            self.vacated[victim.id] = now
        for victim in victims:
            self.gave[sides[victim.id]["victim_side"], sides[victim.id]["receiver_side"]] = now
        figures.update(receiver=receiver_user.name, receiver_job=receiver.id,
                       machine=victims[0].node.name)

        def figures_of(task: Task) -> dict[str, Any]:
            return {**figures, **sides[task.id], "victim_user": task.user,
                    "victim_job": task.id}

        return preemption_of(receiver, victims[0], victims[1:], figures_of, _VACATE, _ALLOCATE)

    def _vacatable_by_machine(self, receiver_node: GroupNode, receiver: Task
                              ) -> list[tuple[Node, list[Task]]]:
        """The jobs a move for `receiver` may vacate, one by one, by machine (the machines
        by name, that could hold the job): among the `VICTIM_LOOKS` youngest vacatable jobs
        of each victim group of `receiver_node`'s, those not vacated within the window and
        holding only resources the receiver's job asks for."""
        pool = self.pool
        tolerance = pool.fit_tolerance
        asked = sizes(receiver)
        found: dict[int, tuple[Node, list[Task]]] = {}
        holds: dict[int, bool] = {}
        for victim_node in self._victim_groups_of(receiver_node):
            for task in islice(pool.vacatable(self._youngest(victim_node)), VICTIM_LOOKS):
                node = task.node
                assert node is not None  # a running job is on its node
                fits = holds.get(node.index)
                if fits is None:
                    fits = holds[node.index] = all(
                        wanted - tolerance <= whole for wanted, whole
                        in zip(asked, (node.cpus, node.memory, node.gpus), strict=True)) \
                        and (pool.matcher is None or pool.matcher(receiver, node))
                if fits and task.id not in self.vacated \
                        and self._uses_freed(usage_on(receiver, node), usage_on(task, node)):
                    found.setdefault(node.index, (node, []))[1].append(task)
        return sorted(found.values(), key=lambda entry: entry[0].name)

    def _uses_freed(self, gained: Sequence[float], lost: Sequence[float]) -> bool:
        """The receiver's job asks for every counted resource the vacated job frees."""
        return not any(lost[r] > 0 and gained[r] <= 0 for r in self.order.counted)

    def _candidates(self, node: GroupNode, receiver: Task) -> list[Task]:
        """`node`'s youngest vacatable jobs whose leaving makes room for `receiver` on their
        machine, up to `VICTIM_CANDIDATES` among its `VICTIM_LOOKS` youngest: found once a
        phase for each size of receiver's job (no job starts or stops before the phase's
        move). Only those: the few machines with what a job asks for (GPUs) may run none of a
        group's youngest jobs."""
        key = (node.name, sizes(receiver))
        found = self.candidates.get(key)
        if found is None:
            pool = self.pool
            found = self.candidates[key] = list(islice(
                (task for task in islice(pool.vacatable(self._youngest(node)), VICTIM_LOOKS)
                 if pool.fits_after_vacate(receiver, task)), VICTIM_CANDIDATES))
        return found

    def _youngest(self, node: GroupNode) -> Iterator[Task]:
        """The running jobs of `node`'s own users, started last first."""
        return self.running.of(node.name)

    def _allowed(self, receiver_node: GroupNode, receiver: Task, node: Node,
                 victims: tuple[Task, ...]) -> dict[str, Any] | str:
        """The move's figures if the rule allows vacating `victims` on `node` for `receiver`
        (the module docstring's step 3; each victim group's sides before the move were
        checked by `_victim_groups_of`), else why not: the receiver's job uses every counted
        resource each victim's frees; each group of a victim's side holds at least its
        guarantee before each of its jobs leaves, its largest last (one job: before the
        move); and the distance from the entitlements, over the leaves the move changes
        (the receiver's own users and each victim group's), falls by more than
        `LEAST_DECREASE`. The figures give the receiver's side and, under "sides", each
        victim's: its group, its side at the level where the two meet, before and after."""
        gained = usage_on(receiver, node)
        share = self.order.user_share
        lost: dict[Part, list[float]] = {}  # what each part of a victim side loses
        largest: dict[Part, list[float]] = {}  # its largest vacated job
        tops: dict[str, tuple[GroupNode, GroupNode, list[Part]]] = {}
        for victim in victims:
            loss = usage_on(victim, node)
            if not self._uses_freed(gained, loss):
                return "it would free a resource the job does not ask for, which would idle"
            victim_node = self.order.group_of[self.pool.users[victim.user].index]
            top = meeting(receiver_node, victim_node)
            victim_side = side(victim_node, top)
            tops[victim.id] = (victim_node, top, victim_side)
            for part in victim_side:
                lost[part] = moved(lost.get(part, [0.0] * len(loss)), loss, 1.0)
                if part not in largest or share(loss) > share(largest[part]):
                    largest[part] = list(loss)
        for part, loss in lost.items():
            # Its largest job last: before it leaves, the part holds at least its guarantee.
            if self._after(part, moved(loss, largest[part], -1.0), -1.0) \
                    < self.guaranteed(part) - EPSILON:
                return (f"{part.name} would go below its guarantee of "
                        f"{self.guaranteed(part):.4g} before its last job left")
        receiver_own = own_part(receiver_node)
        leaves = [receiver_own, *(tops[victim.id][2][0] for victim in victims)]
        leaves = list(dict.fromkeys(leaves))  # each leaf once, in the victims' order
        distance = math.fsum(abs(self.held[leaf] - self.entitled[leaf]) for leaf in leaves)
        distance_after = math.fsum(
            [abs(self._after(receiver_own, gained, 1.0) - self.entitled[receiver_own])]
            + [abs(self._after(leaf, lost[leaf], -1.0) - self.entitled[leaf])
               for leaf in leaves[1:]])
        if distance_after > distance - LEAST_DECREASE:
            return (f"the distance from the entitlements would go from {distance:.4g} to "
                    f"{distance_after:.4g}, not lower")
        sides = {}
        for victim in victims:
            victim_node, top, victim_side = tops[victim.id]
            receiver_top, victim_top = side(receiver_node, top)[-1], victim_side[-1]
            sides[victim.id] = {
                "level": top.depth + 1, "victim_group": victim_node.name,
                "receiver_side": receiver_top.name, "victim_side": victim_top.name,
                "receiver_share": self.held[receiver_top],
                "receiver_share_after": self._after(receiver_top, gained, 1.0),
                "receiver_entitlement": self.entitled[receiver_top],
                "victim_share": self.held[victim_top],
                "victim_share_after": self._after(victim_top, lost[victim_top], -1.0),
                "victim_entitlement": self.entitled[victim_top],
                "victim_guarantee": self.guaranteed(victim_top)}
        return {**sides[victims[0].id], "receiver_group": receiver_node.name,
                "distance": distance, "distance_after": distance_after, "sides": sides}

    def _after(self, part: Part, change: Sequence[float], sign: float) -> float:
        used = part.node.own_used if part.own else part.node.used
        return self.order.user_share(moved(used, change, sign))
