"""The live tree (SDRF paper, section 6.3): elements kept in order of a priority that drifts
in time, by processing swap events between neighbours instead of re-sorting.

Every priority here is an exponential moving average seen through a max, so with one time
constant `tau` for all elements and the drift variable x = exp(-(t - T)/tau) (T the tree's
origin), each element's priority is a maximum of lines in x:

    p(t) = max_k (a_k + b_k x)        (piecewise linear and convex in x)

Time moving forward is x moving down towards 0. Two neighbours swap where their curves cross;
the crossings are found exactly from line intersections, so each pair of neighbours has at
most one pending swap event: the first x below the current one at which the right element
goes ahead of the left one. Events sit in a heap of x (largest first = earliest) with lazy
invalidation: an event carries its left element's stamp, bumped whenever that element's
successor or curve changes, so stale events are skipped when popped rather than searched for.

Advancing the clock pops only the events due since the last update. Inserting, removing or
re-curving an element costs O(log n) (a binary search over the elements' current values and
a constant number of crossing computations). When x would underflow (more than
`REBASE_AFTER` time constants since T) the tree re-bases: T moves to now, every line is
rescaled and the order rebuilt from scratch, O(n log n) but at most once per
`REBASE_AFTER * tau` seconds.

Order at a time t is by (p(t), rank, key) ascending: ties go to the smaller rank, a
number given with the curve (0 unless the stage says otherwise; it scales with x like the
lines' slopes, so ranks set at different times compare), then to the smaller key (the user's
`UserState.index`). A curve that touches its neighbour's at a single instant without crossing
it is not treated as a swap (the two are tied for that instant only).

`DecayingOrder` is the order stage built on it, shared by SDRF (commitments) and the
HTCondor priority (real user priority): per user, a vector of exponential moving averages
("levels") of something the user holds, each moving towards a target fixed between the user's
events, `level(t) = target + (level(t0) - target) exp(-(t - t0)/tau)`, committed in closed form
whenever the holdings change.
"""

from __future__ import annotations

import heapq
import math
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sortedcontainers import SortedList

from gridfair.core.pool import Pool, UserState
from gridfair.core.stages import OrderPolicy
from gridfair.errors import InputError
from gridfair.policies.drf import lead_figures

#: A line a + b x.
Line = tuple[float, float]

# Re-base after this many time constants: x = e^-50 ~ 2e-22 keeps every b x term well inside
# double precision while making re-bases rare.
REBASE_AFTER = 50.0
# Spacing of the integer order labels; a new element takes the midpoint of its neighbours'.
LABEL_GAP = 1 << 32
# Steps an element walks to its new place before the labels are searched instead.
WALK_LIMIT = 16
#: A user not in the pool whose levels are this close to a newcomer's is forgotten.
FORGOTTEN = 1e-6


def value_at(lines: Sequence[Line], x: float) -> float:
    """max_k (a_k + b_k x)."""
    count = len(lines)
    if count == 1:
        a, b = lines[0]
        return a + b * x
    if count == 2:  # SDRF's usual curve (two resources), without a generator
        (a1, b1), (a2, b2) = lines
        first, second = a1 + b1 * x, a2 + b2 * x
        return second if second > first else first  # as max(): the first of equals
    return max(a + b * x for a, b in lines)


def _crossings(lines: Sequence[Line], x_hi: float) -> list[float]:
    """Every x in (0, x_hi) where two of `lines` intersect, plus 0 and x_hi, descending."""
    points = {0.0, x_hi}
    for i, (a1, b1) in enumerate(lines):
        for a2, b2 in lines[i + 1:]:
            if b1 != b2:
                x = (a2 - a1) / (b1 - b2)
                if 0.0 < x < x_hi:
                    points.add(x)
    return sorted(points, reverse=True)


