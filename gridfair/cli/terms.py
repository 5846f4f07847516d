"""The words of gridfair's output, defined once: the commands' `--help` shows them (as an
epilog), and `docs/terms.md` holds the same definitions (a test checks that it does).

Units are spelled one way: power in MFlops (millions of floating-point operations per second,
as HTCondor's `MFlops` slot attribute), work in MFlop, times in seconds (s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

#: term -> its definition. The order is the order the commands' help lists them in.
TERMS: dict[str, str] = {
    "MFlops": "a machine's power: millions of floating-point operations per second, as "
              "HTCondor's MFlops slot attribute (work is counted in MFlop).",
    "Provided": "the power of the machines a user owns: in MFlops (shares), or as a share of "
                "the whole grid's MFlops (simulate, compare).",
    "Allocated": "the power, in MFlops, of the machines running a user's jobs.",
    "PowerDiff": "(Allocated - Provided) / Provided (HOSEP, Eq. 3): below 0 a user gets less "
                 "power than it provides, above 0 more; inf for a user who provides nothing "
                 "and runs jobs.",
    "omega": "what the victim's PowerDiff becomes once it loses the machine (HOSEP, Def. 3 "
             "and Eq. 4); HOSEP preempts only if omega stays above the receiver's PowerDiff.",
    "Nodes": "machines (slots): provided (owned by the user) and used (running its jobs).",
    "Running Jobs, Idle Jobs": "a user's jobs running (as the slots show them), and waiting "
                               "to run, in the pool.",
    "In Flight": "a user's idle jobs gridfair has allocated a slot to and the pool has not "
                 "started yet (counted idle, as HTCondor does; the policy's view holds their "
                 "slots for them).",
    "Satisfaction %": "a user's mean, over its completed tasks, of 100 x the task's run time "
                      "on an ideal machine / (completion - submission) (HOSEP, Eq. 1-2, "
                      "Def. 5): 100 is no wait at ideal speed. The ideal machine has the mean "
                      "power of one cpu of the grid (--satisfaction-base grid) or of the "
                      "user's own machines (own).",
    "Mean wait s, P95 wait s": "seconds from a task's submission to its first start: the "
                               "mean, and the 95th percentile (nearest rank).",
    "Completed, Submitted, Preempted": "tasks that finished, tasks that arrived, and vacates "
                                       "the user's tasks suffered.",
    "makespan": "seconds from the first submission to the last completion.",
    "utilization": "cpu-seconds busy / (cpus x makespan).",
    "vacates": "preemptions carried out in the whole run.",
    "Jain(satisfaction)": "Jain's fairness index over the users' satisfaction, "
                          "(sum x)^2 / (n x sum x^2): 1 when all are equal, 1/n when one user "
                          "has it all.",
    "Share error": "the power owners were owed and waited for, over the grid's power: the "
                   "sum over owners below their share with jobs waiting of min(Provided - "
                   "Allocated, waiting cpus x the grid's mean MFlops per cpu), / the grid's "
                   "MFlops; 0 when owners never wait below their share. compare gives its "
                   "mean over the run (a pool's history), shadow its mean over cycles.",
    "Dominant share": "the largest fraction of any pool resource a user holds (DRF), over the "
                      "order's resources: cpus, memory, power and GPUs unless DRF's resources "
                      "option names others.",
}


class WithTerms(click.Command):
    """A command whose `--help` ends with the definitions of the words of its output:
    `@cli.command(cls=WithTerms, terms=("PowerDiff", ...))`."""

    def __init__(self, *args: Any, terms: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        unknown = [name for name in terms if name not in TERMS]
        assert not unknown, f"terms with no definition: {unknown}"
        self.terms = tuple(terms)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        with formatter.section("Terms"):
            formatter.write_dl([(name, TERMS[name]) for name in self.terms])
