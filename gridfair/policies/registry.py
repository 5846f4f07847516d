"""Names of the policy stages, and the named compositions `--policy` offers.

An administrator composes stages (`--order sdrf --preempt hosep`), or names a common
composition (`--policy hosep` = order hosep + preempt hosep). Each name maps to a stage class,
which declares the options it reads (`Options`, a frozen dataclass): the parsed options (a
mapping of option name to value; absent options take the stage's defaults) are decoded once
into it (`core.stages.decode_options`) and the class builds a fresh stage from them, so a pool
never shares state with another; a preemption stage is also given the run's order stage (`fair`
measures users by the order's key, a capability it declares in `needs_order`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from importlib import import_module
from typing import Any, Generic, TypeVar

from gridfair.core.placement import FASTEST, PLACEMENTS, Placement
from gridfair.core.stages import (
    ALLOCATION_RULES,
    AdmitPolicy,
    OrderPolicy,
    PreemptPolicy,
    decode_options,
    option_names,
)
from gridfair.errors import ConfigError

Options = Mapping[str, Any]

Stage = TypeVar("Stage")


class StageTable(Mapping[str, type[Stage]], Generic[Stage]):
    """Stage name -> class, each class imported when first looked up: a run loads its own
    stages' modules, not every policy's (start-up, issue 50). Iterating names imports
    nothing; `values()` and `items()` import every stage. A class set directly (a plug-in,
    a test's stage) is used as given."""

    def __init__(self, paths: Mapping[str, str]) -> None:
        self._paths = dict(paths)  # name -> "module:Class"
        self._classes: dict[str, type[Stage]] = {}

    def __getitem__(self, name: str) -> type[Stage]:
        if name not in self._classes:
            module, _, attribute = self._paths[name].partition(":")
            self._classes[name] = getattr(import_module(module), attribute)
        return self._classes[name]

    def __setitem__(self, name: str, stage: type[Stage]) -> None:
        self._paths[name] = f"{stage.__module__}:{stage.__qualname__}"
        self._classes[name] = stage

    def __delitem__(self, name: str) -> None:
        del self._paths[name]
        self._classes.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


_POLICIES = "gridfair.policies."
ORDERS: StageTable[OrderPolicy] = StageTable({
    "osep": _POLICIES + "osep:OsepOrder",
    "hosep": _POLICIES + "hosep:HosepOrder",
    "drf": _POLICIES + "drf:DrfOrder",
    "wdrf": _POLICIES + "drf:WeightedDrfOrder",
    "hdrf": _POLICIES + "hdrf:HdrfOrder",
    "sdrf": _POLICIES + "sdrf:SdrfOrder",
    "dmfa-srq": _POLICIES + "dmfa_srq:DmfaSrqOrder",
    # HTCondor's priority; over a group tree, its hierarchical group quotas.
    "condor": _POLICIES + "group_quotas:GroupQuotaOrder",
    "justice": _POLICIES + "justice:JusticeOrder",
    "fair-share": _POLICIES + "deadline_baselines:FairShareOrder",
    "oracle": _POLICIES + "deadline_baselines:OracleOrder",
})
PREEMPTS: StageTable[PreemptPolicy] = StageTable({
    "osep": _POLICIES + "osep:OsepPreempt",
    "hosep": _POLICIES + "hosep:HosepPreempt",
    "reclaim": _POLICIES + "reclaim:ReclaimPreempt",
    "fair": _POLICIES + "fair_preempt:FairPreempt",
    "group-fair": _POLICIES + "group_preempt:GroupFairPreempt",
})
ADMITS: StageTable[AdmitPolicy] = StageTable({
    "justice": _POLICIES + "justice:JusticeAdmit",
    "reactive": _POLICIES + "deadline_baselines:ReactiveAdmit",
    "oracle": _POLICIES + "deadline_baselines:OracleAdmit",
})

# --policy NAME -> (order, preempt or None, admit or None)
COMPOSITIONS: dict[str, tuple[str, str | None, str | None]] = {
    "osep": ("osep", "osep", None),
    "hosep": ("hosep", "hosep", None),
    "reclaim": ("hosep", "reclaim", None),
    "drf": ("drf", None, None),
    "wdrf": ("wdrf", None, None),
    # DRF across the accounting group tree (`--groups`; without one, DRF).
    "hdrf": ("hdrf", None, None),
    # H-DRF with preemption to the tree's entitlement (`group_preempt`).
    "hdrf-fair": ("hdrf", "group-fair", None),
    "sdrf": ("sdrf", None, None),
    "dmfa-srq": ("dmfa-srq", None, None),
    # The DRF family with fair-share preemption (`fair_preempt`), for `compare`.
    "drf-fair": ("drf", "fair", None),
    "wdrf-fair": ("wdrf", "fair", None),
    "sdrf-fair": ("sdrf", "fair", None),
    "condor": ("condor", None, None),
    "justice": ("justice", None, "justice"),
    "baseline-fs": ("fair-share", None, None),
    "reactive-fs": ("fair-share", None, "reactive"),
    "oracle": ("oracle", None, "oracle"),
}


@dataclass(frozen=True)
class Stages:
    order: OrderPolicy
    preempt: PreemptPolicy | None
    admit: AdmitPolicy | None
    #: What a cycle does when the first user's next task fits no free node
    #: (`core.stages.ALLOCATION_RULES`); None: the order's paper rule.
    allocation: str | None = None
    #: Which free node an allocation takes (`core.placement`); None: `fastest`.
    placement: Placement | None = None


def _known(kind: str, table: Mapping[str, type], name: str) -> type:
    try:
        return table[name]
    except KeyError:
        known = ", ".join(sorted(table)) or "none"
        raise ConfigError(f"unknown {kind} policy {name!r} (known: {known})") from None


@dataclass(frozen=True)
class Chosen:
    """The stage classes a run names, before they are built."""

    order: type[OrderPolicy]
    preempt: type[PreemptPolicy] | None
    admit: type[AdmitPolicy] | None

    def classes(self) -> Iterator[type]:
        return (stage for stage in (self.order, self.preempt, self.admit) if stage is not None)


def choose(policy: str | None = None, *, order: str | None = None,
           preempt: str | None = None, admit: str | None = None) -> Chosen:
    """The stage classes for `--policy NAME`, with any of `--order/--preempt/--admit`
    overriding."""
    if policy is not None:
        if policy not in COMPOSITIONS:
            known = ", ".join(sorted(COMPOSITIONS))
            raise ConfigError(f"unknown policy {policy!r} (known: {known})")
        base_order, base_preempt, base_admit = COMPOSITIONS[policy]
        order = order or base_order
        preempt = preempt if preempt is not None else base_preempt
        admit = admit if admit is not None else base_admit
    if order is None:
        raise ConfigError("no order policy: give --policy or --order")
    absent = {"none", None}
    return Chosen(
        order=_known("order", ORDERS, order),
        preempt=None if preempt in absent else _known("preempt", PREEMPTS, preempt),
        admit=None if admit in absent else _known("admit", ADMITS, admit),
    )


def build_stages(
    policy: str | None = None,
    *,
    order: str | None = None,
    preempt: str | None = None,
    admit: str | None = None,
    options: Options | None = None,
    allocation: str | None = None,
    placement: str | None = None,
) -> Stages:
    """The stages for `--policy NAME`, with any of `--order/--preempt/--admit` overriding;
    `allocation` a rule of `ALLOCATION_RULES` (None: the order's paper rule); `placement` a
    name of `PLACEMENTS` (None: `fastest`)."""
    options = options or {}
    chosen = choose(policy, order=order, preempt=preempt, admit=admit)
    if allocation not in (None, *ALLOCATION_RULES):
        raise ConfigError(f"unknown allocation rule {allocation!r} (known: "
                          f"{', '.join(ALLOCATION_RULES)})")
    placement_stage = _known("placement", PLACEMENTS, placement or FASTEST)()
    order_stage = chosen.order.from_options(decode_options(chosen.order.Options, options))
    preempt_stage = None
    if chosen.preempt is not None:
        needs = chosen.preempt.needs_order
        if needs is not None and not isinstance(order_stage, needs):
            known = ", ".join(sorted(name for name, stage in ORDERS.items()
                                     if issubclass(stage, needs)))
            raise ConfigError(f"preempt policy {chosen.preempt.name!r} needs "
                              f"{chosen.preempt.needs_order_text} ({known}), "
                              f"not {order_stage.name!r}")
        preempt_stage = chosen.preempt.from_options(
            decode_options(chosen.preempt.Options, options), order_stage)
    return Stages(
        order=order_stage,
        preempt=preempt_stage,
        admit=(None if chosen.admit is None else
               chosen.admit.from_options(decode_options(chosen.admit.Options, options))),
        allocation=allocation,
        placement=placement_stage,
    )


def unread_options(policy: str | None = None, *, order: str | None = None,
                   preempt: str | None = None, admit: str | None = None,
                   options: Options) -> tuple[list[str], list[str]]:
    """Builds the stages once: the names of `options` no chosen stage reads, and the names
    the stages read (both sorted). A misspelt option, or one of another policy (`--delta`
    under HOSEP), must not be silently ignored."""
    build_stages(policy, order=order, preempt=preempt, admit=admit, options=options)
    chosen = choose(policy, order=order, preempt=preempt, admit=admit)
    read = {name for stage in chosen.classes() for name in option_names(stage.Options)}
    return sorted(set(options) - read), sorted(read)


def every_option() -> dict[str, Any]:
    """Every option a registered stage declares, by name: its dataclass field (help,
    choices, whether `simulate` and sweeps take it in the field's metadata). An option two
    stages share (`form`) is declared alike by both."""
    declared: dict[str, Any] = {}
    for table in (ORDERS, PREEMPTS, ADMITS):
        for stage in table.values():
            for option_field in fields(stage.Options):
                declared.setdefault(option_field.name, option_field)
    return declared


def placement_names() -> list[str]:
    return sorted(PLACEMENTS)


def policy_names() -> list[str]:
    return sorted(COMPOSITIONS)
