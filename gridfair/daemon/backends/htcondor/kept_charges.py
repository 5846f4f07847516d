"""Each job's and slot's charge carried from one read of the `htcondor` backend to the next.

A job's charge (`SubmitterMap.charge`: who it is charged to) follows from its user, its
accounting group, the submitter map and the owners the slots name; the map is the reader's
own. So while the slots name the same owners, a job or slot whose view is the very one of
the last read (`kept_idle`, `kept_slots` hand those out) is charged as it was: its charged
object is the last read's, found over every job at once in C, and only the others are
charged, one by one. The kept pool then passes over them (`is`). When the owners change,
every job is charged again, and one charged as before keeps its object.
"""

from __future__ import annotations

import dataclasses
from itertools import compress, count
from operator import attrgetter, is_, not_
from typing import Any

from gridfair.ad_views import JOB_ID, Charge, Job, Machine, Snapshot
from gridfair.classads.submitters import SubmitterMap, merge_charges

_USER_GROUP = attrgetter("user", "group")


class KeptCharges:
    """The charged jobs and slots of the last read, by id and name, with the views they were
    charged from; `charged` charges a snapshot."""

    def __init__(self, submitters: SubmitterMap) -> None:
        self.submitters = submitters
        self._owners: frozenset[str | None] | None = None
        # (user, group) -> its charge, under `_owners`.
        self._charges: dict[tuple[str, str | None], Charge] = {}
        self._views: dict[str, Job] = {}  # job id -> its view as read last
        self._jobs: dict[str, Job] = {}  # job id -> its view as charged last
        self._slots: dict[str, tuple[Machine, Machine]] = {}  # name -> (as read, charged)

    def charged(self, snapshot: Snapshot, keep: bool) -> Snapshot:
        """The snapshot with every job and every slot's running job charged to a grid owner
        and the charges made (`classads.submitters.charge_snapshot` gives the same), each
        job or slot charged as in the last read being that read's charged object. `keep`:
        remember this read's for the next (not for a read that another began after)."""
        owners = frozenset(machine.owner for machine in snapshot.machines)
        named_owners = {owner for owner in owners if owner is not None}
        same_owners = owners == self._owners
        charges = self._charges if same_owners else {}

        def charge(user: str, group: str | None) -> Charge:
            found = charges.get((user, group))
            if found is None:
                found = charges[user, group] = self.submitters.charge(user, group, named_owners)
            return found

        def charged_job(view: Job) -> Job:
            made = charge(view.user, view.group)
            last = self._jobs.get(view.id)
            if (last is not None and self._views.get(view.id) is view
                    and (last.user, last.identity) == (made.owner, made.identity)):
                return last
            return view.with_user(made.owner, made.identity)

        views = snapshot.jobs
        ids = list(map(JOB_ID, views))
        jobs: list[Any]  # each the job charged, once every position is filled
        if same_owners:
            jobs = list(map(self._jobs.get, ids))
            for position in compress(count(), map(not_, map(
                    is_, map(self._views.get, ids), views))):
                jobs[position] = charged_job(views[position])
        else:
            jobs = list(map(charged_job, views))
        slots: dict[str, tuple[Machine, Machine]] = {}
        machines = []
        for machine in snapshot.machines:
            last_slot = self._slots.get(machine.name)
            if same_owners and last_slot is not None and last_slot[0] is machine:
                made_slot = last_slot[1]
            elif machine.running_user:
                owner = charge(machine.running_user, machine.running_group).owner
                made_slot = (last_slot[1] if last_slot is not None and last_slot[0] is machine
                             and last_slot[1].running_user == owner else
                             dataclasses.replace(machine, running_user=owner))
            else:
                made_slot = machine
            slots[machine.name] = (machine, made_slot)
            machines.append(made_slot)
        # One charge per (user, group) named, in the order they are first named: jobs, then
        # slots (as `charge_snapshot` makes them).
        named = dict.fromkeys(map(_USER_GROUP, views))
        named.update(dict.fromkeys((machine.running_user, machine.running_group)
                                   for machine in snapshot.machines if machine.running_user))
        made = merge_charges([charge(user, group) for user, group in named])
        if keep:
            self._owners, self._charges = owners, charges
            self._views = snapshot.jobs_by_id
            self._jobs = dict(zip(ids, jobs, strict=True))
            self._slots = slots
        return dataclasses.replace(snapshot, jobs=tuple(jobs), machines=tuple(machines),
                                   charges=made)

