"""HOSEP: owner-share enforcement for heterogeneous grids, counting MFlops (paper 004).

For user x, Provided_x is the MFlops of the machines it owns and Allocated_x the MFlops of the
machines running its jobs.
- PowerDiff_x = (Allocated_x - Provided_x) / Provided_x                      (Eq. 3)
- RP_{z,y} = (Allocated_z - Provided_z - Power_y) / Provided_z: z's PowerDiff after losing
  machine y                                                                   (Eq. 4)
- omega_z = RP_{z,y} for y = z's least powerful allocated machine            (Def. 3)

Heterogeneous Decision Algorithm (Fig. 2), repeated while it acts, after every free machine
has been allocated (3.3):
1. u_alpha = argmin PowerDiff with PowerDiff_alpha < 0 and an idle job;
2. u_beta = argmax PowerDiff with PowerDiff_beta > 0;
3. vacate u_beta's job on its least powerful machine if omega_beta > PowerDiff_alpha (the
   victim, after losing the machine, is not worse off than the receiver is now; with
   `absolute=True`, Eq. 6's stricter omega_beta > |PowerDiff_alpha|);
4. start u_alpha's idle job of least demand on the freed machine (3.3 i, ii).

Convergence guard (gridfair's addition, stated because Fig. 2 alone ping-pongs): a receiver
owed little may overshoot on a large machine (A at -0.4 takes a 100 MFlops machine it provides
100 of and lands at +0.6), after which the same rule hands the machine back. gridfair allows a
preemption only if it also lowers Phi = sum_x Provided_x * PowerDiff_x^2, which for a move of
power p between receiver a and victim b means
    PowerDiff_a + PowerDiff_a' < PowerDiff_b + PowerDiff_b'   (primes: after the move),
by more than a rounding error (`owner_share.PHI_TOLERANCE`: a tie in exact arithmetic can
round to a fall). Phi falls strictly with every preemption and the pool has finitely many
states, so repeated cycles on an unchanging pool stop acting. The guard only bites on
overshoots; every preemption of the paper's Table 1 runs passes it. (iSPD's HOSEP has a
stricter clause of the same kind: the victim after must stay at or above the receiver after.)

iSPD 2014's test (`test="ispd2014"`, the paper's own simulator, `src/ispd/externo/HOSEP.java`
at gspd-unesp/ispd 196cdf6): instead of step 3 and the guard, the preemption is allowed when the
victim after the move is at or above the receiver after it, or still above its share
(omega_beta >= PowerDiff_alpha' or omega_beta > 0). It is no ping-pong either: a victim left
above its share never becomes a receiver, and one left at or above the receiver never trades
places with it. Its victim is iSPD's too (`buscarRecurso`): the least powerful machine, and
among equals the first in the pool's machine order, where Fig. 2's test takes among equals the
run started last.

Free machines go, in `HosepOrder`, to the user of least PowerDiff first, its job of least
demand first, on the fastest free machine. A user who provides nothing has no entitlement: it
is served after every provider, and is the first victim (its PowerDiff is +inf).

Ties: equal keys go to the user seen first in the pool, the task submitted first.
With a group tree (`groups`), a group that owns machines is an owner, its users judged by its
figures (`group_owners.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from gridfair.core.pool import Task, UserState, least_demand_key, power_diff
from gridfair.core.stages import DECLINE, Decision, OrderPolicy, Preemption, option
from gridfair.errors import ConfigError
from gridfair.policies.group_owners import (
    Account,
    GroupOwners,
    accounts_of,
    group_owners,
    rekey,
)
from gridfair.policies.hosep_rule import ISPD2014, OMEGA, PHI, PREEMPTION_TESTS, TESTS
from gridfair.policies.owner_share import (
    VICTIM_CANDIDATES,
    GroupOwnerOptions,
    OwnerSharePreempt,
    move_lowers_potential,
    potential_falls,
    power_losses,
    preemption_of,
)
from gridfair.policies.ranking import UserRanking

_STOPPED = ("HOSEP stops: {receiver_job} of {receiver} waits below its share (PowerDiff "
            "{receiver_power_diff:+.3f}); the victim would be {victim_job} of {victim_user} on "
            "{machine} ({machine_mflops:.0f} MFlops), the least powerful machine of the user "
            "furthest above its share (PowerDiff {victim_power_diff:+.3f}), ")
#: Why Fig. 2 stopped, by the clause that refused the move (`HosepPreempt.declined`).
_STOP_REASONS = {
    OMEGA: _STOPPED + "who would fall to omega {omega:+.3f}, not above {receiver}'s "
             "{receiver_power_diff:+.3f}",
    PHI: _STOPPED + "and the move would not lower Phi ({receiver} {receiver_power_diff:+.3f} "
           "-> {receiver_power_diff_after:+.3f}, {victim_user} -> omega {omega:+.3f})",
    ISPD2014: _STOPPED + "who would fall to omega {omega:+.3f}, below {receiver}'s "
                "{receiver_power_diff_after:+.3f} after, and not above its share",
}


def remaining_power(user: Account, machine_power: float) -> float:
    """RP (Eq. 4): the user's PowerDiff if a machine of `machine_power` is taken from it."""
    return power_diff(user.allocated_power - machine_power, user.provided_power)


