"""The pool's accounting group tree as its own HTCondor configuration describes it: the
negotiator's `GROUP_*` knobs, read through the bindings (`htcondor2.param`, which reads
CONDOR_CONFIG: on the central manager, the pool's)."""

from __future__ import annotations

from gridfair.core.groups import GroupTree, tree_from_knobs

#: What names the pool's own configuration as a tree's source (`groups = "condor"`,
#: `gridfair shares --tree condor`).
FROM_CONDOR = "condor"


def pool_group_tree() -> GroupTree:
    """The tree of HTCondor's configuration here; a mistake in it is one ConfigError."""
    import htcondor2  # the bindings only when the pool's configuration is asked for

    return tree_from_knobs(htcondor2.param)
