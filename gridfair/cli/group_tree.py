"""`gridfair shares --tree`: the accounting group tree of a pool's ads, as admins look at groups
(`condor_userprio -grouprollup`, `sshare -l`): per group and level, its quota, its guaranteed
and current dominant share, its H-DRF share and the surplus it uses; `shares --db --groups`:
the same rows as the daemon recorded them at its latest cycle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from gridfair.ad_views import Snapshot
from gridfair.classads.pool_groups import from_condor, pool_group_tree
from gridfair.cli.output import clock, render_table, to_json
from gridfair.core.groups import GroupTree, tree_from_toml
from gridfair.daemon import reports
from gridfair.daemon.store import open_readonly
from gridfair.errors import InputError
from gridfair.policies.hdrf import HdrfOrder
from gridfair.policies.registry import build_stages
from gridfair.tomlfile import read_toml

TREE_COLUMNS = (
    ("group", "Group", ""),
    ("level", "Level", "d"),
    ("quota_text", "Config Quota", ""),
    ("accept_surplus", "Use Surplus", ""),
    ("weight", "Weight", ".3f"),
    ("guaranteed_share", "Guaranteed", ".3f"),
    ("dominant_share", "Dominant Share", ".3f"),
    ("dominant_resource", "Of", ""),
    ("hdrf_share", "H-DRF Share", ".3f"),
    ("surplus_text", "Surplus In Use", ""),
    ("users", "Users", "d"),
)


def groups_section(path: Path) -> dict[str, Any]:
    """The `[groups]` table of a TOML file, checked (errors name the file): `--groups`."""
    section = read_toml(path, "groups file").get("groups")
    if not isinstance(section, dict):
        raise InputError("no [groups] table", source=str(path))
    tree_from_toml(section, where=f"{path} [groups]")
    return section


def read_tree(source: str) -> GroupTree:
    """The tree of `source`: a TOML file's `[groups]` table, or `condor` for the negotiator
    knobs of HTCondor's configuration here (`htcondor2.param`), `condor@HOST[:PORT]` for
    those of the running negotiator of that collector's pool."""
    if from_condor(source):
        return pool_group_tree(source)
    return tree_from_toml(groups_section(Path(source)), where=f"{source} [groups]")


def tree_rows(snapshot: Snapshot, tree: GroupTree) -> list[dict[str, Any]]:
    """One row a group of `tree`, parents first, for the pool of `snapshot` as it is."""
    from gridfair.classads.to_pool import pool_from_snapshot

    stages = build_stages(order="hdrf", options={"groups": tree})
    loaded = pool_from_snapshot(snapshot, stages)
    order = loaded.negotiator.order
    assert isinstance(order, HdrfOrder)
    return order.group_rows()


def _amounts(amounts: Mapping[str, float]) -> str:
    return " ".join(f"{name}={value:g}" for name, value in amounts.items()) or "-"


def render_tree(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a table, each group indented by its level."""
    return render_table(TREE_COLUMNS, [
        {**row, "group": "  " * row["level"] + row["group"],
         "quota_text": _amounts(row["quota"]),
         "accept_surplus": "yes" if row["accept_surplus"] else "no",
         "surplus_text": _amounts(row["surplus_in_use"])} for row in rows]
        ) + f"\nNumber of groups: {len(rows) - 1}"


def groups_from_store(db_path: Path, output_format: str) -> str:
    """The group rows of the store's latest cycle that recorded them, as `--tree` shows
    rows."""
    report = reports.latest_groups(open_readonly(db_path))
    if output_format != "table":
        return to_json(report)
    return (f"As of cycle {report['cycle']} ({clock(report['time'], report['sim_start'])}), "
            f"policy {report['policy']}\n" + render_tree(report["groups"]))


def echo_tree(snapshot: Snapshot, source: str, output_format: str) -> None:
    rows = tree_rows(snapshot, read_tree(source))
    if output_format == "table":
        click.echo(render_tree(rows))
    else:
        click.echo(to_json({"time": snapshot.time, "groups": rows}))