def hosep_figures(user: Account) -> dict[str, float]:
    return {
        "provided_mflops": user.provided_power,
        "allocated_mflops": user.allocated_power,
        "power_diff": user.power_diff,
    }


@dataclass(frozen=True)
class HosepOptions(GroupOwnerOptions):
    """HOSEP's preemption options."""

    absolute_power_diff: bool = option(False, "HOSEP: omega vs |PowerDiff|", flag=True,
                                       swept=True)
    hosep_test: str = option("fig2", "HOSEP: preemption test, fig2 or ispd2014",
                             choices=PREEMPTION_TESTS, flag=True, swept=True)


class HosepOrder(OrderPolicy):
    """Free machines to the user of least PowerDiff, its job of least demand first."""

    name = "hosep"
    task_key = staticmethod(least_demand_key)
    # PowerDiff is of the running tasks and the machines owned as they are now.
    state_from_totals = True

    Options: ClassVar[type[Any]] = GroupOwnerOptions

    @classmethod
    def from_options(cls, options: Any) -> HosepOrder:
        return cls(group_owners(options))

    def __init__(self, owners: GroupOwners | None = None) -> None:
        self.owners = owners
        self.account = accounts_of(owners)

    def attach(self, pool) -> None:
        self.ranking = UserRanking()
        if self.owners is not None:
            self.owners.attach(pool)

    def user_changed(self, user: UserState, now: float) -> None:
        if self.owners is None:
            self.ranking.update(user, self.rank(user) if user.active else None)
        else:
            rekey(self.owners, user, self._rank)

    def _rank(self, user: UserState) -> None:
        self.ranking.update(user, self.rank(self.account(user)) if user.active else None)

    @staticmethod
    def rank(user: Account) -> tuple[int, float]:
        if user.provided_power > 0:
            return (0, user.power_diff)
        return (1, user.allocated_power)

    def first(self, now: float) -> UserState | None:
        return self.ranking.first()

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        owner = self.account(user)
        figures = {"user": user.name, **hosep_figures(owner)}
        if owner.provided_power > 0:
            return (
                "free machine to {user}: lowest PowerDiff {power_diff:+.3f} among waiting users "
                "(allocated {allocated_mflops:.0f} of {provided_mflops:.0f} MFlops provided)",
                figures,
            )
        return (
            "free machine to {user}: provides nothing, served after every provider "
            "(allocated {allocated_mflops:.0f} MFlops)",
            figures,
        )

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        return hosep_figures(self.account(user))


