"""Names of the policy stages, and the named compositions `--policy` offers.

An administrator composes stages (`--order sdrf --preempt hosep`), or names a common
composition (`--policy hosep` = order hosep + preempt hosep). Each factory takes the parsed
options (a mapping of option name to value; absent options take the policy's defaults) and
returns a fresh stage, so a pool never shares state with another; a preemption stage's
factory is also given the run's order stage (`fair` measures users by the order's key).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gridfair.core.stages import ALLOCATION_RULES, AdmitPolicy, OrderPolicy, PreemptPolicy
from gridfair.errors import ConfigError
from gridfair.policies.condor_priority import CondorPriorityOrder
from gridfair.policies.deadline_baselines import (
    FairShareOrder,
    OracleAdmit,
    OracleOrder,
    ReactiveAdmit,
)
from gridfair.policies.dmfa_srq import DmfaSrqOrder
from gridfair.policies.drf import DrfOrder
from gridfair.policies.fair_preempt import FairPreempt
from gridfair.policies.hosep import HosepOrder, HosepPreempt
from gridfair.policies.justice import JusticeAdmit, JusticeOrder
from gridfair.policies.osep import OsepOrder, OsepPreempt
from gridfair.policies.reclaim import ReclaimPreempt
from gridfair.policies.sdrf import SdrfOrder

Options = Mapping[str, Any]


def _given(options: Options, **keywords: str) -> dict[str, Any]:
    """Keyword arguments for the options that were given (keyword=option name); absent or
    None options are left out so the policy's own defaults apply."""
    return {keyword: options[name] for keyword, name in keywords.items()
            if options.get(name) is not None}


# Options shared by the multi-resource orders.
_SHARES = {"resources": "resources", "weights": "weights", "equal_shares": "equal_shares",
           "resource_weights": "resource_weights", "form": "form"}

ORDERS: dict[str, Callable[[Options], OrderPolicy]] = {
    "osep": lambda options: OsepOrder(),
    "hosep": lambda options: HosepOrder(),
    "drf": lambda options: DrfOrder(**_given(options, resources="resources", form="form")),
    "wdrf": lambda options: DrfOrder(weighted=True, **_given(options, **_SHARES)),
    "sdrf": lambda options: SdrfOrder(**_given(
        options, delta="delta", priority="sdrf_priority", **_SHARES)),
    "dmfa-srq": lambda options: DmfaSrqOrder(**_given(
        options, resources="resources", weights="weights")),
    "condor": lambda options: CondorPriorityOrder(**_given(
        options, halflife="halflife", factor="priority_factor", factors="priority_factors",
        pie="condor_pie", slot_weight="slot_weight")),
    "justice": lambda options: JusticeOrder(),
    "fair-share": lambda options: FairShareOrder(),
    "oracle": lambda options: OracleOrder(),
}
# A preemption stage is made knowing the run's order stage (`fair` measures users by its key).
PREEMPTS: dict[str, Callable[[Options, OrderPolicy], PreemptPolicy]] = {
    "osep": lambda options, order: OsepPreempt(),
    "hosep": lambda options, order: HosepPreempt(
        absolute=bool(options.get("absolute_power_diff")), **_given(options, test="hosep_test")),
    "reclaim": lambda options, order: ReclaimPreempt(),
    "fair": lambda options, order: FairPreempt(order),
}
ADMITS: dict[str, Callable[[Options], AdmitPolicy]] = {
    "justice": lambda options: JusticeAdmit(**_given(
        options, kill_above="justice_kill_above", error_weighting="justice_error_weighting",
        smoothing="justice_smoothing")),
    "reactive": lambda options: ReactiveAdmit(),
    "oracle": lambda options: OracleAdmit(),
}

# --policy NAME -> (order, preempt or None, admit or None)
COMPOSITIONS: dict[str, tuple[str, str | None, str | None]] = {
    "osep": ("osep", "osep", None),
    "hosep": ("hosep", "hosep", None),
    "reclaim": ("hosep", "reclaim", None),
    "drf": ("drf", None, None),
    "wdrf": ("wdrf", None, None),
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


def _pick(kind: str, table: Mapping[str, Callable[..., Any]], name: str, *arguments: Any):
    try:
        factory = table[name]
    except KeyError:
        known = ", ".join(sorted(table)) or "none"
        raise ConfigError(f"unknown {kind} policy {name!r} (known: {known})") from None
    return factory(*arguments)


def build_stages(
    policy: str | None = None,
    *,
    order: str | None = None,
    preempt: str | None = None,
    admit: str | None = None,
    options: Options | None = None,
    allocation: str | None = None,
) -> Stages:
    """The stages for `--policy NAME`, with any of `--order/--preempt/--admit` overriding;
    `allocation` a rule of `ALLOCATION_RULES` (None: the order's paper rule)."""
    options = options or {}
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
    if allocation not in (None, *ALLOCATION_RULES):
        raise ConfigError(f"unknown allocation rule {allocation!r} (known: "
                          f"{', '.join(ALLOCATION_RULES)})")
    absent = {"none", None}
    order_stage = _pick("order", ORDERS, order, options)
    return Stages(
        order=order_stage,
        preempt=None if preempt in absent else _pick("preempt", PREEMPTS, preempt, options,
                                                     order_stage),
        admit=None if admit in absent else _pick("admit", ADMITS, admit, options),
        allocation=allocation,
    )


class _ReadOptions(dict):
    """Options that record which names the stages' factories read."""

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> Any:
        self.read.add(name)
        return super().__getitem__(name)

    def get(self, name: str, default: Any = None) -> Any:
        self.read.add(name)
        return super().get(name, default)


def unread_options(policy: str | None = None, *, order: str | None = None,
                   preempt: str | None = None, admit: str | None = None,
                   options: Options) -> tuple[list[str], list[str]]:
    """Builds the stages once: the names of `options` no chosen stage reads, and the names
    the stages read (both sorted). A misspelt option, or one of another policy (`--delta`
    under HOSEP), must not be silently ignored."""
    recording = _ReadOptions(options)
    build_stages(policy, order=order, preempt=preempt, admit=admit, options=recording)
    return sorted(set(options) - recording.read), sorted(recording.read)


def policy_names() -> list[str]:
    return sorted(COMPOSITIONS)
