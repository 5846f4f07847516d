"""Charging: from the identity HTCondor authenticated to a grid owner, and why.

Every case here is an identity a pool's user could present: their own account, an accounting
group they named in their submit file, or a user of another UID domain (a schedd of their own
advertising to the pool's collector sets `User` with the domain it likes)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gridfair.ad_views import DYNAMIC, Job, JobStatus, Machine, Snapshot
from gridfair.classads.submitters import (
    ANY_DOMAIN,
    SubmitterMap,
    charge_snapshot,
    merge_charges,
)
from gridfair.daemon.backends.ads import snapshot_of
from gridfair.errors import InputError
from gridfair.text import NAME_WIDTH, SHOWN_NAMES

OWNERS = {"User1", "User2", "carol", "dave@lab.org", "physics"}
POOL = SubmitterMap("gridfair.test")


def test_an_authenticated_user_of_the_pools_domain_is_the_owner_of_its_name() -> None:
    charge = POOL.charge("User1@gridfair.test", None, OWNERS)
    assert (charge.owner, charge.identity, charge.mapped) == ("User1", "User1@gridfair.test",
                                                              True)
    assert charge.rule == "authenticated user of the pool's UID_DOMAIN gridfair.test"


def test_a_user_of_another_domain_is_not_the_owner_of_its_name() -> None:
    """The old default (`uid_domain = "*"`) charged `User1@evil.example` to User1."""
    charge = POOL.charge("User1@evil.example", None, OWNERS)
    assert (charge.owner, charge.mapped) == ("User1@evil.example", False)
    assert charge.rule == "owns no slot: evil.example is not the pool's UID_DOMAIN gridfair.test"
    assert SubmitterMap(ANY_DOMAIN).charge("User1@evil.example", None, OWNERS).owner == "User1"


def test_a_named_accounting_group_is_ignored_unless_the_pool_validates_groups() -> None:
    """`accounting_group_user = User1` in anyone's submit file once made them User1."""
    charge = POOL.charge("mallory@gridfair.test", "User1", OWNERS)
    assert (charge.owner, charge.mapped) == ("mallory@gridfair.test", False)
    assert charge.reason == "owns no slot; accounting group User1 not trusted"
    [merged] = merge_charges([POOL.charge("mallory@gridfair.test", "User2", OWNERS), charge])
    assert merged.reason == "owns no slot; accounting group User1, User2 not trusted"
    trusting = SubmitterMap("gridfair.test", trust_groups=True)
    charge = trusting.charge("alice@gridfair.test", "physics", OWNERS)
    assert (charge.identity, charge.owner, charge.mapped) == ("group physics", "physics", True)
    assert charge.rule.startswith("accounting group (trusted: the pool validates groups)")
    # No group named: the authenticated user, as without trust.
    assert trusting.charge("User2@gridfair.test", None, OWNERS).owner == "User2"


def test_owners_named_with_a_domain_and_unknown_names_are_kept() -> None:
    assert POOL.charge("dave@lab.org", None, OWNERS).owner == "dave@lab.org"
    charge = POOL.charge("erin@gridfair.test", None, OWNERS)
    assert (charge.owner, charge.rule, charge.mapped) == ("erin@gridfair.test",
                                                          "owns no slot", False)


def test_a_map_file_comes_first_whole_name_then_bare_name_of_the_pools_domain(
        tmp_path: Path) -> None:
    path = tmp_path / "owners.map"
    path.write_text("# submitter owner\nalice@lab.org User1\nbob User2  # the pool's bob\n"
                    "group_hep physics\n")
    mapping = SubmitterMap.from_file(path, "gridfair.test")
    assert mapping.charge("alice@lab.org", None, OWNERS).owner == "User1"
    assert mapping.charge("bob@gridfair.test", None, OWNERS).rule == "submitter map owners.map:3"
    # A bare name stands for the pool's own user: another domain's bob is not it.
    assert mapping.charge("bob@anywhere", None, OWNERS).owner == "bob@anywhere"
    assert mapping.charge("carol@gridfair.test", None, OWNERS).owner == "carol"
    assert mapping.charge("carol@lab.org", None, OWNERS).owner == "carol@lab.org"  # unmapped: kept
    groups = SubmitterMap.from_file(path, "gridfair.test", trust_groups=True)
    assert groups.charge("x@gridfair.test", "group_hep", OWNERS).owner == "physics"


@pytest.mark.parametrize(("text", "message"), [
    ("alice\n", r"owners.map:1: expected 'submitter owner'"),
    ("a U1\n\na U2\n", r"owners.map:3: submitter 'a' mapped twice"),
])
def test_a_bad_map_file_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "owners.map"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        SubmitterMap.from_file(path, "gridfair.test")


def test_a_missing_map_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing.map: cannot read"):
        SubmitterMap.from_file(tmp_path / "missing.map", "gridfair.test")


class Compared(str):
    """A group name that counts how often a sort compares it."""

    comparisons = 0

    def __lt__(self, other: str) -> bool:
        Compared.comparisons += 1
        return str.__lt__(self, other)


def test_a_flood_of_a_group_per_job_costs_one_sort_and_a_bounded_reason() -> None:
    """`accounting_group = g$(Process)` in one submit of many jobs: the identity's groups
    are merged in one sort (merging them charge by charge sorted them again each time:
    quadratic, 62.6 s at 20,000 jobs), and its reason names a few of them, not all (149 kB)."""
    flood = 1000
    long_name = "g" * 10 * NAME_WIDTH
    groups = [Compared(f"g{index:04d}") for index in range(flood - 1)] + [long_name]
    jobs = tuple(Job(f"1.{index}", "mallory@gridfair.test", JobStatus.IDLE, index,
                     group=group) for index, group in enumerate(groups))
    machines = (Machine("slot1@a", "User1", 1000.0, 1, 1024),)
    Compared.comparisons = 0
    [charge] = charge_snapshot(Snapshot(0.0, machines, jobs), POOL).charges
    assert Compared.comparisons <= 2 * flood * math.log2(flood)
    assert len(charge.ignored_groups) == flood
    assert charge.reason == ("owns no slot; accounting group g0000, g0001, g0002, g0003, "
                             f"g0004 and {flood - SHOWN_NAMES} more not trusted")
    [lengthy] = merge_charges([POOL.charge("eve@gridfair.test", long_name, OWNERS)])
    assert len(lengthy.reason) < NAME_WIDTH + 60


def test_a_job_known_only_from_its_slot_is_charged_to_its_group_as_its_idle_jobs_are() -> None:
    """The daemon knows running jobs from their slots' ads: with groups trusted, a running
    job of `group_ml.gpu` was charged to its user (so to no group, and vacated as `<none>`'s)
    while its idle siblings were the group's, and its GPU was not counted."""
    slot = Machine("slot1_1@vm", "pool", 1000.0, 2, 4096, state="Claimed", activity="Busy",
                   running_job="3.0", running_user="G@gridfair.test",
                   running_group="group_ml.gpu", slot_type=DYNAMIC, gpus=1)
    idle = Job("3.1", "G@gridfair.test", JobStatus.IDLE, 0.0, group="group_ml.gpu",
               request_gpus=1)
    trusting = SubmitterMap("gridfair.test", trust_groups=True)
    snapshot = charge_snapshot(snapshot_of(0.0, [slot], [idle], ()), trusting)
    running = snapshot.jobs_by_id["3.0"]
    assert running.identity == snapshot.jobs_by_id["3.1"].identity == "group group_ml.gpu"
    assert (running.request_cpus, running.request_memory, running.request_gpus) == (2, 4096, 1)
