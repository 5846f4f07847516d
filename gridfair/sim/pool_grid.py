"""A grid made of a pool's own slots (`--machines`): a `condor_status -long` / `-json` dump
or the live collector, each slot read as the daemon reads it
(`gridfair.classads.views.machine_view`: the owner from `GridOwner`, the power from `MFlops`,
else `KFlops / 1000`, else `Mips`, taken as the power of the whole slot; `--owner-attr` and
`--power-attr` change which).

- A static slot is a node of its `Cpus` and `Memory`.
- A partitionable slot is one node of its whole size (`TotalSlotCpus`, `TotalSlotMemory`:
  its `Cpus` and `Memory` are what its dynamic slots leave, 0 when they take it all), with
  the slot's power; its dynamic slots (`slot1_3@host`, `SlotType = "Dynamic"`) are parts of
  it, not nodes: a job that ran on one ran on that node (`SlotIndex.node_of`).
- GPUs (`TotalSlotGPUs`, else `GPUs`) are kept per node for the jobs that ask for them.
- A slot the daemon would skip (no owner, no power) is not in the grid; it is reported with
  the reason, and jobs that ran there are the history reader's to count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import classad2

from gridfair.classads.live_reads import collector_slots
from gridfair.classads.reader import SourcedAd, read_ads
from gridfair.classads.views import AdConfig, machines_from_ads, whole_slot
from gridfair.errors import InputError
from gridfair.model import Machine, SkippedAd
from gridfair.sim.grid import Grid, MachineSpec

#: `Grid.settings` key of a pool grid's `SlotIndex`.
SLOTS = "slots"


@dataclass(frozen=True)
class SlotIndex:
    """Which node a slot name is, and the nodes' GPUs."""

    nodes: frozenset[str]
    gpus: Mapping[str, float] = field(default_factory=dict)

    def node_of(self, slot: str) -> str | None:
        """The node that is `slot` or holds it (a dynamic slot's partitionable slot); None
        if the grid has neither."""
        name = slot if slot in self.nodes else whole_slot(slot)
        return name if name in self.nodes else None


def read_pool_grid(machines: str | None, pool: str | None,
                   config: AdConfig) -> tuple[Grid, list[SkippedAd]]:
    """The grid of a slot dump (`machines`, a file) or of the collector at `pool`."""
    if machines is not None:
        ads, skipped = read_ads(Path(machines), lenient=True)
        source = machines
    else:
        power = [name for name, _ in config.power_sources]
        ads, skipped = collector_slots(pool, [config.owner_attr, *power]), []
        source = f"collector {pool or 'COLLECTOR_HOST'}"
    whole = [_whole(sourced) for sourced in ads if not _is_dynamic(sourced.ad,
                                                                     _name(sourced.ad))]
    views, unusable = machines_from_ads(whole, config, lenient=True)
    return pool_grid(views, source), [*skipped, *unusable]


def _whole(sourced: SourcedAd) -> SourcedAd:
    """A partitionable slot's ad as the whole slot (its totals as its Cpus and Memory);
    any other ad as it is."""
    ad = sourced.ad
    if not _is_partitionable(ad):
        return sourced
    whole = classad2.ClassAd()
    whole.update(ad)
    for attribute, total in (("Cpus", "TotalSlotCpus"), ("Memory", "TotalSlotMemory")):
        if _number(ad, total):
            whole[attribute] = ad[total]
    return sourced._replace(ad=whole)


def _name(ad: Any) -> str:
    name = ad.get("Name")
    return name if isinstance(name, str) else ""


def _is_partitionable(ad: Any) -> bool:
    return bool(ad.get("PartitionableSlot")) or ad.get("SlotType") == "Partitionable"


def pool_grid(machines: Sequence[Machine], source: str) -> Grid:
    """The grid of slot views (static slots, and whole partitionable slots: `_whole`), a node
    each, in slot order."""
    specs: list[MachineSpec] = []
    gpus: dict[str, float] = {}
    for machine in machines:
        ad = machine.ad if machine.ad is not None else {}
        specs.append(MachineSpec(machine.name, machine.owner, machine.power, machine.cpus,
                                 machine.memory, machine.load))
        slot_gpus = (_number(ad, "TotalSlotGPUs") if _is_partitionable(ad) else None) or \
            _number(ad, "GPUs")
        if slot_gpus:
            gpus[machine.name] = slot_gpus
    if not specs:
        raise InputError("no usable slot: every slot ad lacks an owner or a power the daemon "
                         "reads (see --owner-attr, --power-attr)", source=source)
    index = SlotIndex(frozenset(spec.name for spec in specs), gpus)
    return Grid(name=source, machines=tuple(specs), settings={SLOTS: index}, source=source)


def _is_dynamic(ad: Any, name: str) -> bool:
    return bool(ad.get("DynamicSlot")) or ad.get("SlotType") == "Dynamic" or (
        "SlotType" not in ad and whole_slot(name) != name)


def _number(ad: Any, attribute: str) -> float | None:
    value = ad.get(attribute)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)
