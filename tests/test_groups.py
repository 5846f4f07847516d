"""The accounting group tree (`core/groups.py`): read from gridfair's TOML and from HTCondor's
knobs alike, one clear error per mistake, quotas assigned as HTCondor's `hgq_assign_quotas`
does, and users charged to a group only through the identity the trust rule gives them."""

from __future__ import annotations

import math

import pytest

from gridfair.core.groups import NONE_GROUP, tree_from_knobs, tree_from_toml
from gridfair.core.pool import CPUS, GPUS, MEMORY
from gridfair.errors import ConfigError
from gridfair.policies.hdrf import HdrfOrder

KNOBS = {
    "GROUP_NAMES": "group_physics, group_physics.hep, group_physics.lep, group_chem",
    "GROUP_QUOTA_group_physics": "60",
    "GROUP_QUOTA_DYNAMIC_group_physics.hep": "0.75",
    "GROUP_QUOTA_DYNAMIC_group_physics.lep": "0.25",
    "GROUP_QUOTA_DYNAMIC_group_chem": "0.5",
    "GROUP_ACCEPT_SURPLUS": "false",
    "GROUP_ACCEPT_SURPLUS_group_physics.hep": "True",
    "GROUP_AUTOREGROUP_group_chem": "true",
    "GROUP_PRIO_FACTOR_group_chem": "10",
}
TOML = {
    "accept_surplus": False,
    "group_physics": {"quota": 60},
    "group_physics.hep": {"quota_dynamic": 0.75, "accept_surplus": True},
    "group_physics.lep": {"quota_dynamic": 0.25},
    "group_chem": {"quota_dynamic": 0.5, "autoregroup": True, "prio_factor": 10},
}


def test_knobs_and_toml_give_the_same_tree() -> None:
    from_knobs = tree_from_knobs(KNOBS)
    assert from_knobs == tree_from_toml(TOML)
    assert from_knobs.names() == [NONE_GROUP, "group_physics", "group_physics.hep",
                                  "group_physics.lep", "group_chem"]
    hep = from_knobs.group("group_physics.hep")
    assert (hep.parent, hep.dynamic, hep.accept_surplus) == ("group_physics", 0.75, True)
    chem = from_knobs.group("group_chem")
    assert (chem.autoregroup, chem.prio_factor, chem.accept_surplus) == (True, 10.0, False)


def test_quotas_are_assigned_as_htcondor_does() -> None:
    quotas = tree_from_knobs(KNOBS).quotas([100.0, 400.0, 100.0, 0.0])
    # physics static 60 cpus (memory not limited); chem dynamic 0.5 of what statics leave.
    assert quotas["group_physics"][CPUS] == 60
    assert math.isinf(quotas["group_physics"][MEMORY])
    assert quotas["group_chem"][CPUS] == 20  # 0.5 * (100 - 60)
    assert quotas["group_chem"][MEMORY] == 200  # 0.5 * 400: no static takes memory
    assert quotas["group_physics.hep"][CPUS] == 45
    assert quotas["group_physics.lep"][CPUS] == 15
    assert quotas["group_chem"][GPUS] == 0


def test_a_quota_per_resource() -> None:
    tree = tree_from_toml({"gpu": {"quota": {"cpus": 4, "gpus": 2, "memory": 8000}}})
    assert tree.quotas([10.0, 9000.0, 10.0, 4.0])["gpu"] == [4.0, 8000.0, math.inf, 2.0]


