"""Who a job is charged to: from the identity HTCondor authenticated to a grid owner.

Every attribute a user writes is untrusted. What a job's submitter cannot forge is its `User`
(`owner@UID_DOMAIN`) and `Owner`: the schedd sets both from the account that authenticated
the submit, and refuses a submit or edit that changes them. `AccountingGroup`, `AcctGroup` and
`AcctGroupUser` are the submitter's own words (`accounting_group = ...`) unless the pool
checks them (HTCondor's `use FEATURE : AssignAccountingGroup(map)`, which refuses a group the
account may not use and makes them immutable: `configs/htcondor-accounting-groups.config`).

So a job is charged, by default, to its authenticated user, and to its accounting group only
when the pool is declared to validate groups (`trust_groups`). `SubmitterMap.charge` turns
that identity into a grid owner (slots name their owner in `GridOwner`), and says how:

0. an identity that is an owner's name as it is stays so (slots may name owners with domains);
1. a map file, if given: one `identity owner` pair a line, `#` comments, looked up by the whole
   identity (`alice@cs.example`), then, for a user of the pool's own UID domain, by the name
   without it (`alice`);
2. a user of the pool's UID domain whose name is an owner's is that owner (`User1@pool` ->
   `User1`). Only the pool's own domain: another schedd advertising to the same collector
   (a user's personal one, say) sets `User` with a domain of its choosing. `*` accepts any
   domain, for a pool whose collector admits only trusted schedds.

An identity that names no owner afterwards is charged as it is (a group as `group <name>`): it
provides no power, and `gridfair shares` lists it as unmapped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gridfair.ad_views import Charge, Snapshot
from gridfair.errors import InputError

ANY_DOMAIN = "*"


@dataclass(frozen=True, slots=True)
class SubmitterMap:
    uid_domain: str
    names: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # -> (owner, "file:line")
    trust_groups: bool = False

    @classmethod
    def of(cls, uid_domain: str, map_file: str | Path | None = None,
           trust_groups: bool = False) -> SubmitterMap:
        """The charging a configuration describes: the pool's UID domain, a map file if
        any, and whether accounting groups are trusted."""
        if map_file:
            return cls.from_file(map_file, uid_domain, trust_groups)
        return cls(uid_domain, trust_groups=trust_groups)

    @classmethod
    def from_file(cls, path: str | Path, uid_domain: str,
                  trust_groups: bool = False) -> SubmitterMap:
        """A map file of `identity owner` lines; an InputError names the file and line."""
        names: dict[str, tuple[str, str]] = {}
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise InputError(f"{path}: cannot read the submitter map: {error.strerror}") from None
        for number, line in enumerate(text.splitlines(), start=1):
            words = line.partition("#")[0].split()
            if not words:
                continue
            if len(words) != 2:
                raise InputError(f"{path}:{number}: expected 'submitter owner', "
                                 f"got {line.strip()!r}")
            if words[0] in names:
                raise InputError(f"{path}:{number}: submitter {words[0]!r} mapped twice")
            names[words[0]] = (words[1], f"{Path(path).name}:{number}")
        return cls(uid_domain, names, trust_groups)

    def charge(self, user: str, group: str | None, owners: Collection[str]) -> Charge:
        """Who a job of authenticated `user`, claiming accounting group `group` (None: none),
        is charged to, among the pool's `owners`."""
        if self.trust_groups and group:
            charge = self._owner_of(group, f"group {group}", owners, domain_rule=False)
            return Charge(charge.identity, charge.owner,
                          f"accounting group (trusted: the pool validates groups); "
                          f"{charge.rule}", charge.mapped)
        charge = self._owner_of(user, user, owners, domain_rule=True)
        if group:
            charge = Charge(charge.identity, charge.owner, charge.rule, charge.mapped, (group,))
        return charge

    def _owner_of(self, name: str, identity: str, owners: Collection[str], *,
                  domain_rule: bool) -> Charge:
        if name in owners:
            return Charge(identity, name, "names an owner", True)
        bare, at, domain = name.partition("@")
        ours = domain_rule and at and self.uid_domain in (ANY_DOMAIN, domain)
        for key in (name, bare) if ours else (name,):
            if key in self.names:
                owner, line = self.names[key]
                return Charge(identity, owner, f"submitter map {line}", True)
        if ours and bare in owners:
            return Charge(identity, bare, f"authenticated user of the pool's UID_DOMAIN "
                          f"{domain}", True)
        if domain_rule and at and not ours:
            return Charge(identity, identity, f"owns no slot: {domain} is not the pool's "
                          f"UID_DOMAIN {self.uid_domain}", False)
        return Charge(identity, identity, "owns no slot", False)


def charge_snapshot(snapshot: Snapshot, submitters: SubmitterMap) -> Snapshot:
    """The snapshot with every job and every slot's running job charged to a grid owner
    (`SubmitterMap.charge`), and the charges it made."""
    owners = {machine.owner for machine in snapshot.machines}
    charges: dict[tuple[str, str | None], Charge] = {}  # one per (user, group) named

    def charge(user: str, group: str | None) -> Charge:
        found = charges.get((user, group))
        if found is None:
            found = charges[user, group] = submitters.charge(user, group, owners)
        return found

    jobs = tuple(job.with_user((made := charge(job.user, job.group)).owner, made.identity)
                 for job in snapshot.jobs)
    machines = tuple(
        dataclasses.replace(machine, running_user=charge(machine.running_user,
                                                          machine.running_group).owner)
        if machine.running_user else machine
        for machine in snapshot.machines)
    return dataclasses.replace(snapshot, machines=machines, jobs=jobs,
                               charges=merge_charges(charges.values()))


def merge_charges(charges: Iterable[Charge]) -> tuple[Charge, ...]:
    """One charge per identity, in identity order, naming every accounting group its jobs
    named (each identity charges alike whatever the group, which is ignored unless trusted).
    One pass and one sort: a flood of jobs may name a group each. `charges` are as
    `SubmitterMap.charge` makes them, each naming at most one group."""
    first: dict[str, Charge] = {}
    groups: dict[str, set[str]] = {}
    for charge in charges:
        first.setdefault(charge.identity, charge)
        groups.setdefault(charge.identity, set()).update(charge.ignored_groups)
    # An identity whose first charge names all its groups (one, or none) is that charge.
    return tuple(first[identity] if len(groups[identity]) == len(first[identity].ignored_groups)
                 else dataclasses.replace(first[identity],
                                          ignored_groups=tuple(sorted(groups[identity])))
                 for identity in sorted(first))