class HosepPreempt(OwnerSharePreempt):
    """Fig. 2: vacate the most over-share user's least powerful machine for the most
    under-share user, while the victim stays better off than the receiver."""

    name = "hosep"
    # As `Stage` and `PreemptPolicy` declare them: reclaim, a subclass, sets its own.
    Options: ClassVar[type[Any]] = HosepOptions
    state_from_totals = True
    owner_share_rule: ClassVar[str | None] = "hosep"

    @classmethod
    def from_options(cls, options: HosepOptions, order: OrderPolicy) -> HosepPreempt:
        return cls(absolute=options.absolute_power_diff, test=options.hosep_test,
                   owners=group_owners(options))

    def __init__(self, *, absolute: bool = False, test: str = "fig2",
                 owners: GroupOwners | None = None) -> None:
        super().__init__(owners)
        if test not in PREEMPTION_TESTS:
            raise ConfigError(f"HOSEP preemption test must be one of "
                              f"{', '.join(PREEMPTION_TESTS)}, got {test!r}")
        self.absolute = absolute
        self.test = TESTS[test](absolute)

    def attach(self, pool) -> None:
        super().attach(pool)
        # Where the last `choose` stopped by Fig. 2's rule, for `declined`: (receiver user,
        # receiver, victim user, victim, omega, receiver's PowerDiff after, the clause).
        self._stopped: tuple | None = None

    def deficit_key(self, user: UserState) -> Any | None:
        # An idle job in line (`idle` holds one only while `idle_count` > 0), not one set
        # aside as too big for every machine.
        if user.idle:
            owner = user if self.owners is None else self.owners.of(user)  # every event: no call
            if owner.provided_power > 0:
                diff = owner.power_diff
                if diff < 0:
                    return diff
        return None

    def excess_key(self, user: UserState) -> Any | None:
        if user.running > 0:
            diff = (user if self.owners is None else self.owners.of(user)).power_diff
            if diff > 0:
                return -diff
        return None

    @property
    def victim_key(self) -> Callable[..., Any]:  # type: ignore[override]
        """The victim order of the stage's test (read at attach, to sort running tasks)."""
        return self.test.victim_key

    def choose(self, now: float) -> Preemption | None:
        pool = self.pool
        while (receiver_user := self.deficit.first()) is not None:
            victim_user = self.excess.first()
            if victim_user is None:
                return None
            receiver = pool.head(receiver_user)
            assert receiver is not None  # `deficit_key` ranks only users with an idle job
            receiver_owner, victim_owner = self.account(receiver_user), self.account(victim_user)
            receiver_diff = receiver_owner.power_diff
            victim_diff = victim_owner.power_diff
            refusal = self.test.refusal
            for tried, victim in enumerate(self.pool.vacatable(
                    self.running.of(victim_user.name))):
                if tried == VICTIM_CANDIDATES:
                    break
                node = victim.node
                assert node is not None  # a victim runs on its node
                loss = node.power_per_cpu * victim.cpus
                omega = remaining_power(victim_owner, loss)
                gain = node.power_per_cpu * receiver.cpus
                receiver_after = power_diff(receiver_owner.allocated_power + gain,
                                            receiver_owner.provided_power)
                clause = refusal(receiver_diff, receiver_after, (omega,),
                                 partial(potential_falls, receiver_diff, receiver_after, gain,
                                         victim_diff, omega, loss))
                if clause is not None:
                    # Victims come least powerful first: omega only falls from here, and on
                    # machines of one speed the receiver's gain only grows: Fig. 2 stops.
                    self._stopped = (receiver_user, receiver, victim_user, victim, omega,
                                     receiver_after, clause)
                    break
                if pool.fits_after_vacate(receiver, victim):
                    return self._preemption(receiver_user, receiver, victim, receiver_after,
                                            ())
                more = self.more_victims(receiver, victim, now)
                if more:
                    losses = power_losses(pool.users, (victim, *more), self.account)
                    omegas = (remaining_power(user, lost) for user, lost in losses.items())
                    if refusal(receiver_diff, receiver_after, omegas,
                               partial(move_lowers_potential, receiver_owner, gain, losses)
                               ) is None:
                        return self._preemption(receiver_user, receiver, victim,
                                                receiver_after, more)
            # No move: a job too big for every machine finds none, and is no reason to stop
            # looking (checked only here, off the common path): set aside, the next looked at.
            if not pool.set_aside_if_too_big(receiver_user, now):
                return None
            self._stopped = None
        return None

    def _preemption(self, receiver_user: UserState, receiver: Task, victim: Task,
                    receiver_after: float, more: tuple[Task, ...]) -> Preemption:
        figures = self.victim_figures(receiver_user, receiver, receiver_after, (victim, *more))
        return preemption_of(
            receiver, victim, more, figures,
            "vacate {victim_job} of {victim_user} on {machine}: {victim_user} is above "
            "its share (PowerDiff {victim_power_diff:+.3f}) and after losing "
            "{machine_mflops:.0f} MFlops stays at omega {omega:+.3f} > {receiver}'s "
            "PowerDiff {receiver_power_diff:+.3f}",
            "{receiver_job} of {receiver} onto {machine}: {receiver} is below its share "
            "(PowerDiff {receiver_power_diff:+.3f}, {receiver_power_diff_after:+.3f} after); "
            "freed from {victim_user}",
        )

    def victim_figures(self, receiver_user: UserState, receiver: Task, receiver_after: float,
                       victims: tuple[Task, ...]) -> Callable[[Task], dict[str, Any]]:
        """The figures of each victim's vacate: the receiver before and after, the victim's
        user and its omega once the move has taken all its victims, the machine."""
        users, account = self.pool.users, self.account
        losses = power_losses(users, victims, account)

        def figures(task: Task) -> dict[str, Any]:
            owner = account(users[task.user])
            node = task.node
            assert node is not None  # a victim runs on its node
            return {
                "receiver": receiver_user.name,
                "receiver_power_diff": account(receiver_user).power_diff,
                "receiver_power_diff_after": receiver_after,
                "receiver_job": receiver.id,
                "victim_user": task.user,
                "victim_power_diff": owner.power_diff,
                "victim_job": task.id,
                "omega": remaining_power(owner, losses[owner]),
                "machine": node.name,
                "machine_mflops": node.power_per_cpu * task.cpus,
            }
        return figures

    def declined(self, now: float) -> Decision | None:
        """Why Fig. 2 stopped although a provider below its share waits: the victim it
        would take (the most over-share user's least powerful machine) would leave that user
        no better off than the receiver (omega), or would not lower Phi."""
        if self._stopped is None:
            return None
        receiver_user, receiver, victim_user, victim, omega, receiver_after, clause = \
            self._stopped
        self._stopped = None  # read once, after the cycle's last `choose`
        node = victim.node
        figures = {
            "receiver": receiver_user.name,
            "receiver_power_diff": self.account(receiver_user).power_diff,
            "receiver_power_diff_after": receiver_after,
            "receiver_job": receiver.id,
            "victim_user": victim_user.name,
            "victim_power_diff": self.account(victim_user).power_diff,
            "victim_job": victim.id,
            "omega": omega,
            "machine": node.name,
            "machine_mflops": node.power_per_cpu * victim.cpus,
            "rule": clause,
        }
        return Decision(DECLINE, receiver, node, self.name, _STOP_REASONS[clause], figures)

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        return hosep_figures(self.account(user))
