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

Ties that last cost one event, not one per tie: HTCondor's idle users all sit at the priority
floor, one line, in tie-break order, and a user decaying onto it (a job ended) or rising off it
(a job started) would pass them one swap at a time, so the events would grow with the idle
users. An event whose passing element meets a run of elements on one line from then on
(`_tail`) moves it past every one it passes at once (`_jump`): the run is galloped then
bisected over the labels, O(log run) comparisons, and the element moved by one list deletion
and insertion. The order after it is the one the swaps would give.

Advancing the clock pops only the events due since the last update. Inserting, removing or
re-curving an element costs O(log n) comparisons (a binary search over the elements' current
values, a constant number of crossing computations) and a move of the labels after it in one
flat list (as `ranking.UserRanking`: a memory move, cheap at the thousands of users of a
pool). When x would underflow (more than
`REBASE_AFTER` time constants since T) the tree re-bases: T moves to now, every line is
rescaled and the order rebuilt from scratch, O(n log n) but at most once per
`REBASE_AFTER * tau` seconds.

Order at a time t is by (p(t), rank, key) ascending: ties go to the smaller rank, a
number given with the curve (0 unless the stage says otherwise; it scales with x like the
lines' slopes, so ranks set at different times compare), then to the smaller key (the user's
`UserState.index`). A curve that touches its neighbour's at a single instant without crossing
it is not treated as a swap (the two are tied for that instant only).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from typing import Any

#: A line a + b x.
Line = tuple[float, float]

# Re-base after this many time constants: x = e^-50 ~ 2e-22 keeps every b x term well inside
# double precision while making re-bases rare.
REBASE_AFTER = 50.0
# Spacing of the integer order labels; a new element takes the midpoint of its neighbours'.
LABEL_GAP = 1 << 32
# Steps an element walks to its new place before the labels are searched instead.
WALK_LIMIT = 16


def value_at(lines: Sequence[Line], x: float) -> float:
    """max_k (a_k + b_k x)."""
    count = len(lines)
    if count == 1:
        a, b = lines[0]
        return a + b * x
    if count == 2:  # SDRF's usual curve (two resources), without a generator
        # Line by line, not `(a1, b1), (a2, b2) = lines`: compiled, unpacking a Sequence
        # goes through the iterator protocol.
        a1, b1 = lines[0]
        a2, b2 = lines[1]
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
        a1, b1 = lines[0]  # line by line, as in `value_at`
        a2, b2 = lines[1]
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


