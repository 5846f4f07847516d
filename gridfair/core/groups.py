"""The pool's accounting groups as a tree: quotas, surplus, autoregroup and priority factors.

A pool's fair share is often a tree of accounting groups (HTCondor's hierarchical group quotas:
`GROUP_NAMES`, `GROUP_QUOTA_<g>`, ...). Group names are dotted paths, as HTCondor's: the parent
of `group_physics.hep` is `group_physics`, which must be listed too. The root is `<none>`,
HTCondor's own name for it: its users are the jobs with no group (or a group not listed), and
it keeps what its children's quotas leave (`hgq_assign_quotas`).

A quota is static (an amount; a plain number is cpus, as HTCondor's default `SLOT_WEIGHT`; a
table gives one per resource: cpus, memory, gpus) or dynamic (a fraction 0-1 of the parent's
quota, of every resource). A resource a static quota does not name is not limited by it. A
group given neither has quota 0, as in HTCondor. Quotas are ceilings unless the group accepts
surplus (`GROUP_ACCEPT_SURPLUS[_<g>]`).

The tree is read from gridfair's TOML (`[groups]`, `tree_from_toml`) or from HTCondor knobs
given as a mapping (`tree_from_knobs`: `htcondor2.param` on a live pool, a dict in tests), with
one clear error per mistake. It is pure and immutable; `GroupTree.quotas` gives each group's
quota in a pool of given capacity, as HTCondor assigns it (with quota oversubscription, its
default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gridfair.core.pool import CPUS, GPUS, MEMORY
from gridfair.errors import ConfigError

#: The root of every tree: the users of no group (HTCondor's name for it).
NONE_GROUP = "<none>"
#: The resources a quota may name, by name (in the order of `UserState.usage`).
QUOTA_RESOURCES = {"cpus": CPUS, "memory": MEMORY, "gpus": GPUS}
#: How a group's own users may be ordered among themselves: by dominant share (DRF), by
#: HTCondor's effective priority (decayed usage, as HTCondor orders a group's submitters), or
#: by SDRF's priority, entitled to the group's share (`policies/group_orders.py`).
GROUP_ORDERS = ("drf", "condor", "sdrf")
#: How far over 1 siblings' dynamic quotas may sum (scaled to 1) before they are refused.
DYNAMIC_SUM_SLACK = 1e-4
#: A pool user charged to accounting group G is named `group G` (`classads/submitters.py`,
#: only when the pool validates groups: `trust_accounting_groups`).
GROUP_IDENTITY = "group "


@dataclass(frozen=True)
class Group:
    """One accounting group of the tree."""

    name: str
    parent: str  # NONE_GROUP for a top-level group
    #: Static quota: resource index -> amount (a resource not named is not limited).
    static: Mapping[int, float] = field(default_factory=dict)
    #: Dynamic quota: a fraction of the parent's quota, or None.
    dynamic: float | None = None
    accept_surplus: bool = False
    autoregroup: bool = False
    prio_factor: float = 1.0
    #: Users the administrator puts in this group (gridfair's TOML; the simulator's users).
    users: tuple[str, ...] = ()
    #: How the group's own users are ordered among themselves (`GROUP_ORDERS`).
    order: str = "drf"


@dataclass(frozen=True)
class GroupTree:
    """Groups, parents before children, in the order given; the root `<none>` is implicit."""

    groups: tuple[Group, ...] = ()
    #: `<none>`'s surplus rule (HTCondor's `GROUP_ACCEPT_SURPLUS`, the default of every group).
    none_accepts_surplus: bool = False

    def __post_init__(self) -> None:
        by_name = {group.name: group for group in self.groups}
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_members", {user: group.name for group in self.groups
                                              for user in group.users})

    @property
    def flat(self) -> bool:
        """No groups: every user is in `<none>` (plain DRF)."""
        return not self.groups

    def group(self, name: str) -> Group:
        return self._by_name[name]  # type: ignore[attr-defined]

    def names(self) -> list[str]:
        """`<none>` then every group, parents before children."""
        return [NONE_GROUP, *(group.name for group in self.groups)]

    def children(self, name: str) -> list[Group]:
        return [group for group in self.groups if group.parent == name]

    def ancestors(self, name: str) -> list[str]:
        """`name`, its parent, ... up to and including `<none>`."""
        path = [name]
        while path[-1] != NONE_GROUP:
            path.append(self.group(path[-1]).parent)
        return path

    def group_of(self, user: str) -> str:
        """The group a pool user is charged to: the group its trusted identity names
        (`group G`; a name not listed goes to its longest listed prefix, as HTCondor's
        accountant does), else the group the administrator put it in, else `<none>`."""
        if user.startswith(GROUP_IDENTITY):
            name = user[len(GROUP_IDENTITY):]
            while name:
                if name in self._by_name:  # type: ignore[attr-defined]
                    return name
                name = name.rpartition(".")[0]
            return NONE_GROUP
        return self._members.get(user, NONE_GROUP)  # type: ignore[attr-defined]

    def quotas(self, capacity: Sequence[float]) -> dict[str, list[float]]:
        """Each group's quota per resource (math.inf: not limited) in a pool of `capacity`,
        as HTCondor's `hgq_assign_quotas` assigns them (oversubscription allowed): static
        children take their quota, dynamic ones share what is left of the parent's in
        proportion (scaled down when they sum over 1); `<none>` has the whole pool."""
        quotas = {NONE_GROUP: [float(amount) for amount in capacity]}
        for parent in self.names():
            kids = self.children(parent)
            if not kids:
                continue
            total = quotas[parent]
            dynamic_sum = math.fsum(kid.dynamic or 0.0 for kid in kids)
            for resource in range(len(capacity)):
                static_sum = math.fsum(kid.static.get(resource, 0.0) for kid in kids
                                       if kid.dynamic is None)
                left = max(0.0, total[resource] - static_sum)
                for kid in kids:
                    row = quotas.setdefault(kid.name, [math.inf] * len(capacity))
                    if kid.dynamic is not None:
                        row[resource] = kid.dynamic * left / max(dynamic_sum, 1.0)
                    elif resource in kid.static:
                        row[resource] = kid.static[resource]
        return quotas

    def remainder(self, name: str, quotas: Mapping[str, Sequence[float]]) -> list[float]:
        """What group `name`'s children leave of its quota, per resource: its own users'
        part (HTCondor's parent keeps Q - sum of the children's quotas)."""
        own = quotas[name]
        kids = self.children(name)
        return [max(0.0, amount - math.fsum(quotas[kid.name][resource] for kid in kids
                                            if math.isfinite(quotas[kid.name][resource])))
                for resource, amount in enumerate(own)]


# ----------------------------------------------------------------- validation
def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{where}: expected a finite number >= 0, got {value!r}")
    return number


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{where}: expected true or false, got {value!r}")


def _order(value: Any, where: str) -> str:
    if value not in GROUP_ORDERS:
        raise ConfigError(f"{where}: {value!r} is not an order of a group's users (known: "
                          f"{', '.join(GROUP_ORDERS)})")
    return str(value)


def _static_quota(value: Any, where: str) -> dict[int, float]:
    """A static quota: a number (cpus) or a table resource -> amount."""
    if not isinstance(value, Mapping):
        return {CPUS: _number(value, where)}
    quota = {}
    for resource, amount in value.items():
        if resource not in QUOTA_RESOURCES:
            known = ", ".join(QUOTA_RESOURCES)
            raise ConfigError(f"{where}: unknown resource {resource!r} (known: {known})")
        quota[QUOTA_RESOURCES[resource]] = _number(amount, f"{where}.{resource}")
    return quota


def check_tree(groups: Iterable[Group], none_accepts_surplus: bool, where: str) -> GroupTree:
    """The tree of `groups` (any order), checked: names unique, every parent listed, dynamic
    quotas 0-1 and not over 1 among siblings. `where` names the source in errors."""
    listed: dict[str, Group] = {}
    for group in groups:
        if not group.name or group.name == NONE_GROUP or group.name.startswith(".") \
                or group.name.endswith(".") or ".." in group.name:
            raise ConfigError(f"{where}: {group.name!r} is not a group name")
        if group.name in listed:
            raise ConfigError(f"{where}: group {group.name!r} is listed twice")
        listed[group.name] = group
    for group in listed.values():
        if group.parent != NONE_GROUP and group.parent not in listed:
            raise ConfigError(f"{where}: group {group.name!r} has parent {group.parent!r}, "
                              "which is not listed")
        if group.dynamic is not None and group.dynamic > 1:
            raise ConfigError(f"{where}: group {group.name!r}: dynamic quota "
                              f"{group.dynamic:g} is over 1")
    members: dict[str, str] = {}
    for group in listed.values():
        for user in group.users:
            if user in members:
                raise ConfigError(f"{where}: user {user!r} is in groups {members[user]!r} "
                                  f"and {group.name!r}: a user is in one group")
            members[user] = group.name
    ordered: list[Group] = []

    def place(name: str) -> None:
        for group in listed.values():
            if group.parent == name:
                ordered.append(group)
                place(group.name)

    place(NONE_GROUP)
    for parent in [NONE_GROUP, *listed]:
        siblings = [group for group in ordered if group.parent == parent
                    and group.dynamic is not None]
        total = math.fsum(group.dynamic or 0.0 for group in siblings)
        # Rounding, as HTCondor allows it (its rescale warning's threshold): the manual's own
        # thirds, 0.33334 + 0.66667, are scaled to 1, not refused.
        if total > 1 + DYNAMIC_SUM_SLACK:
            names = ", ".join(group.name for group in siblings)
            raise ConfigError(f"{where}: dynamic quotas of the children of {parent!r} sum "
                              f"to {total:g}, over 1 ({names})")
    return GroupTree(tuple(ordered), none_accepts_surplus)


def parent_of(name: str) -> str:
    return name.rpartition(".")[0] or NONE_GROUP


# ----------------------------------------------------------------------- TOML
GROUP_KEYS = ("quota", "quota_dynamic", "accept_surplus", "autoregroup", "prio_factor", "users",
              "order")
DEFAULT_KEYS = ("accept_surplus", "autoregroup")
#: A default of every group that is not a flag.
DEFAULT_ORDER = "order"


def tree_from_toml(section: Mapping[str, Any], where: str = "[groups]") -> GroupTree:
    """The tree of a TOML `[groups]` section: defaults `accept_surplus`, `autoregroup` and
    `order`, and one table a group (`[groups."group_physics.hep"]`) of `quota` (a number:
    cpus; or a table of cpus, memory, gpus) or `quota_dynamic` (0-1), `accept_surplus`,
    `autoregroup`, `prio_factor` (>= 1), `users` (the users in it) and `order` (how its own
    users are ordered, `GROUP_ORDERS`). The default `order` is one order, or a table of
    group -> order (`order = {group_sci = "sdrf"}`, drf for the groups it leaves out)."""
    defaults = {key: _flag(section.get(key, False), f"{where} {key}") for key in DEFAULT_KEYS}
    default_order, orders = _orders(section, where)
    groups = []
    for name, table in section.items():
        if name in (*DEFAULT_KEYS, DEFAULT_ORDER):
            continue
        here = f'{where} group "{name}"'
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} {name}: expected a table of the group's settings "
                              f"or one of {', '.join((*DEFAULT_KEYS, DEFAULT_ORDER))}, "
                              f"got {table!r}")
        unknown = sorted(set(table) - set(GROUP_KEYS))
        if unknown:
            raise ConfigError(f"{here}: unknown key {unknown[0]!r} "
                              f"(known: {', '.join(GROUP_KEYS)})")
        users = table.get("users", [])
        if not isinstance(users, list) or not all(isinstance(user, str) for user in users):
            raise ConfigError(f"{here} users: expected a list of user names, got {users!r}")
        if "order" in table and name in orders:
            raise ConfigError(f"{here} order: also given in {where} {DEFAULT_ORDER}: give one")
        groups.append(_group(
            name, here, static=table.get("quota"), dynamic=table.get("quota_dynamic"),
            accept_surplus=table.get("accept_surplus", defaults["accept_surplus"]),
            autoregroup=table.get("autoregroup", defaults["autoregroup"]),
            prio_factor=table.get("prio_factor", 1.0), users=tuple(users),
            order=_order(table.get("order", orders.get(name, default_order)),
                         f"{here} order")))
    return check_tree(groups, defaults["accept_surplus"], where)


def _orders(section: Mapping[str, Any], where: str) -> tuple[str, dict[str, str]]:
    """The `[groups]` default `order`: every group's, or a table group -> order (checked:
    every group it names is listed), and what it gives the groups it leaves out."""
    value = section.get(DEFAULT_ORDER, "drf")
    if not isinstance(value, Mapping):
        return _order(value, f"{where} {DEFAULT_ORDER}"), {}
    orders = {}
    for name, order in value.items():
        here = f"{where} {DEFAULT_ORDER}.{name}"
        if name in (*DEFAULT_KEYS, DEFAULT_ORDER) or not isinstance(section.get(name),
                                                                     Mapping):
            raise ConfigError(f"{here}: the users of no group are ordered by DRF, as H-DRF's "
                              "root" if name == NONE_GROUP else
                              f"{here}: {name!r} is not a group of this table")
        orders[name] = _order(order, here)
    return "drf", orders


def _group(name: str, where: str, *, static: Any, dynamic: Any, accept_surplus: Any,
           autoregroup: Any, prio_factor: Any, users: tuple[str, ...] = (),
           order: str = "drf", label: Callable[[str], str] = str) -> Group:
    """One group, checked; `label` names a key as its source writes it (a knob)."""
    if static is not None and dynamic is not None:
        raise ConfigError(f"{where}: both a static and a dynamic quota ({label('quota')} "
                          f"and {label('quota_dynamic')}): give one")
    factor = _number(prio_factor, f"{where} {label('prio_factor')}")
    if factor < 1:
        raise ConfigError(f"{where} {label('prio_factor')}: {factor:g} is below 1")
    return Group(
        name=name, parent=parent_of(name),
        static={} if dynamic is not None else _static_quota(0 if static is None else static,
                                                             f"{where} {label('quota')}"),
        dynamic=(None if dynamic is None else
                 _number(dynamic, f"{where} {label('quota_dynamic')}")),
        accept_surplus=_flag(accept_surplus, f"{where} {label('accept_surplus')}"),
        autoregroup=_flag(autoregroup, f"{where} {label('autoregroup')}"),
        prio_factor=factor, users=users, order=order)


#: gridfair's key -> HTCondor's knob of a group (the name follows).
KNOB_OF = {"quota": "GROUP_QUOTA_", "quota_dynamic": "GROUP_QUOTA_DYNAMIC_",
           "accept_surplus": "GROUP_ACCEPT_SURPLUS_", "autoregroup": "GROUP_AUTOREGROUP_",
           "prio_factor": "GROUP_PRIO_FACTOR_"}


# ---------------------------------------------------------------------- knobs
def tree_from_knobs(knobs: Mapping[str, Any], where: str = "HTCondor configuration"
                    ) -> GroupTree:
    """The tree HTCondor's negotiator knobs describe (`GROUP_NAMES`, `GROUP_QUOTA_<g>`,
    `GROUP_QUOTA_DYNAMIC_<g>`, `GROUP_ACCEPT_SURPLUS[_<g>]`, `GROUP_AUTOREGROUP[_<g>]`,
    `GROUP_PRIO_FACTOR_<g>`), from a mapping of knob name to value (strings, as
    `htcondor2.param` gives them, or typed values). A knob absent is HTCondor's default."""

    def knob(name: str) -> Any:
        value = knobs.get(name)
        return None if value is None or (isinstance(value, str) and not value.strip()) \
            else value

    names = str(knob("GROUP_NAMES") or "").replace(",", " ").split()
    surplus = _flag(knob("GROUP_ACCEPT_SURPLUS") or False, f"{where} GROUP_ACCEPT_SURPLUS")
    regroup = _flag(knob("GROUP_AUTOREGROUP") or False, f"{where} GROUP_AUTOREGROUP")
    groups = []
    for name in names:
        own_surplus = knob(f"GROUP_ACCEPT_SURPLUS_{name}")
        own_regroup = knob(f"GROUP_AUTOREGROUP_{name}")
        groups.append(_group(
            name, f"{where} group {name}",
            static=knob(f"GROUP_QUOTA_{name}"), dynamic=knob(f"GROUP_QUOTA_DYNAMIC_{name}"),
            accept_surplus=surplus if own_surplus is None else own_surplus,
            autoregroup=regroup if own_regroup is None else own_regroup,
            prio_factor=knob(f"GROUP_PRIO_FACTOR_{name}") or 1.0,
            label=lambda key, name=name: KNOB_OF[key] + name))
    return check_tree(groups, surplus, where)
