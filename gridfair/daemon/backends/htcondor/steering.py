"""Steering, the `htcondor` backend's writes on jobs: vacates (`Schedd.act`), allocations
(the steering attributes, `Schedd.edit`), withdrawals, handovers (`condor_now`), and the
negotiators asked for a cycle once a cycle's actions are done."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import classad2
import htcondor2

from gridfair.ad_views import DYNAMIC, PARTITIONABLE, STATIC, Job, Machine
from gridfair.daemon.backends import ActionFailed, PoolUnavailable
from gridfair.daemon.backends.htcondor.state import POOL_ERRORS, PoolState, schedd_name

#: The result attributes of `Schedd.act` that explain a failure, in the order checked.
ACT_FAILURES = (
    ("TotalNotFound", "job not found"),
    ("TotalBadStatus", "job not in a state that can be vacated"),
    ("TotalAlreadyDone", "already done"),
    ("TotalPermissionDenied", "permission denied"),
    ("TotalError", "schedd error"),
)

#: Seconds an HTCondor tool (condor_now) may take before the action counts as failed.
TOOL_TIMEOUT = 30.0
#: HTCondor's RESCHEDULE command (condor_commands.h: SCHED_VERS + 21); the bindings name only
#: the master's and daemons' administrative commands, and send any command number.
RESCHEDULE = 421

#: The suffix of the steering attribute's companion: the size gridfair allocated with the
#: slot (`GridfairSlotSize = {cpus, memory, gpus}`), which a dynamic slot cut for the job may
#: not exceed (configs/htcondor-pool.config, GRIDFAIR_WITHIN_ALLOCATION).
SIZE_SUFFIX = "Size"
#: The steering's run and expiry (`GridfairSteerRunCount`, `GridfairSteerUntil`): it
#: authorizes one start, of the job's run counted then, until then
#: (configs/htcondor-pool.config, GRIDFAIR_STEERED).
RUN_COUNT_ATTRIBUTE = "GridfairSteerRunCount"
UNTIL_ATTRIBUTE = "GridfairSteerUntil"
#: The job attribute naming the slot steered to (`backend.htcondor.steer_attribute`).
DEFAULT_STEER_ATTRIBUTE = "GridfairSlot"
#: Seconds a steering lives by default: `safety.landing_timeout`'s default.
STEERING_LIFE = 120.0


def steering_names(steer_attribute: str) -> frozenset[str]:
    """The job attributes a steering writes, lower-case."""
    return frozenset(name.lower() for name in (steer_attribute, steer_attribute + SIZE_SUFFIX,
                                                RUN_COUNT_ATTRIBUTE, UNTIL_ATTRIBUTE))


class JobSteering:
    """The backend's actions on jobs, on the schedd each job was read from (`PoolState`)."""

    def __init__(self, state: PoolState, *, steer_attribute: str, condor_now: str | None,
                 steering_life: float, now: Callable[[], float]) -> None:
        self.state = state
        self.steer_attribute = steer_attribute
        # HOSEP's "vacate this, run that there" in one step (handover); None: vacate + steer.
        self.condor_now = condor_now
        # How long a steering authorizes its one start: the allocation's life, after which the
        # daemon gives it up (`safety.landing_timeout`).
        self.steering_life = steering_life
        self.now = now  # the backend's clock, for a steering's expiry
        # The victims of the handovers carried out since the last `actions_done` (this
        # cycle's): one of them is never a handover's receiver (`handover`).
        self.handed_over: set[str] = set()

    def vacate(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        results: dict[str, str | None] = {}
        # Unsteer first: a vacated job still naming its slot is matched straight back to it
        # (seen live: the same job vacated every few cycles, never moved). One edit for the
        # jobs of each schedd; a job the edit cannot reach (gone, not permitted) is reported
        # by its vacate below.
        of_schedd: dict[str, list[str]] = {}
        for job_id in job_ids:
            location = self.state.schedd_of.get(job_id)
            if location is not None:
                of_schedd.setdefault(schedd_name(location), []).append(job_id)
        for jobs in of_schedd.values():
            self._edit_each(self.state.schedd(jobs[0]), self.steer_attribute,
                            dict.fromkeys(jobs, "undefined"))
        for job_id in job_ids:
            try:
                result = self.state.schedd(job_id).act(htcondor2.JobAction.Vacate, [job_id])
            except ActionFailed as error:
                results[job_id] = str(error)
                continue
            except POOL_ERRORS as error:
                results[job_id] = f"schedd refused: {error}"
                continue
            results[job_id] = _act_problem(result)
        return results

    def allocate(self, job: Job, machine: Machine) -> None:
        [problem] = self.allocate_all([(job, machine)])
        if problem is not None:
            raise ActionFailed(problem)

    def allocate_all(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        """`_steer` the jobs, and ask for a negotiation after the cycle's actions
        (`actions_done`) if any was steered."""
        problems = self._steer(allocations)
        if any(problem is None for problem in problems):
            self.state.negotiation_wanted = True
        return problems

    def steer_ahead(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        """`_steer` the jobs, with no negotiation asked: the slots are busy, and a kept claim
        starts the job when its slot's job ends (the schedds' gate)."""
        return self._steer(allocations)

    def _steer(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        """Steer each job to its slot, the jobs of one schedd together: first every job's
        size, then every job's slot name (so each job has its size before it names the slot:
        a match between the edits cuts no larger slot), each as one edit of all the jobs
        given the same value. An edit is one connection and one transaction of the schedd
        however many jobs it names, and the connection is what costs it (measured: 0.4-0.8
        ms of its CPU each, the same for one job or a thousand). The size is set only for a
        slot a dynamic slot is cut from (the pool's START reads it there alone, not on a
        static slot). A job the schedd does not take is that allocation's failure, with the
        schedd's reason."""
        problems: list[str | None] = [None] * len(allocations)
        of_schedd: dict[str, list[int]] = {}
        for index, (job, _) in enumerate(allocations):
            location = self.state.schedd_of.get(job.id)
            if location is None:
                problems[index] = (f"job {job.id}: its schedd is unknown (not in any schedd's "
                                   "answer to the last query)")
            else:
                of_schedd.setdefault(schedd_name(location), []).append(index)
        until = self._steering_until()
        for indices in of_schedd.values():
            location = self.state.schedd_of[allocations[indices[0]][0].id]
            schedd = self.state.schedd_factory(location)
            jobs = [allocations[index][0] for index in indices]
            sized = self._edit_each(schedd, self.steer_attribute + SIZE_SUFFIX, {
                allocations[index][0].id: _size_literal(allocations[index][0])
                for index in indices if allocations[index][1].slot_type != STATIC})
            counted = self._edit_each(schedd, RUN_COUNT_ATTRIBUTE, {
                job.id: str(job.run_count) for job in jobs if sized.get(job.id) is None})
            dated = self._edit_each(schedd, UNTIL_ATTRIBUTE, dict.fromkeys(
                (job.id for job in jobs if counted.get(job.id, "") is None), until))
            named = self._edit_each(schedd, self.steer_attribute, {
                allocations[index][0].id: classad2.quote(allocations[index][1].name)
                for index in indices if dated.get(allocations[index][0].id, "") is None})
            for index in indices:
                job_id = allocations[index][0].id
                problems[index] = (sized.get(job_id) or counted.get(job_id)
                                   or dated.get(job_id) or named.get(job_id))
        return problems

    def actions_done(self) -> None:
        """If jobs were steered, ask each negotiator for a negotiation cycle now: its
        RESCHEDULE command, which it takes from an ADMINISTRATOR (gridfair's account is one
        there, for its lease). Not the schedds': since HTCondor 25.14.0 (HTCONDOR-3624) the
        schedd reads a RESCHEDULE sent to it and drops it, asking the negotiator itself only
        when it goes from no idle job to some and on a release; an edit asks nothing, so
        steered jobs waited for the periodic cycle (measured: 51 s at NEGOTIATOR_INTERVAL
        = 60). The negotiator still keeps NEGOTIATOR_MIN_INTERVAL between cycle starts and
        NEGOTIATOR_CYCLE_DELAY after a cycle's end. A refusal is not an action's failure:
        the edits stand, and the negotiator's next cycle starts them."""
        self.handed_over.clear()
        if self.state.negotiation_wanted:
            self.state.negotiation_wanted = False
            self.renegotiate()

    def renegotiate(self) -> None:
        """RESCHEDULE to each negotiator (`actions_done`), for allocations still waiting.
        The negotiator drops a RESCHEDULE while one it took has not started its cycle yet
        (`GotRescheduleCmd`, HTCondor 25.14 `matchmaker.cpp`), and that cycle may take its
        submitters from the collector before a steered job's submitter is there: measured,
        the first user's allocations matched at once and the other users' 22 s later, at the
        next cycle's RESCHEDULE (`docs/results/throughput.md`)."""
        with contextlib.suppress(ActionFailed):
            for ad, _ in self.state.negotiators():
                with contextlib.suppress(*POOL_ERRORS):
                    htcondor2.send_command(ad, RESCHEDULE)

    def can_hand_over(self, machine: Machine) -> bool:
        """condor_now is configured and the slot is a partitionable one (or a dynamic one).
        HTCondor 25 runs the job on the victims' claims only by coalescing dynamic slots: on a
        static slot the schedd logs "coalesce failed: given slot is not dynamic" (and with
        CLAIM_WORKLIFE = 0, "given slot is not claimed"), condor_now still exits 0, and the
        job waits for a negotiation."""
        return self.condor_now is not None and machine.slot_type in (PARTITIONABLE, DYNAMIC)

    def handover(self, victims: Sequence[Job], job: Job, machine: Machine) -> str | None:
        """Vacate `victims` and start `job` on their claims at once: `condor_now JOB VICTIM
        [VICTIM ...]`, run as a program with an argument list (no shell), on the jobs' schedd,
        which must be the same one; the daemon's account must be a queue super user. The job
        is steered to the partitionable slot too: the dynamic slot condor_now coalesces for it
        is cut from that slot, whose START takes it (configs/htcondor-pool.config), and if the
        claims were not kept the negotiator starts it there. Raises ActionFailed with
        condor_now's own message when it refuses.

        A job handed over as a victim in this cycle is not handed a slot in the same cycle:
        its victims are vacated and it is steered there, and the negotiator starts it once
        both claims are done with. HTCondor 25.14's schedd may crash on that handover (seen
        live, Showcase 2: the policy moved O3's 4.11 off the machine a handover took and
        onto O3's own, "[now job 4.11]: failed to start job on match", then signal 11 in
        `send_vacate` from `pcccStopCallback`); its restart left the claims of the cycle's
        other handovers claimed and idle for minutes, and their receivers never started.
        Returns None when handed over, else why it was carried out as a steering."""
        if self.condor_now is None:
            raise ActionFailed("condor_now is not configured (backend.htcondor.condor_now)")
        victim_ids = [victim.id for victim in victims]
        if job.id in self.handed_over:
            self._vacate_then_steer(victim_ids, job, machine)
            return (f"{job.id} was handed over as a victim in this cycle; a second condor_now "
                    "on it may crash the schedd")
        schedds = {schedd_name(location) for location in
                   (self.state.schedd_of.get(job_id) for job_id in (job.id, *victim_ids))
                   if location is not None}
        location = self.state.schedd_of.get(job.id)
        if location is None or len(schedds) != 1 or any(
                job_id not in self.state.schedd_of for job_id in victim_ids):
            raise ActionFailed(f"condor_now needs {job.id} and {', '.join(victim_ids)} on one "
                               "schedd")
        # The schedd's address, not its name: condor_now qualifies a short name ("vm") with
        # the domain and then fails to find it (seen live: "Unable to locate schedd 'vm'").
        address = str(location.get("MyAddress", schedd_name(location)))
        pool = ["-pool", self.state.pool] if self.state.pool else []
        command = [self.condor_now, "-name", address, *pool, job.id, *victim_ids]
        # The victims are unsteered, as for a vacate (seen live: a victim still naming its
        # slot started there again).
        schedd = self.state.schedd_factory(location)
        try:
            for victim_id in victim_ids:
                self._unsteer(schedd, victim_id)
            self.steer(schedd, job, machine)
        except POOL_ERRORS as error:
            raise ActionFailed(f"schedd refused the edit of {job.id} or its victims: "
                               f"{error}") from None
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False,
                                  timeout=TOOL_TIMEOUT, env=self.state.tool_environment)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ActionFailed(f"condor_now {job.id} {' '.join(victim_ids)}: {error}") from None
        if done.returncode != 0:
            message = " ".join((done.stderr.strip() or done.stdout.strip()).split())
            raise ActionFailed(f"condor_now {job.id} {' '.join(victim_ids)} on {machine.name}: "
                               f"exit {done.returncode}: {message or 'no message'}")
        self.handed_over.update(victim_ids)
        return None

    def _vacate_then_steer(self, victim_ids: Sequence[str], job: Job, machine: Machine) -> None:
        """A handover carried out as a vacate of its victims and a steering of its job, at
        the run count the schedd has for it now: the job was running when read, and a
        running job's count is not in the read (seen live: steered at 0, the gate took
        none of its runs, and its allocation was given up a cycle later)."""
        problems = {victim: problem for victim, problem in self.vacate(victim_ids).items()
                    if problem is not None}
        if problems:
            raise ActionFailed("; ".join(f"vacate {victim}: {problem}"
                                         for victim, problem in problems.items()))
        cluster, _, proc = job.id.partition(".")
        try:
            [ad] = self.state.schedd(job.id).query(
                f"ClusterId == {int(cluster)} && ProcId == {int(proc)}", ["JobRunCount"])
        except (ValueError, *POOL_ERRORS) as error:
            raise ActionFailed(f"job {job.id}: its run count not read: {error}") from None
        runs = ad.get("JobRunCount", job.run_count)
        self.allocate(dataclasses.replace(job, run_count=int(runs)), machine)

    def withdraw(self, job_id: str) -> None:
        """An allocation that did not land: the job no longer names a slot, so HTCondor may
        start it anywhere (the slot's START refuses a job steered to another slot). A job
        the last read did not show (held, or gone) is looked for on every schedd: a held
        job keeps its steering, live again once released; a job gone needs nothing."""
        location = self.state.schedd_of.get(job_id) or self._holding_schedd(job_id)
        if location is None:
            return
        try:
            self._unsteer(self.state.schedd_factory(location), job_id)
        except POOL_ERRORS as error:
            raise ActionFailed(f"schedd refused the edit of {job_id}: {error}") from None

    def _holding_schedd(self, job_id: str) -> classad2.ClassAd | None:
        """The location of the schedd that has the job in its queue, steered; None if none
        has (a schedd that does not answer is taken not to: the steering expires)."""
        cluster, _, proc = job_id.partition(".")
        constraint = (f"ClusterId == {int(cluster)} && ProcId == {int(proc)} && "
                      f"{self.steer_attribute} =!= undefined")
        try:
            locations = self.state.locate_schedds()
        except PoolUnavailable as error:
            raise ActionFailed(f"job {job_id}: no schedd to ask ({error})") from None
        for location in locations:
            with contextlib.suppress(*POOL_ERRORS):
                if self.state.schedd_factory(location).query(constraint, ["ClusterId"]):
                    return location
        return None

    def steered_jobs(self) -> dict[str, str] | None:
        """The idle and held jobs of every schedd whose steering is still live (the run it
        names, not expired): job id -> the slot named; None when no collector answers. Only
        gridfair's account writes a steering (protected attributes), so each is one this
        daemon, or one before it, wrote. A schedd that does not answer is left out (its
        steerings expire by themselves)."""
        live = (f"(JobStatus == 1 || JobStatus == 5) && {self.steer_attribute} =!= undefined"
                f" && {RUN_COUNT_ATTRIBUTE} =?= (JobRunCount ?: 0)"
                f" && {UNTIL_ATTRIBUTE} > time()")
        try:
            locations = self.state.locate_schedds()
        except PoolUnavailable:
            return None
        found: dict[str, str] = {}
        for location in locations:
            try:
                ads = self.state.schedd_factory(location).query(
                    live, ["ClusterId", "ProcId", self.steer_attribute])
            except POOL_ERRORS:
                continue
            for ad in ads:
                job_id = f"{ad['ClusterId']}.{ad['ProcId']}"
                found[job_id] = str(ad.get(self.steer_attribute))
                self.state.schedd_of.setdefault(job_id, location)
        return found

    def steer(self, schedd: Any, job: Job, machine: Machine) -> None:
        """Name the slot in the job, as a string literal, after the size allocated there and
        the run and expiry of the steering (the pool takes a job only with all of them, and
        cuts no larger slot: the order keeps a match between the edits from failing)."""
        schedd.edit([job.id], self.steer_attribute + SIZE_SUFFIX, _size_literal(job))
        schedd.edit([job.id], RUN_COUNT_ATTRIBUTE, str(job.run_count))
        schedd.edit([job.id], UNTIL_ATTRIBUTE, self._steering_until())
        schedd.edit([job.id], self.steer_attribute, classad2.quote(machine.name))

    def _steering_until(self) -> str:
        """When a steering written now expires, as the literal the pool reads."""
        return _number_literal(math.ceil(self.now() + self.steering_life))

    def _unsteer(self, schedd: Any, job_id: str) -> None:
        schedd.edit([job_id], self.steer_attribute, "undefined")

    @staticmethod
    def _edit_each(schedd: Any, attribute: str, values: Mapping[str, str]
                   ) -> dict[str, str | None]:
        """Set `attribute` of each job (id -> value) on one schedd: one edit for all the jobs
        given the same value; per job, None if set or why not. The bindings abort an edit's
        whole transaction when one job refuses it, so a refused edit of several jobs is made
        again job by job, and each job's own outcome is known."""
        jobs_of: dict[str, list[str]] = {}
        for job_id, value in values.items():
            jobs_of.setdefault(value, []).append(job_id)
        problems: dict[str, str | None] = {}
        for value, jobs in jobs_of.items():
            problem = _edit_problem(schedd, jobs, attribute, value)
            if problem is not None and len(jobs) > 1:
                problems.update({job_id: _edit_problem(schedd, [job_id], attribute, value)
                                 for job_id in jobs})
            else:
                problems.update(dict.fromkeys(jobs, problem))
        return problems




def _size_literal(job: Job) -> str:
    """The size allocated to a job with its slot, as the pool's START reads it: `{cpus,
    memory, gpus}`."""
    return "{" + ", ".join(map(_number_literal, (job.request_cpus, job.request_memory,
                                                 job.request_gpus))) + "}"


def _edit_problem(schedd: Any, job_ids: list[str], attribute: str, value: str) -> str | None:
    """One `Schedd.edit` of the jobs: None if the schedd set the attribute in each, else why
    not."""
    names = ", ".join(job_ids)
    try:
        edited = schedd.edit(job_ids, attribute, value)
    except POOL_ERRORS as error:
        return f"schedd refused the edit of {names}: {error}"
    if edited != len(job_ids):
        return f"job {names} not found by its schedd"
    return None


def _number_literal(amount: float) -> str:
    """A number as a ClassAd literal (a whole number without a decimal point)."""
    return str(int(amount)) if float(amount).is_integer() else repr(float(amount))


def _act_problem(result: classad2.ClassAd | None) -> str | None:
    """None if `Schedd.act` vacated the job, else why not."""
    if result is None:
        return "no answer from the schedd"
    if result.get("TotalSuccess", 0) >= 1:
        return None
    for attribute, meaning in ACT_FAILURES:
        if result.get(attribute, 0):
            return meaning
    return "not vacated (no success reported)"
