"""The pool's accounting group tree as its own HTCondor configuration describes it: the
negotiator's `GROUP_*` knobs, read through the bindings: `condor`, HTCondor's configuration
here (`htcondor2.param`, which reads CONDOR_CONFIG: on the central manager, the pool's), or
`condor@HOST[:PORT]`, the configuration of the running negotiator that the collector at
HOST:PORT lists (`htcondor2.RemoteParam`: the knobs as that daemon has them now, from any
machine the negotiator lets read its configuration)."""

from __future__ import annotations

from gridfair.core.groups import GroupTree, tree_from_knobs
from gridfair.errors import ConfigError

#: What names the pool's own configuration as a tree's source (`groups = "condor"`,
#: `gridfair shares --tree condor`); `condor@HOST[:PORT]`: its running negotiator's.
FROM_CONDOR = "condor"


def from_condor(source: object) -> bool:
    """Whether `source` names HTCondor's configuration: `condor` or `condor@HOST[:PORT]`."""
    return isinstance(source, str) and (source == FROM_CONDOR
                                        or source.startswith(FROM_CONDOR + "@"))


def pool_group_tree(source: str = FROM_CONDOR) -> GroupTree:
    """The tree of HTCondor's configuration `source` names (`from_condor`); a mistake in it,
    or a negotiator that cannot be reached, is one ConfigError."""
    _, at, collector = source.partition("@")
    if at and not collector.strip():
        raise ConfigError(f"{source!r}: give the collector after '@' "
                          f"({FROM_CONDOR}@HOST[:PORT]), or {FROM_CONDOR!r} alone")
    import htcondor2  # the bindings only when the pool's configuration is asked for

    if not collector:
        return tree_from_knobs(htcondor2.param)
    where = f"the configuration of the negotiator of {collector}"
    try:
        negotiator = htcondor2.Collector(collector).locate(htcondor2.DaemonType.Negotiator)
        knobs = htcondor2.RemoteParam(negotiator)
        # Read once, here: a lookup is a query to the negotiator.
        names = [name for name in knobs if name.startswith("GROUP_")]
        values = {name: knobs[name] for name in names}
    except htcondor2.HTCondorException as error:
        raise ConfigError(f"{where}: cannot be read: {error}") from None
    return tree_from_knobs(values, where=where)
