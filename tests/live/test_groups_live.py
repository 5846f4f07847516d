"""The accounting group tree read from a running pool's negotiator (`groups =
"condor@HOST[:PORT]"`, `gridfair shares --tree condor@HOST`): the knobs as the daemon has
them, through `htcondor2.RemoteParam`, the same tree as gridfair's reading of the same
knobs; a collector that does not answer is one clear error."""

from __future__ import annotations

import pytest

from gridfair.classads.pool_groups import pool_group_tree
from gridfair.core.groups import tree_from_knobs
from gridfair.errors import ConfigError
from gridfair.policies.hdrf import HdrfOrder
from tests.live.conftest import own_pool

KNOBS = {
    "GROUP_NAMES": "group_physics, group_physics.hep, group_chem",
    "GROUP_QUOTA_DYNAMIC_group_physics": "0.6",
    "GROUP_QUOTA_DYNAMIC_group_physics.hep": "0.5",
    "GROUP_QUOTA_group_chem": "4",
    "GROUP_ACCEPT_SURPLUS": "True",
    "GROUP_ACCEPT_SURPLUS_group_chem": "False",
    "GROUP_AUTOREGROUP_group_chem": "True",
    "GROUP_PRIO_FACTOR_group_chem": "10",
}


def test_the_tree_is_read_from_the_running_negotiator() -> None:
    # No startd: no slot is needed to read a configuration (the harness waits for a schedd).
    pool = own_pool([], extra_config=["DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR, SCHEDD",
                                      *(f"{name} = {value}" for name, value in KNOBS.items())],
                    daemon_account=None)
    with pool:
        import htcondor2

        collector = htcondor2.Collector(pool.collector_host)
        pool.wait_until(lambda: collector.locateAll(htcondor2.DaemonType.Negotiator), 30)
        tree = pool_group_tree(f"condor@{pool.collector_host}")
        assert tree == tree_from_knobs(KNOBS, where=f"the configuration of the negotiator "
                                                    f"of {pool.collector_host}")
        assert [group.name for group in tree.groups] == [
            "group_physics", "group_physics.hep", "group_chem"]
        chem = tree.group("group_chem")
        assert (chem.accept_surplus, chem.autoregroup, chem.prio_factor) == (False, True, 10.0)
        order = HdrfOrder(groups=f"condor@{pool.collector_host}")
        assert order.tree == tree
    with pytest.raises(ConfigError, match="the configuration of the negotiator of "
                                          f"{pool.collector_host}: cannot be read"):
        pool_group_tree(f"condor@{pool.collector_host}")  # stopped
