"""Inputs for iSPD 2014 (github gspd-unesp/ispd, commit 196cdf6, the HOSEP paper's code) made
from what gridfair simulates, so both simulators run the same tasks on the same grid: a trace
(`.wmsx`, iSPD format) of gridfair's tasks, and an iSPD 2014 model (`.imsx`) that loads it.
Only input files are written here; iSPD itself is found by the benches that run it
(`bench/peers.py`, `bench/fig4.py --ispd`) and none of its code is in the project.

iSPD 2014 reads a trace line by line, splitting on '"': five header lines, then tasks with the
attributes id, arr, sts, cpsz, cmsz, usr in that order. Communication sizes are 0 here (gridfair
models no transfer unless asked), and its model parser wants an `energy` attribute on every
machine (HOSEP does not use it; the metrics divide by the energy used, so it is 1).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path

from gridfair.sim.grid import Grid

WMSX_HEADER = ('<?xml version="1.0" encoding="ISO-8859-1" standalone="no"?>\n'
               '<!DOCTYPE system SYSTEM "iSPDcarga.dtd">\n<system>\n<trace>\n'
               '<format kind="iSPD" />\n')


def tasks_of(tasks_out: Path) -> list[tuple[float, float, str]]:
    """(arrival s, MFlop, user) of every task of a gridfair `--tasks-out` file of a grid run,
    in arrival order (ties in the file's order, which is gridfair's submit order)."""
    with open(tasks_out, newline="", encoding="utf-8") as lines:
        rows = [(float(row["submit"]), float(row["work"]), row["user"])
                for row in csv.DictReader(lines)]
    return sorted(rows, key=lambda row: row[0])


def write_wmsx(tasks: Sequence[tuple[float, float, str]], path: Path) -> None:
    with open(path, "w", encoding="iso-8859-1") as out:
        out.write(WMSX_HEADER)
        for number, (arrival, mflop, user) in enumerate(tasks):
            out.write(f'<task id="{number}" arr="{arrival!r}" sts="1" cpsz ="{mflop!r}" '
                      f'cmsz="0.0" usr="{user}" />\n')
        out.write("</trace>\n</system>\n")


def _trace_load(trace: Path, count: int) -> str:
    return (f'<load>\n        <trace file_path="{trace}" format="iSPD" tasks="{count}"/>\n'
            '    </load>')


def ispd2014_model(model: Path, trace: Path, count: int) -> str:
    """The iSPD model file MODEL with its load replaced by TRACE (COUNT tasks), and an energy
    attribute on every machine."""
    text = model.read_text(encoding="iso-8859-1")
    text = re.sub(r"<machine (?![^>]*energy=)", '<machine energy="1.0" ', text)
    return re.sub(r"<load>.*?</load>", lambda _: _trace_load(trace, count), text, flags=re.S)


def star_model(grid: Grid, trace: Path, count: int) -> str:
    """An iSPD 2014 model of GRID: a master (icon 0, HOSEP, owned by the first owner, which
    runs no task) linked to every machine by a link of no latency and 10^9 Mbit/s."""
    machines = [machine for machine in grid.machines]
    owners = list(dict.fromkeys(machine.owner for machine in machines))
    parts = ['<?xml version="1.0" encoding="ISO-8859-1" standalone="no"?>',
             '<!DOCTYPE system SYSTEM "iSPD.dtd">', '<system version="1">']
    parts += [f'    <owner id="{owner}" powerlimit="100.0"/>' for owner in owners]
    link = 2 * len(machines) + 1
    for number, machine in enumerate(machines, start=1):
        parts.append(f'    <machine energy="1.0" id="{machine.name}" load="0.0" '
                     f'owner="{machine.owner}" power="{machine.mflops!r}">\n'
                     f'        <position x="{100 * number}" y="300"/>\n'
                     f'        <icon_id global="{number}" local="{number}"/>\n    </machine>')
        for origin, destination in ((0, number), (number, 0)):
            parts.append(f'    <link bandwidth="1.0E9" id="lan{link}" latency="0.0" load="0.0">\n'
                         f'        <connect destination="{destination}" '
                         f'origination="{origin}"/>\n'
                         '        <position x="100" y="100"/>\n'
                         f'        <position x="{100 * number}" y="300"/>\n'
                         f'        <icon_id global="{link}" local="{link}"/>\n    </link>')
            link += 1
    slaves = "\n".join(f'            <slave id="{n}"/>' for n in range(1, len(machines) + 1))
    parts.append(f'    <machine energy="1.0" id="master" load="0.0" owner="{owners[0]}" '
                 'power="1000.0">\n        <position x="100" y="100"/>\n'
                 '        <icon_id global="0" local="0"/>\n'
                 f'        <master scheduler="HOSEP">\n{slaves}\n        </master>\n'
                 '    </machine>')
    parts += ["    " + _trace_load(trace, count), "</system>", ""]
    return "\n".join(parts)
