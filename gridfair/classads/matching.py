"""Job-to-machine matching with classad2, evaluated once per autocluster and machine class.

A match is HTCondor's symmetric match: the job's Requirements hold with the machine as TARGET
and the machine's Requirements hold with the job as TARGET (`ClassAd.symmetricMatch`).

Evaluating it for every job and every slot is 10^9 evaluations on a pool of 10,000 slots and
100,000 jobs. As HTCondor's autoclusters do, jobs are grouped by what their match can depend
on: their Requirements text and the attributes it reads in the job, plus the job attributes the
machines' Requirements read (`RequestMemory`, `Owner`, ...), each with the attributes it reads
in turn. Machines are grouped the same way, by their Requirements and the machine attributes
the jobs' Requirements read (`Memory`, `Arch`, ...). A match is evaluated once per
(autocluster, machine class) and cached.

Which attributes are significant is learnt from the ads as they are classified: when an ad
reads an attribute of the other side that no earlier ad did, and an ad already classified
over there has it, the other side's groups are recomputed (and the cache cleared), so a group
never hides a difference that matters. An attribute no classified ad has cannot have split
them (a signature holds only attributes the ad has), so reading one regroups nothing: a flood
of jobs each reading an attribute of its own (`TARGET.Flood<N> =?= undefined`, any user may
submit it) costs one lookup a name, not a regrouping of every slot each (which made matching
grow with jobs times slots times names).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable
from typing import Any

import classad2

from gridfair.classads.reader import readable
from gridfair.core.pool import Node, Task

_TARGET_PREFIX = "target."

#: Expressions of an ad that matching evaluates.
MATCH_EXPRESSIONS = ("Requirements", "Rank")
#: Job attributes that name, date or place a job, not what it asks for or requires: jobs whose
#: ads differ in these alone match alike, where no match expression reads them.
JOB_IDENTITY = frozenset(name.lower() for name in (
    "ClusterId", "ProcId", "QDate", "JobStatus", "JobCurrentStartDate", "RemoteHost", "Owner",
    "User", "AcctGroup", "AcctGroupUser", "AccountingGroup", "JobPrio", "GlobalJobId",
    "EnteredCurrentStatus", "ServerTime", "JobRunCount"))

#: Calls that read attributes named by a value (`eval(strcat("Cluster", "Id"))`), which no
#: reference list shows.
_HIDDEN_READS = re.compile(r"\beval\w*\s*\(", re.IGNORECASE)
#: Calls whose value may change from one evaluation to the next (`CurrentTime = time()`, as
#: startds publish it; `eval` may make any call): a match reading one holds for one snapshot.
_CHANGING_CALLS = re.compile(r"\b(?:time|random|formattime|eval\w*)\s*\(", re.IGNORECASE)


def hides_reads(ad: classad2.ClassAd, attributes: Iterable[str] = MATCH_EXPRESSIONS) -> bool:
    """Whether the ad's `attributes`, or what they read of the ad, may read attributes no
    reference list names."""
    for attribute in attributes:
        if attribute not in ad:
            continue
        read = (ref.rpartition(".")[2] for ref in ad.internalRefs(ad.lookup(attribute)) if ref)
        if any(_HIDDEN_READS.search(str(ad.lookup(name)))
               for name in (attribute, *read) if name in ad):
            return True
    return False


def match_references(ads: Iterable[classad2.ClassAd]) -> tuple[set[str], set[str]]:
    """(attributes of the ads themselves, attributes of the other side) that their
    Requirements and Rank read. An unscoped name the ad lacks may be either: both get it."""
    own: set[str] = set()
    other: set[str] = set()
    for ad in ads:
        for expression in MATCH_EXPRESSIONS:
            if expression not in ad:
                continue
            tree = ad.lookup(expression)
            own.update(ref.rpartition(".")[2] for ref in ad.internalRefs(tree))
            for ref in ad.externalRefs(tree):
                scope, dot, name = ref.rpartition(".")
                if not dot or scope.lower() == "my":
                    own.add(name)
                if not dot or scope.lower() == "target":
                    other.add(name)
    return own, other


def match_key(text: str, unread: Collection[str]) -> bytes:
    """What identifies an old-syntax job ad's match group: a digest of its lines but those
    setting an attribute of `unread` (lower-case names; identity attributes no expression of
    the match reads). Collision-resistant, whatever users write: a job cannot make its key
    another's without the same lines. The text's own lines, in order (`printOld`'s, or a
    dump's: one attribute a line)."""
    kept = "\n".join(line for line in text.split("\n")
                     if line.partition("=")[0].strip().lower() not in unread)
    return hashlib.blake2b(kept.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def reaches(ad: classad2.ClassAd, slot_reads: Collection[str], names: Collection[str]) -> bool:
    """Whether the ad's match expressions, or its attributes the slots read, read any of
    `names` (lower-case; in the ad or, unscoped or MY., as it may be seen through another;
    classad2 follows references within the ad through), or may (`eval` and the like)."""
    if hides_reads(ad, (*MATCH_EXPRESSIONS, *slot_reads)):
        return True
    for attribute in (*MATCH_EXPRESSIONS, *slot_reads):
        if attribute not in ad:
            continue
        tree = ad.lookup(attribute)
        refs = [*ad.internalRefs(tree), *ad.externalRefs(tree)]
        if any(scope.lower() in ("", "my") and name.lower() in names
               for scope, _, name in (ref.rpartition(".") for ref in refs)):
            return True
    return False


def symmetric_match(job_ad: classad2.ClassAd, machine_ad: classad2.ClassAd) -> bool:
    """Both Requirements hold, each with the other ad as TARGET (`ClassAd.symmetricMatch`).

    An ad without Requirements places no constraint. HTCondor's daemons always publish one,
    so this only matters for hand-written ads, which classad2 would otherwise never match.
    """
    if "Requirements" in job_ad and "Requirements" in machine_ad:
        return job_ad.symmetricMatch(machine_ad)
    return (("Requirements" not in machine_ad or job_ad.matches(machine_ad))
            and ("Requirements" not in job_ad or machine_ad.matches(job_ad)))


class _Side:
    """One side of the match (jobs or machines): groups of ads that match alike."""

    def __init__(self) -> None:
        self.significant: set[str] = set()  # lower-case names the other side's ads read
        # An ad of the other side may read names built at run time (`eval`): any attribute
        # may then matter, and only ads alike in every attribute match alike.
        self.whole = False
        self.attributes: set[str] = set()  # lower-case names the ads classified have
        self.group_of: dict[str, int] = {}  # job id or machine name -> group
        self.group_ids: dict[tuple[Any, ...], int] = {}
        self.representatives: list[classad2.ClassAd] = []
        # id of an ad -> (the ad, its group): ads shared by several jobs (the `files`
        # backend's match groups) are parsed and classified once.
        self.group_of_ad: dict[int, tuple[Any, int]] = {}
        # Groups whose match may read the clock (`_CHANGING_CALLS`).
        self.changing: set[int] = set()

    def reset(self) -> None:
        self.attributes.clear()
        self.group_of.clear()
        self.group_of_ad.clear()
        self.group_ids.clear()
        self.representatives.clear()
        self.changing.clear()


class AutoclusterMatcher:
    """`(Task, Node) -> bool` for `Pool(matcher=...)`: the symmetric match of `task.ad` and
    `node.ad`, cached per (autocluster, machine class). A task or node without an ad matches
    by resources only, which the pool checks itself, so the answer is True.

    Groups and matches are cached for the matcher's life, keyed by job id and machine name:
    use a new matcher for each snapshot (as `pool_from_snapshot` does), or, to keep one across
    snapshots (as `KeptPool` does), call `forget_job`/`forget_machine` when the ad behind an id
    changes and `next_snapshot` before matching a new snapshot."""

    def __init__(self) -> None:
        self._jobs = _Side()
        self._machines = _Side()
        self._matches: dict[tuple[int, int], bool] = {}
        self._regroupings = 0
        self.evaluations = 0  # symmetric matches evaluated (the rest came from the cache)

    def __call__(self, task: Task, node: Node) -> bool:
        job_ad, machine_ad = task.ad, node.ad
        if job_ad is None or machine_ad is None:
            return True
        jobs, machines = self._jobs, self._machines
        job_group = jobs.group_of.get(task.id)
        machine_group = machines.group_of.get(node.name)
        while job_group is None or machine_group is None:
            # A new group may read attributes of the other side that no group read before,
            # which regroups that side: classify both again until neither changes.
            regroupings = self._regroupings
            job_group = self._classify(jobs, machines, task.id, job_ad)
            machine_group = self._classify(machines, jobs, node.name, machine_ad)
            if self._regroupings != regroupings:
                job_group = machine_group = None
        key = (job_group, machine_group)
        matched = self._matches.get(key)
        if matched is None:
            self.evaluations += 1
            matched = self._matches[key] = symmetric_match(
                jobs.representatives[job_group], machines.representatives[machine_group]
            )
        return matched

    @property
    def autoclusters(self) -> int:
        return len(self._jobs.representatives)

    @property
    def machine_classes(self) -> int:
        return len(self._machines.representatives)

    @property
    def regroupings(self) -> int:
        """How many times one side's groups were recomputed (each costs a classification of
        every ad of that side again)."""
        return self._regroupings

    def forget_job(self, job_id: str) -> None:
        self._jobs.group_of.pop(job_id, None)

    def forget_machine(self, name: str) -> None:
        self._machines.group_of.pop(name, None)

    def next_snapshot(self) -> None:
        """Drop the matches that read the clock (or may: `eval`), which held when they were
        evaluated, not necessarily now; the others hold while the ads do."""
        jobs, machines = self._jobs.changing, self._machines.changing
        if jobs or machines:
            self._matches = {key: matched for key, matched in self._matches.items()
                             if key[0] not in jobs and key[1] not in machines}

    def _classify(self, side: _Side, other: _Side, key: str, ad: Any) -> int:
        group = side.group_of.get(key)
        if group is not None:
            return group
        classified = side.group_of_ad.get(id(ad))
        if classified is not None:
            group = side.group_of[key] = classified[1]
            return group
        kept = ad
        ad = readable(ad)  # an ad kept as text is parsed to be classified
        side.attributes.update(name.lower() for name in ad)
        signature = _signature(ad, side.significant, side.whole)
        group = side.group_ids.get(signature)
        if group is None:
            # Ads of one signature read the same attributes of the other side (their
            # Requirements and everything it reaches in them are the same), so learning
            # from the first is learning from all.
            self._learn(ad, other)
            group = side.group_ids[signature] = len(side.representatives)
            side.representatives.append(ad)
            # The signature holds the text of everything the match reads of the ad.
            if _CHANGING_CALLS.search(repr(signature)):
                side.changing.add(group)
        side.group_of[key] = group
        side.group_of_ad[id(kept)] = (kept, group)
        return group

    def _learn(self, ad: classad2.ClassAd, other: _Side) -> None:
        """Make what `ad`'s Requirements read of the other side significant over there."""
        if "Requirements" not in ad:
            return
        read = {_unscoped(name) for name in _refs(ad.externalRefs(ad.lookup("Requirements")))}
        new = read - other.significant
        other.significant |= new
        hidden = not other.whole and hides_reads(ad, ("Requirements",))
        other.whole = other.whole or hidden
        if hidden and other.attributes or not new.isdisjoint(other.attributes):
            other.reset()
            self._matches.clear()
            self._regroupings += 1


def _signature(ad: classad2.ClassAd, significant: set[str], whole: bool) -> tuple[Any, ...]:
    """What a match with this ad can depend on: its Requirements, and the text of every
    attribute of its own that its Requirements or the other side read (with what those
    attributes read in turn); the whole ad if those may read names built at run time
    (`eval`: `eval(strcat("Cluster", "Id"))` reads an attribute no reference list shows), or
    the other side's may (`whole`)."""
    if whole:
        return (None, str(ad))
    # Whichever is shorter is looked through: the other side's reads (a flood may make them
    # many) or the ad's own attributes (an ad may have many).
    names = ({name for name in significant if name in ad} if len(significant) <= len(ad)
             else {lowered for lowered in map(str.lower, ad) if lowered in significant})
    if "Requirements" in ad:
        requirements = ad.lookup("Requirements")
        names.update(name.lower() for name in _refs(ad.internalRefs(requirements)))
        text = str(requirements)
    else:
        text = None
    for name in list(names):
        names.update(name.lower() for name in _refs(ad.internalRefs(ad.lookup(name))))
    if hides_reads(ad, ("Requirements", *names)):
        return (None, str(ad))
    return (text, *sorted((name, str(ad.lookup(name))) for name in names))


def _refs(listed: list[str]) -> list[str]:
    # classad2 returns its reference lists as one comma-joined string split on ",".
    return [name for name in listed if name]


def _unscoped(name: str) -> str:
    lowered = name.lower()
    if lowered.startswith(_TARGET_PREFIX):
        lowered = lowered[len(_TARGET_PREFIX):]
    return lowered.partition(".")[0]
