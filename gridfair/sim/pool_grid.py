"""A grid made of a pool's own slots (`--machines`): a `condor_status -long` / `-json` dump
or the live collector, each slot read as the daemon reads it
(`gridfair.classads.views.machine_view`: the owner from `GridOwner`, the power from `MFlops`,
else `KFlops / 1000`, else `Mips`, of the whole slot for a static slot and of one CPU for a
partitionable one; `--owner-attr` and `--power-attr` change which).

- A static slot is a node of its `Cpus`, `Memory` and `GPUs`.
- A partitionable slot is one node of its whole size (`TotalSlotCpus`, `TotalSlotMemory`,
  `TotalSlotGPUs`), as the daemon reads it; its dynamic slots (`slot1_3@host`) are parts of
  it, not nodes: a job that ran on one ran on that node (`SlotIndex.node_of`).
- A slot the daemon would skip (no owner, no power) is not in the grid; it is reported with
  the reason, and jobs that ran there are the history reader's to count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gridfair.ad_views import DYNAMIC, Machine, SkippedAd, whole_slot
from gridfair.classads.live_reads import collector_slots
from gridfair.classads.reader import read_ads
from gridfair.classads.views import AdConfig, machines_from_ads
from gridfair.errors import InputError
from gridfair.sim.grid import Grid, MachineSpec

#: `Grid.settings` key of a pool grid's `SlotIndex`.
SLOTS = "slots"


@dataclass(frozen=True)
class SlotIndex:
    """Which node a slot name is."""

    nodes: frozenset[str]

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
    views, unusable = machines_from_ads(ads, config, lenient=True)
    nodes = [machine for machine in views if machine.slot_type != DYNAMIC]
    return pool_grid(nodes, source), [*skipped, *unusable]


def pool_grid(machines: Sequence[Machine], source: str) -> Grid:
    """The grid of slot views (static and partitionable slots), a node each, in slot order."""
    specs = [MachineSpec(machine.name, machine.owner, machine.power, machine.cpus,
                         machine.memory, machine.load, machine.gpus) for machine in machines]
    if not specs:
        raise InputError("no usable slot: every slot ad lacks an owner or a power the daemon "
                         "reads (see --owner-attr, --power-attr)", source=source)
    index = SlotIndex(frozenset(spec.name for spec in specs))
    return Grid(name=source, machines=tuple(specs), settings={SLOTS: index}, source=source)