def upper_envelope(lines: Sequence[Line], x_hi: float) -> list[Line]:
    """The lines that are the maximum somewhere on (0, x_hi]: the others can never matter
    again, because x only decreases."""
    if len(lines) <= 1:
        return list(lines)
    if len(lines) == 2:
        # A line at or above the other at both ends of [0, x_hi] is so in between.
        (a1, b1), (a2, b2) = lines
        end1, end2 = a1 + b1 * x_hi, a2 + b2 * x_hi
        if a1 >= a2 and end1 >= end2:
            return [lines[0]]
        if a2 >= a1 and end2 >= end1:
            return [lines[1]]
        return list(lines)
    points = _crossings(lines, x_hi)
    kept: list[Line] = []
    # Between consecutive crossings the maximum is one line: find it at the midpoint.
    for hi, lo in zip(points, points[1:], strict=False):
        mid = (hi + lo) / 2
        best = max(lines, key=lambda line: line[0] + line[1] * mid)
        if best not in kept:
            kept.append(best)
    return kept


class _Element:
    __slots__ = ("key", "lines", "rank", "payload", "label", "prev", "next", "stamp")

    def __init__(self, key: int, lines: list[Line], rank: float, payload: Any) -> None:
        self.key = key
        self.lines = lines
        self.rank = rank
        self.payload = payload
        self.label = 0
        self.prev: _Element | None = None
        self.next: _Element | None = None
        self.stamp = 0


#: An element's predecessor and successor in the order.
Neighbours = tuple[_Element | None, _Element | None]


def _flip_point(left: _Element, right: _Element, x0: float) -> float | None:
    """The largest x <= x0 below which `right` goes ahead of `left`, or None if never.

    `left` is ahead at x0. The difference of the two curves is linear between consecutive
    line intersections, so its sign on each such piece is read at the piece's midpoint.
    """
    left_lines = left.lines
    right_lines = right.lines
    right_wins_ties = (right.rank, right.key) < (left.rank, left.key)
    if len(left_lines) == 1 and len(right_lines) == 1:
        # The common case, in closed form: g(x) = p_right - p_left = da + db x.
        a_left, b_left = left_lines[0]
        a_right, b_right = right_lines[0]
        db = b_right - b_left
        if db < 0:
            # g rises as x falls: `right` only drops further behind (a gap of the order of
            # rounding at x0 is the crossing just processed, not a new one).
            return None
        if db == 0:
            gap = a_right - a_left
            return x0 if gap < 0 or (gap == 0 and right_wins_ties) else None
        root = (a_left - a_right) / db
        if root >= x0:
            return x0
        return root if root > 0 else None
    points = _crossings(left_lines + right_lines, x0)
    for hi, lo in zip(points, points[1:], strict=False):
        mid = (hi + lo) / 2
        gap = value_at(right_lines, mid) - value_at(left_lines, mid)
        if gap < 0 or (gap == 0 and right_wins_ties):
            return hi
    return None


