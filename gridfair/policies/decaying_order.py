"""`DecayingOrder`: the order stage built on the live tree (`live_tree.py`), shared by SDRF
(commitments) and the HTCondor priority (real user priority): per user, a vector of
exponential moving averages ("levels") of something the user holds, each moving towards a
target fixed between the user's events, `level(t) = target + (level(t0) - target)
exp(-(t - t0)/tau)`, committed in closed form whenever the holdings change.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gridfair.core.pool import Pool, UserState
from gridfair.core.stages import OrderPolicy
from gridfair.errors import InputError
from gridfair.policies.drf import lead_figures
from gridfair.policies.live_tree import Line, LiveTree, value_at

#: A user not in the pool whose levels are this close to a newcomer's is forgotten.
FORGOTTEN = 1e-6


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
        self.first = self.tree.first  # type: ignore[method-assign]  # a call less a step
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
        tree = self.tree_of(user)
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

    def tree_of(self, user: UserState) -> LiveTree:
        """The live tree the user waits in: the stage's one tree (an order that keeps a tree
        per group gives the user's group's)."""
        return self.tree

    def user_changed(self, user: UserState, now: float) -> None:
        time = self.tree_of(user).time
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
        tree = self.tree_of(user)
        if user.index in tree:
            return tree.value(user.index, now)
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
            self._place(user, max(float(time), self.tree_of(user).time), account)
