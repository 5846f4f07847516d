"""Choosing the next user under SDRF: the live tree against a full re-sort.

n active users share two resources; each holds shares o_r and has commitments c_r (Eq. 6)
decaying towards obar_r = max(o_r - 1/n, 0). A decision is what Algorithm 1 does per task:
advance the clock a little, take the user of least priority (Eq. 5: max_r o_r + max_r c_r),
and give it a task, which raises its shares and so changes its curve. Half of the decisions
instead finish one of the chosen user's tasks (the pool is full: a task ends, the next starts).

- live tree: `LiveTree.first` then `LiveTree.set` of the chosen user's new curve (O(log n)
  plus the swap events due);
- full re-sort: every user's priority evaluated at now in closed form, then sorted
  (what a policy without the live tree does per decision); a linear min-scan is shown too.

Both run the same decisions (checked: they choose the same users). Target: the live tree at
least 10x the re-sort's decisions per second at 10,000 users. Run:
    .venv/bin/python bench/live_tree.py [--delta 0.999999] [--seconds 2]
"""

from __future__ import annotations

import argparse
import math
import random
import time

from gridfair.policies.live_tree import Line, LiveTree, value_at
from gridfair.policies.sdrf import time_constant

RESOURCES = 2
TASK = (0.0004, 0.0002)  # one task's (cpu, memory) share of the pool
STEP = 0.01  # seconds between decisions


class Users:
    """The users' shares and commitments, committed in closed form at each change."""

    def __init__(self, count: int, tau: float, seed: int) -> None:
        rng = random.Random(seed)
        self.tau = tau
        self.entitlement = 1.0 / count
        # Spread of holdings and histories: some users far above their share, most below.
        self.shares = [[rng.random() * 2.0 * self.entitlement for _ in range(RESOURCES)]
                       for _ in range(count)]
        self.levels = [[rng.random() * self.entitlement for _ in range(RESOURCES)]
                       for _ in range(count)]
        self.since = [0.0] * count

    def targets(self, user: int) -> list[float]:
        return [max(share - self.entitlement, 0.0) for share in self.shares[user]]

    def commitments(self, user: int, now: float) -> list[float]:
        decay = math.exp(-(now - self.since[user]) / self.tau)
        return [t + (c - t) * decay for c, t in zip(self.levels[user], self.targets(user),
                                                     strict=True)]

    def curve(self, user: int, now: float) -> list[Line]:
        top = max(self.shares[user])
        return [(top + t, c - t) for c, t in zip(self.commitments(user, now), self.targets(user),
                                                 strict=True)]

    def priority(self, user: int, now: float) -> float:
        return value_at(self.curve(user, now), 1.0)

    def change(self, user: int, now: float, sign: int) -> None:
        """A task of the user starts (sign 1) or ends (-1): commit, then move the shares."""
        self.levels[user] = self.commitments(user, now)
        self.since[user] = now
        self.shares[user] = [max(share + sign * size, 0.0)
                             for share, size in zip(self.shares[user], TASK, strict=True)]


def run_live_tree(count: int, decisions: int, tau: float) -> tuple[float, list[int], int]:
    users = Users(count, tau, seed=count)
    tree = LiveTree(tau)
    for user in range(count):
        tree.set(user, users.curve(user, 0.0), 0.0, user)
    chosen = []
    started = time.perf_counter()
    now = 0.0
    for decision in range(decisions):
        now += STEP
        user = tree.first(now)
        chosen.append(user)
        users.change(user, now, 1 if decision % 2 == 0 else -1)
        tree.set(user, users.curve(user, now), now, user)
    return time.perf_counter() - started, chosen, tree.swaps


def run_resort(count: int, decisions: int, tau: float, scan: bool) -> tuple[float, list[int]]:
    users = Users(count, tau, seed=count)
    chosen = []
    started = time.perf_counter()
    now = 0.0
    everyone = range(count)
    for decision in range(decisions):
        now += STEP
        if scan:
            user = min(everyone, key=lambda u: (users.priority(u, now), u))
        else:
            user = sorted(everyone, key=lambda u: (users.priority(u, now), u))[0]
        chosen.append(user)
        users.change(user, now, 1 if decision % 2 == 0 else -1)
    return time.perf_counter() - started, chosen


def decisions_for(seconds: float, per_decision: float) -> int:
    return max(20, int(seconds / per_decision))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delta", type=float, default=1.0 - 1e-6)
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="rough time budget per measurement")
    args = parser.parse_args()
    tau = time_constant(args.delta)
    print(f"delta = {args.delta!r} (tau = {tau:.4g} s), {STEP} s between decisions")
    print(f"{'users':>7} {'tree dec/s':>11} {'re-sort dec/s':>14} {'ratio':>7} "
          f"{'min-scan dec/s':>15} {'ratio':>7} {'swaps/1000 dec':>15}")
    for count in (100, 1_000, 10_000):
        # Calibrate each method's run length on a short run, then measure.
        probe, _, _ = run_live_tree(count, 200, tau)
        tree_decisions = decisions_for(args.seconds, probe / 200)
        tree_time, tree_chosen, swaps = run_live_tree(count, tree_decisions, tau)
        probe, _ = run_resort(count, 20, tau, scan=False)
        sort_decisions = decisions_for(args.seconds, probe / 20)
        sort_time, sort_chosen = run_resort(count, sort_decisions, tau, scan=False)
        scan_time, scan_chosen = run_resort(count, sort_decisions, tau, scan=True)
        same = min(len(tree_chosen), len(sort_chosen))
        assert tree_chosen[:same] == sort_chosen[:same] == scan_chosen[:same], \
            "the live tree chose differently from the re-sort"
        tree_rate = tree_decisions / tree_time
        sort_rate = sort_decisions / sort_time
        scan_rate = sort_decisions / scan_time
        print(f"{count:>7} {tree_rate:>11.0f} {sort_rate:>14.1f} {tree_rate / sort_rate:>6.0f}x "
              f"{scan_rate:>15.1f} {tree_rate / scan_rate:>6.0f}x "
              f"{1000 * swaps / tree_decisions:>15.2f}")


if __name__ == "__main__":
    main()