def _tail(element: _Element, x0: float) -> Line | None:
    """The one line that is `element`'s curve on all of (0, x0), or None if it is not one
    line there. The line of largest a (then b) is the curve near 0; it is so up to x0 if no
    steeper line crosses it below x0 (the crossing computed as `_crossings` does, so that an
    event at a crossing finds the line it leads onto)."""
    lines = element.lines
    if len(lines) == 1:
        return lines[0]
    tail = max(lines)
    a_tail, b_tail = tail
    for a, b in lines:
        if b > b_tail and (a_tail - a) / (b - b_tail) < x0:
            return None
    return tail


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
        # The labels in order: a flat sorted list (a tree holds a few to a few thousand
        # users, where inserting into one list beats a `SortedList`, which compiled code
        # would also call as interpreted Python).
        self._labels: list[int] = []
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
        self.swaps += 1
        if self._jump(left, right, x_event):
            return
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
        if before is not None:
            self._schedule(before, x_event)
        self._schedule(right, x_event)
        self._schedule(left, x_event)

    def _jump(self, left: _Element, right: _Element, x: float) -> bool:
        """At the swap of `left` and `right` due at x: when the one that passes the other
        meets a run of elements on the same line from x on (a tie that lasts: idle users at
        HTCondor's priority floor), move it past every one of them it passes in one event,
        to its place found by a search, instead of one swap per element. Whether it moved."""
        labels = self._labels
        at_label = self._at_label
        twin = _tail(left, x)
        if twin is not None:  # `right` passes `left`: and the twins before it?
            index, passed = self._twin_run(left.prev, -1, right, twin, x)
            if passed:
                self._unlink(right, x)
                target = index - passed  # the element that stays ahead of `right`
                ahead = at_label[labels[target]] if target >= 0 else None
                self._link(right, (ahead, at_label[labels[target + 1]]), x)
                return True
        twin = _tail(right, x)
        if twin is not None:  # `left` passes `right`: and the twins after it?
            index, passed = self._twin_run(right.next, 1, left, twin, x)
            if passed:
                self._unlink(left, x)  # the run, `right` first, moves one place ahead
                target = index + passed - 1  # the element that stays behind `left`
                behind = at_label[labels[target]] if target < len(labels) else None
                self._link(left, (at_label[labels[target - 1]], behind), x)
                return True
        return False

    def _twin_run(self, first: _Element | None, step: int, mover: _Element, twin: Line,
                  x: float) -> tuple[int, int]:
        """`first`'s index and how many elements from it on, going `step` (-1 towards the
        head, +1 away), `mover` passes at x as a run of elements on the line `twin` (0 if it
        does not pass `first`). Those it passes are a prefix of the run (in tie-break order:
        `mover` passes all of it, or those on one side of its own tie-break), so the run is
        galloped then bisected: O(log run) comparisons."""
        if first is None or not self._passes(first, step, mover, twin, x):
            return 0, 0
        labels = self._labels
        at_label = self._at_label
        start = bisect_left(labels, first.label)
        count = len(labels)

        def passes(run: int) -> bool:  # the first `run` elements from `start` are passed
            index = start + step * (run - 1)
            return 0 <= index < count and self._passes(at_label[labels[index]], step, mover,
                                                        twin, x)

        good, bad = 1, 2
        while passes(bad):
            good, bad = bad, 2 * bad
        while bad - good > 1:
            middle = (good + bad) // 2
            if passes(middle):
                good = middle
            else:
                bad = middle
        return start, good

    @staticmethod
    def _passes(other: _Element, step: int, mover: _Element, twin: Line, x: float) -> bool:
        """Whether `other`, on the line `twin` from x on, is passed at x by `mover` coming
        from its right (`step` -1) or its left (+1)."""
        if _tail(other, x) != twin:
            return False
        return (_flip_point(other, mover, x) if step < 0
                else _flip_point(mover, other, x)) == x

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

    def _link(self, element: _Element, neighbours: Neighbours | None = None,
              x: float | None = None) -> None:
        """Put `element` between `neighbours`, or where a search of the labels places it;
        its swaps scheduled from x (None: the tree's)."""
        if x is None:
            x = self.x
        labels = self._labels
        at_label = self._at_label
        if neighbours is None:
            index = self._position(element)
            after = at_label[labels[index]] if index < len(labels) else None
            before = at_label[labels[index - 1]] if index > 0 else None
        else:
            before, after = neighbours
        if before is None:
            label = 0 if after is None else after.label - LABEL_GAP
        elif after is None:
            label = before.label + LABEL_GAP
        else:
            label = (before.label + after.label) // 2
            if label == before.label:
                self._relabel()
                label = (before.label + after.label) // 2
        element.label = label
        insort(labels, label)
        at_label[label] = element
        element.prev, element.next = before, after
        if before is not None:
            before.next = element
            self._schedule(before, x)
        else:
            self._head = element
        if after is not None:
            after.prev = element
        self._schedule(element, x)

    def _unlink(self, element: _Element, x: float | None = None) -> None:
        element.stamp += 1  # its pending event is void
        labels = self._labels
        del labels[bisect_left(labels, element.label)]
        del self._at_label[element.label]
        before, after = element.prev, element.next
        if before is not None:
            before.next = after
        else:
            self._head = after
        if after is not None:
            after.prev = before
        if before is not None:
            self._schedule(before, self.x if x is None else x)
        element.prev = element.next = None

    def _relabel(self) -> None:
        """Spread the labels out again (rare: only after ~32 inserts into one gap)."""
        self._labels.clear()
        self._at_label.clear()
        element = self._head
        label = 0
        while element is not None:
            element.label = label
            self._labels.append(label)  # in order: the labels grow along the list
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
            self._labels.append(element.label)  # in order, as in `_relabel`
            self._at_label[element.label] = element
            element.prev, element.next = before, None
            if before is not None:
                before.next = element
            else:
                self._head = element
            before = element
        for element in elements:
            self._schedule(element, 1.0)