class LiveTree:
    """Elements (int key, payload) ordered by a drifting priority, with swap events.

    Curves are given as lines in the drift of the time they are set: `set(key, lines, now)`
    means p(t) = max_k (a_k + b_k exp(-(t - now)/tau)).
    """

    def __init__(self, tau: float) -> None:
        if not tau > 0 or math.isinf(tau):
            raise ValueError(f"the time constant must be positive and finite, not {tau!r}")
        self.tau = tau
        self.origin = 0.0  # T
        self.time = 0.0
        self.x = 1.0
        self.swaps = 0  # swap events processed
        self.rebases = 0
        self._elements: dict[int, _Element] = {}
        self._labels = SortedList()
        self._at_label: dict[int, _Element] = {}
        self._head: _Element | None = None
        self._events: list[tuple[float, int, _Element, int]] = []
        self._event_seq = 0

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self._elements)

    def __contains__(self, key: int) -> bool:
        return key in self._elements

    def first(self, now: float) -> Any | None:
        """The payload of the element of least priority at `now`."""
        if now > self.time:  # `advance`'s own test, made here: this runs per allocation
            self.advance(now)
        head = self._head
        return head.payload if head is not None else None

    def value(self, key: int, now: float) -> float:
        """The priority of element `key` at `now` (the tree's clock is not moved)."""
        return value_at(self._elements[key].lines, self._x_at(now))

    def runner_up(self, now: float) -> tuple[Any | None, float | None]:
        """The payload of the second element at `now` and its priority, or (None, None)."""
        self.advance(now)
        head = self._head
        if head is None or head.next is None:
            return None, None
        return head.next.payload, value_at(head.next.lines, self.x)

    def ordered(self, now: float) -> Iterator[Any]:
        """Payloads in priority order at `now`."""
        self.advance(now)
        element = self._head
        while element is not None:
            yield element.payload
            element = element.next

    # ---------------------------------------------------------------- updates
    def set(self, key: int, lines: Sequence[Line], now: float, payload: Any,
            rank: float = 0.0) -> None:
        """Insert element `key`, or give it a new curve (and tie-break `rank`, in the drift
        since `now` like the lines' slopes), as of time `now`."""
        scale = self.scale(now)
        self.place(key, [(a, b * scale) for a, b in lines], payload, rank * scale)

    def scale(self, now: float) -> float:
        """Move the clock to `now` and return 1/x: a slope (or rank) in the drift since `now`
        times this is in the drift since the origin, as `place` takes it."""
        if now > self.time:
            self.advance(now)
        return 1.0 / self.x

    def place(self, key: int, lines: list[Line], payload: Any, rank: float = 0.0) -> None:
        """`set` at the tree's time, for lines and rank already in the drift since the origin
        (scaled by `scale()`): a caller that computes its lines per event scales them as it
        makes them, instead of having them copied here."""
        x = self.x
        if len(lines) > 1:
            lines = upper_envelope(lines, x)
        element = self._elements.get(key)
        if element is None:
            element = self._elements[key] = _Element(key, lines, rank, payload)
            self._link(element)
            return
        element.lines = lines
        element.rank = rank
        element.payload = payload
        before, after = element.prev, element.next
        value = value_at(lines, x)
        # Still between its neighbours (a small change, the common case)? Then only the two
        # pending swaps that involve it change. Order is by (value, rank, key), the tuples
        # built only on equal values.
        if before is not None:
            other = value_at(before.lines, x)
            still = other < value or (other == value and (before.rank, before.key) < (rank, key))
        else:
            still = True
        if still and after is not None:
            other = value_at(after.lines, x)
            still = value < other or (value == other and (rank, key) < (after.rank, after.key))
        if still:
            if before is not None:
                self._schedule(before, x)
            self._schedule(element, x)
            return
        neighbours = self._walk(element, (value, rank, key), x)
        self._unlink(element)
        self._link(element, neighbours)

    def remove(self, key: int, now: float) -> None:
        """Take element `key` out (no effect if absent)."""
        if key in self._elements:
            self.advance(now)  # first: its pending swaps move its neighbours too
            self._unlink(self._elements.pop(key))

    def advance(self, now: float) -> None:
        """Move the clock to `now`, processing the swaps due. The clock never goes back."""
        if now <= self.time:
            return
        if (now - self.origin) / self.tau > REBASE_AFTER:
            self._rebase(now)
            return
        x = math.exp(-(now - self.origin) / self.tau)
        events = self._events
        while events and -events[0][0] > x:
            neg_x, _, left, stamp = heapq.heappop(events)
            if left.stamp != stamp or left.key not in self._elements:
                continue
            self._swap_with_next(left, -neg_x)
        self.time = now
        self.x = x

    # -------------------------------------------------------------- internals
    def _x_at(self, now: float) -> float:
        return math.exp(-(max(now, self.time) - self.origin) / self.tau)

    def _swap_with_next(self, left: _Element, x_event: float) -> None:
        right = left.next
        assert right is not None
        before, after = left.prev, right.next
        # Relink before <-> right <-> left <-> after; the labels follow the positions.
        right.prev, right.next = before, left
        left.prev, left.next = right, after
        if before is not None:
            before.next = right
        else:
            self._head = right
        if after is not None:
            after.prev = left
        left.label, right.label = right.label, left.label
        self._at_label[left.label] = left
        self._at_label[right.label] = right
        self.swaps += 1
        if before is not None:
            self._schedule(before, x_event)
        self._schedule(right, x_event)
        self._schedule(left, x_event)

    def _schedule(self, left: _Element, x0: float) -> None:
        """(Re)compute the pending swap of `left` with its successor, from x0 down."""
        left.stamp += 1
        right = left.next
        if right is None:
            return
        x_flip = _flip_point(left, right, x0)
        if x_flip is not None:
            self._event_seq += 1
            heapq.heappush(self._events, (-x_flip, self._event_seq, left, left.stamp))

    def _position(self, element: _Element) -> int:
        """Index at which `element` goes in the current order (binary search on values)."""
        x = self.x
        target = (value_at(element.lines, x), element.rank, element.key)
        labels = self._labels
        at_label = self._at_label
        lo, hi = 0, len(labels)
        while lo < hi:
            mid = (lo + hi) // 2
            other = at_label[labels[mid]]
            if (value_at(other.lines, x), other.rank, other.key) < target:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _walk(self, element: _Element, place: tuple, x: float) -> Neighbours | None:
        """`element`'s neighbours at its new `place`, walking from where it is (a user's own
        event moves it past few others), or None after `WALK_LIMIT` steps."""
        before, after = element.prev, element.next
        for _ in range(WALK_LIMIT):
            if before is not None and place < (value_at(before.lines, x), before.rank,
                                               before.key):
                before, after = before.prev, before
            elif after is not None and (value_at(after.lines, x), after.rank,
                                        after.key) < place:
                before, after = after, after.next
            else:
                return before, after
        return None

    def _link(self, element: _Element, neighbours: Neighbours | None = None) -> None:
        """Put `element` between `neighbours`, or where a search of the labels places it."""
        labels = self._labels
        at_label = self._at_label
        if neighbours is None:
            index = self._position(element)
            after = at_label[labels[index]] if index < len(labels) else None
            before = at_label[labels[index - 1]] if index > 0 else None
        else:
            before, after = neighbours
        if before is None and after is None:
            label = 0
        elif before is None:
            label = after.label - LABEL_GAP
        elif after is None:
            label = before.label + LABEL_GAP
        else:
            label = (before.label + after.label) // 2
            if label == before.label:
                self._relabel()
                label = (before.label + after.label) // 2
        element.label = label
        labels.add(label)
        at_label[label] = element
        element.prev, element.next = before, after
        if before is not None:
            before.next = element
            self._schedule(before, self.x)
        else:
            self._head = element
        if after is not None:
            after.prev = element
        self._schedule(element, self.x)

    def _unlink(self, element: _Element) -> None:
        element.stamp += 1  # its pending event is void
        self._labels.remove(element.label)
        del self._at_label[element.label]
        before, after = element.prev, element.next
        if before is not None:
            before.next = after
        else:
            self._head = after
        if after is not None:
            after.prev = before
        if before is not None:
            self._schedule(before, self.x)
        element.prev = element.next = None

    def _relabel(self) -> None:
        """Spread the labels out again (rare: only after ~32 inserts into one gap)."""
        self._labels.clear()
        self._at_label.clear()
        element = self._head
        label = 0
        while element is not None:
            element.label = label
            self._labels.add(label)
            self._at_label[label] = element
            label += LABEL_GAP
            element = element.next

    def _rebase(self, now: float) -> None:
        """Move the origin to `now`: rescale the lines and rebuild the order and events."""
        x = math.exp(-(now - self.origin) / self.tau)  # may underflow to 0: the limit is exact
        elements = list(self._elements.values())
        self.origin = self.time = now
        self.x = 1.0
        self.rebases += 1
        self._events.clear()
        self._labels.clear()
        self._at_label.clear()
        self._head = None
        for element in elements:
            element.lines = upper_envelope([(a, b * x) for a, b in element.lines], 1.0)
            element.rank *= x
            element.stamp += 1
        elements.sort(key=lambda element: (value_at(element.lines, 1.0), element.rank,
                                           element.key))
        before = None
        for position, element in enumerate(elements):
            element.label = position * LABEL_GAP
            self._labels.add(element.label)
            self._at_label[element.label] = element
            element.prev, element.next = before, None
            if before is not None:
                before.next = element
            else:
                self._head = element
            before = element
        for element in elements:
            self._schedule(element, 1.0)