@pytest.mark.parametrize(("section", "error"), [
    ({"a.b": {"quota": 1}}, "group 'a.b' has parent 'a', which is not listed"),
    ({"a": {"quota_dynamic": 0.7}, "b": {"quota_dynamic": 0.6}},
     "dynamic quotas of the children of '<none>' sum to 1.3, over 1 (a, b)"),
    ({"a": {"quota": 2, "quota_dynamic": 0.5}},
     'group "a": both a static and a dynamic quota'),
    ({"a": {"quota": {"cpus": 1, "disk": 5}}}, "unknown resource 'disk'"),
    ({"a": {"quota": -1}}, "expected a finite number >= 0, got -1"),
    ({"a": {"quota_dynamic": 1.5}}, "dynamic quota 1.5 is over 1"),
    ({"a": {"quota": 1, "weight": 2}}, "unknown key 'weight'"),
    ({"a": {"users": ["x"]}, "b": {"users": ["x"]}}, "user 'x' is in groups 'a' and 'b'"),
    ({"a": {"prio_factor": 0.5}}, "prio_factor: 0.5 is below 1"),
    ({"a": 3}, "expected a table of the group's settings"),
    ({"a": {"order": "fair"}}, 'group "a" order: \'fair\' is not an order of a group\'s users '
                               "(known: drf, condor, sdrf)"),
    ({"order": "fifo", "a": {}}, "[groups] order: 'fifo' is not an order"),
    ({"order": {"a": "fifo"}, "a": {}}, "[groups] order.a: 'fifo' is not an order"),
    ({"order": {"b": "sdrf"}, "a": {}}, "[groups] order.b: 'b' is not a group of this table"),
    ({"order": {"<none>": "sdrf"}, "a": {}},
     "[groups] order.<none>: the users of no group are ordered by DRF"),
    ({"order": {"a": "sdrf"}, "a": {"order": "condor"}},
     '[groups] group "a" order: also given in [groups] order: give one'),
])
def test_one_clear_error_per_mistake(section: dict, error: str) -> None:
    with pytest.raises(ConfigError) as raised:
        tree_from_toml(section)
    assert error in str(raised.value)
    assert str(raised.value).startswith("[groups]")


def test_knob_errors_name_the_configuration() -> None:
    with pytest.raises(ConfigError, match="HTCondor configuration: group 'b.c' has parent 'b', "
                                          "which is not listed"):
        tree_from_knobs({"GROUP_NAMES": "b.c", "GROUP_QUOTA_b.c": "1"})
    with pytest.raises(ConfigError, match="group a: both a static and a dynamic quota "
                                          r"\(GROUP_QUOTA_a and GROUP_QUOTA_DYNAMIC_a\)"):
        tree_from_knobs({"GROUP_NAMES": "a", "GROUP_QUOTA_a": "1",
                         "GROUP_QUOTA_DYNAMIC_a": "0.5"})
    with pytest.raises(ConfigError, match="GROUP_ACCEPT_SURPLUS: expected true or false"):
        tree_from_knobs({"GROUP_NAMES": "a", "GROUP_ACCEPT_SURPLUS": "maybe"})
    with pytest.raises(ConfigError, match="group a GROUP_QUOTA_DYNAMIC_a: expected a number"):
        tree_from_knobs({"GROUP_NAMES": "a", "GROUP_QUOTA_DYNAMIC_a": "half"})


def test_no_group_names_is_the_flat_tree() -> None:
    assert tree_from_knobs({}).flat
    assert tree_from_knobs({"GROUP_NAMES": ""}).flat


def test_users_are_charged_to_a_group_only_through_the_trusted_identity() -> None:
    tree = tree_from_toml({**TOML, "group_chem": {"quota_dynamic": 0.5, "users": ["carol"]}})
    # `group G` is how a job is charged when the pool validates groups (trust rule).
    assert tree.group_of("group group_physics.hep") == "group_physics.hep"
    # A subgroup not listed goes to its longest listed prefix, as HTCondor's accountant.
    assert tree.group_of("group group_physics.hep.alice") == "group_physics.hep"
    assert tree.group_of("group group_unknown") == NONE_GROUP
    # An authenticated user (untrusted group ignored) is in <none> unless the admin put it in.
    assert tree.group_of("alice@pool") == NONE_GROUP
    assert tree.group_of("carol") == "group_chem"


@pytest.mark.parametrize("source", ["condor@", "condor@  "])
def test_a_negotiator_source_names_its_collector(source: str) -> None:
    """`condor@` with no collector is refused, not read as this host's configuration."""
    with pytest.raises(ConfigError, match="give the collector after '@'"):
        HdrfOrder(groups=source)


def test_the_order_of_each_group_s_users_is_chosen_in_one_table() -> None:
    """`order = {g = "sdrf"}` orders g's users by SDRF, and the groups it leaves out by DRF."""
    tree = tree_from_toml({"order": {"a.b": "sdrf", "c": "condor"}, "a": {}, "a.b": {},
                           "c": {}})
    assert [(group.name, group.order) for group in tree.groups] == \
        [("a", "drf"), ("a.b", "sdrf"), ("c", "condor")]
