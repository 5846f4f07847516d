"""The `groups` policy option read as a group tree: a `[groups]` table, a tree already built,
or the running negotiator's (`condor`, `condor@HOST[:PORT]`). Apart from `hdrf`, so that the
owner-share policies' group hook loads no ordering policy (a HOSEP run loads HOSEP alone)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gridfair.classads.pool_groups import FROM_CONDOR, from_condor, pool_group_tree
from gridfair.core.groups import GroupTree, tree_from_toml
from gridfair.errors import ConfigError


def group_tree(groups: Mapping[str, Any] | GroupTree | str | None) -> GroupTree:
    """The tree the `groups` option names (`HdrfOptions.groups`)."""
    if groups is None:
        return GroupTree()
    if isinstance(groups, str) and from_condor(groups):
        return pool_group_tree(groups)
    if isinstance(groups, GroupTree):
        return groups
    if isinstance(groups, Mapping):
        return tree_from_toml(groups)
    raise ConfigError(f"policy option groups: expected a [groups] table or {FROM_CONDOR!r} "
                      f"or '{FROM_CONDOR}@HOST[:PORT]', got {groups!r}")