class LazyFigures(Mapping[str, Any]):
    """A decision's figures, computed on first read from values frozen when it was made.

    The simulator makes one decision per task and reads few reasons, so `why()` only
    freezes references (O(1)) and leaves the arithmetic and formatting for later.
    """

    __slots__ = ("_compute", "_figures")

    def __init__(self, compute: Callable[[], dict[str, Any]]) -> None:
        self._compute: Callable[[], dict[str, Any]] | None = compute
        self._figures: dict[str, Any] | None = None

    def _get(self) -> dict[str, Any]:
        if self._figures is None:
            assert self._compute is not None
            self._figures = self._compute()
            self._compute = None
        return self._figures

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


class _Account:
    """One user's levels as of `since`, and the target they decay towards."""

    __slots__ = ("level", "target", "since", "basis", "inputs")

    def __init__(self, level: list[float], target: list[float], since: float,
                 basis: tuple, inputs: Any = None) -> None:
        self.level = level
        self.target = target
        self.since = since
        self.basis = basis  # what `target` was computed from; a new basis commits the levels
        self.inputs = inputs  # what of the user's state `basis` was computed from


class DecayingOrder(OrderPolicy):
    """An order stage over per-user exponential averages, kept in a `LiveTree`.

    Subclasses say what a user's levels decay towards (`basis`, `target`), how a level is
    settled when committed (`settle`), and the priority curve (`curve`). The levels are the
    state a daemon persists: `export_state` / `import_state`.
    """

    #: Name of the levels in exported state ("commitments", "priorities").
    state_name = "levels"
    #: How many levels each user has.
    level_size = 1
    #: The head of `why()`'s sentence, over `describe()`'s figures and "priority".
    why_template = "free slot to {user}: least priority {priority:.4g}, "

    def __init__(self, tau: float) -> None:
        self.tau = tau

    # ------------------------------------------------------------ subclass hooks
    def inputs(self, user: UserState) -> Any:
        """The part of the user's state its basis is computed from (cheap to compare): when
        it has not changed since the last event, nothing else is recomputed."""
        return tuple(user.usage)

    @abstractmethod
    def basis(self, user: UserState) -> tuple:
        """The user's holdings (and anything else its target depends on), hashable."""

    @abstractmethod
    def target(self, user: UserState, basis: tuple) -> list[float]:
        """What the levels move towards while `basis` holds."""

    @abstractmethod
    def initial_level(self) -> list[float]:
        """Levels of a user never seen before."""

    def settle(self, level: list[float]) -> list[float]:
        """A committed level (a floor, for HTCondor's priority)."""
        return level

    def idle_target(self) -> list[float]:
        """What the levels of a user with nothing in the pool decay towards."""
        return self.initial_level()

    @abstractmethod
    def curve(self, user: UserState, basis: tuple, level: list[float], target: list[float],
              scale: float = 1.0) -> list[Line]:
        """Priority lines a + b x in x = exp(-(t - now)/tau), given the levels at now, each
        slope b multiplied by `scale` (the live tree's, `LiveTree.scale`)."""

    @abstractmethod
    def describe(self, basis: tuple, level: list[float]) -> dict[str, Any]:
        """The figures behind a user's priority, from its basis and levels at some time."""

    def rank(self, basis: tuple, level: list[float], target: list[float]) -> float:
        """Tie-break between equal priorities, lower first, given the levels at now (it must
        scale like a slope in x: `LiveTree.set`); 0 leaves ties to the user seen first."""
        return 0.0

    def targets_moved(self) -> bool:
        """Whether every user's target may have changed since the last call (capacity,
        entitlements); checked on an event after the pool's capacity or users changed."""
        return False

    def extra_state(self) -> dict[str, Any]:
        """Parameters exported with the levels, checked on import."""
        return {}

    # -------------------------------------------------------------- the stage
    def attach(self, pool: Pool) -> None:
        self.pool = pool
        self.tree = LiveTree(self.tau)
        self.first = self.tree.first  # one call less per allocation step
        # Levels are settled on commit only when a subclass floors them (one call less per
        # event otherwise).
        self._settles = type(self).settle is not DecayingOrder.settle
        self._generation = -1  # the pool's generation when targets were last checked
        self.accounts: dict[str, _Account] = {}
        self._pending: dict[str, tuple[list[float], float]] = {}

    def levels(self, user: UserState, now: float) -> list[float]:
        """The user's levels at `now` (closed form, Eq. 6 style)."""
        account = self.accounts.get(user.name)
        if account is None:
            return self.initial_level()
        return self._level_at(account, now)

    def _level_at(self, account: _Account, now: float) -> list[float]:
        if now <= account.since:  # just committed (or a set-up event at an earlier time)
            return account.level
        decay = math.exp(-(now - account.since) / self.tau)
        # Each target t becomes t + (c - t) decay, c its level: a plain loop, as this runs on
        # every event (a comprehension over zip costs twice as much for two levels).
        level = account.target[:]
        for position, committed in enumerate(account.level):
            target = level[position]
            level[position] = target + (committed - target) * decay
        return level

    def _account(self, user: UserState, now: float, recheck: bool = False) -> _Account | None:
        """Bring the user's account up to `now`: the account if its priority curve changed,
        else None.

        Most events (a submit, a block) leave the inputs as they were: then the basis is not
        recomputed, unless `recheck` (capacity or entitlements moved)."""
        account = self.accounts.get(user.name)
        inputs = self.inputs(user)
        if account is not None and not recheck and account.inputs == inputs:
            return None
        basis = self.basis(user)
        if account is None:
            target = self.target(user, basis)
            level, since = self._pending.pop(user.name, (self.initial_level(), now))
            account = self.accounts[user.name] = _Account(level, target, since, basis, inputs)
            return account
        account.inputs = inputs
        if basis == account.basis:
            return None
        level = self._level_at(account, now)
        account.level = self.settle(level) if self._settles else level
        account.since = now
        account.basis = basis
        account.target = self.target(user, basis)
        return account

    def _place(self, user: UserState, now: float, changed: _Account | None) -> None:
        """Put the user in the tree with its curve as of `now` (`changed`: its account, when
        the curve changed), or take it out if it does not wait."""
        tree = self.tree
        if not user.active:
            tree.remove(user.index, now)
            return
        account = changed
        if account is None:
            if user.index in tree:
                return
            account = self.accounts[user.name]
        level = self._level_at(account, now)
        basis, target = account.basis, account.target
        scale = tree.scale(now)
        tree.place(user.index, self.curve(user, basis, level, target, scale), user,
                   self.rank(basis, level, target) * scale)

    def user_changed(self, user: UserState, now: float) -> None:
        time = self.tree.time
        if now < time:  # set-up events come at time 0
            now = time
        pool = self.pool
        if pool.generation != self._generation:  # targets move only with capacity or users
            self._generation = pool.generation
            if self.targets_moved():
                for other in pool.users.values():
                    self._place(other, now, self._account(other, now, recheck=True))
        self._place(user, now, self._account(user, now))

    def first(self, now: float) -> UserState | None:
        return self.tree.first(now)  # `attach` binds the tree's own in its place

    def priority(self, user: UserState, now: float) -> float:
        """The user's priority at `now` (lower goes first)."""
        if user.index in self.tree:
            return self.tree.value(user.index, now)
        account = self.accounts.get(user.name)
        if account is None:
            self._account(user, now)
            account = self.accounts[user.name]
        # The curve is in the drift since now, so now is x = 1.
        return value_at(self.curve(user, account.basis, self._level_at(account, now),
                                   account.target), 1.0)

    def runner_up(self, now: float) -> tuple[UserState | None, float | None]:
        """The user who would go after the first one, and its priority."""
        return self.tree.runner_up(now)

    def figures(self, user: UserState, now: float) -> dict[str, Any]:
        """The user's priority and the figures behind it, at `now`."""
        self._account(user, now)
        account = self.accounts[user.name]
        return {"user": user.name, "priority": self.priority(user, now),
                **self.describe(account.basis, self._level_at(account, now))}

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        runner, runner_priority = self.runner_up(now)
        priority = self.priority(user, now)
        account = self.accounts[user.name]
        # Freeze the account as it is now: commits replace its lists, never mutate them.
        frozen = _Account(account.level, account.target, account.since, account.basis)
        tail, _ = lead_figures(priority, runner, runner_priority)

        def compute() -> dict[str, Any]:
            return {"user": user.name, "priority": priority,
                    **self.describe(frozen.basis, self._level_at(frozen, now)),
                    **lead_figures(priority, runner, runner_priority)[1]}

        return self.why_template + tail, LazyFigures(compute)

    def key_figures(self, user: UserState, now: float) -> dict[str, Any]:
        figures = self.figures(user, now)
        del figures["user"]
        return figures

    # ------------------------------------------------------------ persistence
    def export_state(self, now: float) -> dict[str, Any]:
        """The levels of every user at `now`, as a plain dict (JSON-ready)."""
        levels = {name: self.settle(self._level_at(account, now))
                  for name, account in self.accounts.items()}
        # Users imported but not in this pool hold nothing: their levels decay as such a
        # user's do, and once back to a newcomer's the user is dropped, so the state holds
        # the users of recent pools, not every one ever seen.
        initial, idle = self.initial_level(), self.idle_target()
        for name, (level, since) in self._pending.items():
            decay = math.exp(-max(now - since, 0.0) / self.tau)
            settled = self.settle([target + (value - target) * decay
                                   for value, target in zip(level, idle, strict=True)])
            if any(abs(value - first) > FORGOTTEN
                   for value, first in zip(settled, initial, strict=True)):
                levels[name] = settled
        return {"policy": self.name, "time": now, "tau": self.tau, **self.extra_state(),
                self.state_name: levels}

    def import_state(self, state: Mapping[str, Any], source: str = "state") -> None:
        """Restore levels exported by `export_state` (from a daemon's previous run)."""
        if state.get("policy") != self.name:
            raise InputError(f"state is for policy {state.get('policy')!r}, not {self.name!r}",
                             source=source)
        for key, expected in self.extra_state().items():
            if state.get(key) != expected:
                raise InputError(f"state has {key} = {state.get(key)!r}, this policy "
                                 f"{expected!r}", source=source, attribute=key)
        time = state.get("time")
        if not isinstance(time, int | float) or not math.isfinite(time):
            raise InputError(f"state time {time!r} is not a number", source=source,
                             attribute="time")
        levels = state.get(self.state_name)
        if not isinstance(levels, Mapping):
            raise InputError(f"state has no {self.state_name} mapping", source=source,
                             attribute=self.state_name)
        size = self.level_size
        restored: dict[str, list[float]] = {}
        for name, values in levels.items():
            if not (isinstance(values, list) and len(values) == size and all(
                    isinstance(v, int | float) and math.isfinite(v) and v >= 0 for v in values)):
                raise InputError(f"{self.state_name} of user {name!r} must be {size} finite "
                                 f"numbers >= 0, not {values!r}", source=source,
                                 attribute=self.state_name)
            restored[name] = [float(v) for v in values]
        for name, level in restored.items():
            user = self.pool.users.get(name)
            if user is None:
                self._pending[name] = (level, float(time))
                continue
            self._account(user, time)
            account = self.accounts[name]
            account.level, account.since = level, float(time)
            self._place(user, max(float(time), self.tree.time), account)
