"""`gridfair shares`: who provides what and who uses what, and what the policy would do now.

Reads a snapshot of machine and job ads, shows one row per user in the layout of
`condor_userprio` (a header line, two heading rows, dashes, the rows, dashes, then
`Number of users: N` with the totals), then the decisions the policy stages would take on the
snapshot with their reasons, then the ads that could not be used. Nothing is carried out.

The report is a `gridfair.core.shares.SharesReport`, built from ads here
(`report_from_snapshot`) or from the daemon's store (`gridfair.daemon.reports`), and rendered
by `render_shares` or `shares_json`, so the table is the same wherever it comes from.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from gridfair.ad_views import Snapshot, ad_note_line
from gridfair.classads.reader import FORMAT_NAMES
from gridfair.classads.to_pool import pool_from_snapshot
from gridfair.classads.views import AdConfig
from gridfair.cli.group import cli
from gridfair.cli.output import FORMATS, clock, format_cell, to_csv, to_json
from gridfair.cli.store_option import configured_policy, find_store
from gridfair.cli.terms import WithTerms
from gridfair.core.shares import SUMMED, SharesReport, share_rows, share_totals
from gridfair.core.stages import DECLINE
from gridfair.daemon import reports
from gridfair.daemon.cycle import stage_list
from gridfair.daemon.store import StoreError, open_readonly
from gridfair.policies.registry import build_stages, policy_names
from gridfair.text import shown_all

#: (key, the two heading rows, format spec). Text columns (no spec) align left.
SHARE_COLUMNS: tuple[tuple[str, tuple[str, str], str], ...] = (
    ("user", ("User Name", ""), ""),
    ("provided_mflops", ("Provided", "MFlops"), ".0f"),
    ("allocated_mflops", ("Allocated", "MFlops"), ".0f"),
    ("power_diff", ("Power", "Diff"), "+.3f"),
    ("nodes_provided", ("Nodes", "Provided"), "d"),
    ("nodes_used", ("Nodes", "Used"), "d"),
    ("running", ("Running", "Jobs"), "d"),
    ("idle", ("Idle", "Jobs"), "d"),
    ("in_flight", ("In Flight", "(of Idle)"), "d"),
)


def report_from_snapshot(snapshot: Snapshot, policy: str | None, order: str | None,
                         preempt: str | None, admit: str | None,
                         options: Mapping[str, Any]) -> SharesReport:
    """The shares of `snapshot` now, and the decisions one cycle of the stages would take."""
    stages = build_stages(policy, order=order, preempt=preempt, admit=admit, options=options)
    loaded = pool_from_snapshot(snapshot, stages)
    rows = share_rows(loaded.pool)  # before the cycle: the pool as the ads describe it
    # Why the preemption stage stopped (HOSEP's rule), after the decisions: never acted on.
    decisions = (list(loaded.admissions) + loaded.negotiator.cycle(snapshot.time)
                 + loaded.negotiator.declined)
    skipped = list(snapshot.skipped) + list(loaded.unplaced)
    # A job no machine could ever hold (RequestCpus = 1e9) waits for good: said, not hidden.
    too_big = [{"source": "job", "index": 0, "name": task.id,
                "reason": f"too big for every machine, it can never run here: {reason}"}
               for task, reason in loaded.negotiator.unplaceable]
    return SharesReport(
        time=snapshot.time,
        policy=" ".join(name for name, _ in stage_list(stages)),  # as the store labels it
        users=rows,
        totals=share_totals(rows),
        decisions=[decision.as_dict() for decision in decisions],
        skipped=[item.row() for item in skipped],
        warnings=[item.row() for item in snapshot.warnings] + too_big,
        charges=[{"identity": charge.identity, "owner": charge.owner, "rule": charge.reason,
                  "mapped": charge.mapped} for charge in snapshot.charges],
        slots=len(snapshot.machines),
    )


def render_shares(report: SharesReport) -> str:
    """The report as text: the condor_userprio-like table, decisions, skipped ads; every
    string from the pool escaped (`shown_all`)."""
    report = shown_all(report)
    lines = [f"Shares at {clock(report.time, report.sim_start)} ({report.policy})"]
    if report.status:
        lines.append(report.status)
    if not report.users and report.status:  # nothing recorded: the status says why
        return "\n".join(lines + _ad_notes(report))
    lines.append(_table(report.users, report.totals))
    unmapped = unmapped_submitters(report)
    if unmapped:
        # Most are ordinary users, who run on what owners leave; an owner misnamed (another
        # UID domain, an account of another name) is among them too.
        lines.append("Users who own no slot (an owner listed here is misnamed: see "
                     "--uid-domain, --submitter-map): " + ", ".join(unmapped))
    if report.charges:
        lines.append("Charged identities (who HTCondor authenticated -> the owner charged):")
        lines += [f"  {charge['identity']} -> {charge['owner']}: {charge['rule']}"
                  for charge in report.charges]
    lines.append("")
    if report.decisions:
        # Counted as the daemon's cycle log counts them: a decline (why a preemption was not
        # made) is not a decision, and is counted apart.
        declined = sum(item["kind"] == DECLINE for item in report.decisions)
        also = f", {declined} preemption(s) declined" if declined else ""
        lines.append(f"{report.decisions_heading} ({len(report.decisions) - declined}{also}, "
                     f"{report.decisions_note}):")
        lines += [
            f"  {item['kind']} {item['job']} ({item['user']})"
            + (f" on {item['machine']}" if item["machine"] else "")
            + (f" [{item['state']}]" if item.get("state") else "")
            + f": {item['reason']}"
            for item in report.decisions
        ]
    else:
        lines.append(f"{report.decisions_heading}: none")
    return "\n".join(lines + _ad_notes(report))


def _ad_notes(report: SharesReport) -> list[str]:
    """The skipped ads and the warnings about ads, each kind under its heading."""
    lines = []
    for heading, items in (("Skipped ads", report.skipped), ("Warnings", report.warnings)):
        if items:
            lines += ["", f"{heading} ({len(items)}):"]
            lines += [f"  {ad_note_line(**item)}" for item in items]
    return lines


def unmapped_submitters(report: SharesReport) -> list[str]:
    """Submitters that own no slot: their names did not map to an owner (or they are users
    who provide nothing)."""
    return [row["user"] for row in report.users if not row["provided_mflops"]]


def shares_json(report: SharesReport) -> str:
    return to_json({
        "time": report.time,
        "clock": clock(report.time, report.sim_start),
        "policy": report.policy,
        "status": report.status,
        "users": list(report.users),
        "unmapped": unmapped_submitters(report),
        "charges": list(report.charges),
        "slots": report.slots,
        "totals": dict(report.totals),
        "decisions": list(report.decisions),
        "skipped": list(report.skipped),
        "warnings": list(report.warnings),
    })


def shares_from_store(db_path: Path, output_format: str = "table") -> str:
    """`gridfair shares --db FILE`: the shares table as of the daemon's latest cycle."""
    report = reports.shares_report(open_readonly(db_path))
    if output_format == "json":
        return shares_json(report)
    if output_format == "csv":
        return to_csv(list(report.users))
    return render_shares(report)


def _table(rows: Sequence[Mapping[str, Any]], totals: Mapping[str, Any]) -> str:
    footer = {"user": f"Number of users: {totals['users']}",
              **{key: totals[key] for key in SUMMED}}
    cells = [[format_cell(row.get(key), spec) for key, _, spec in SHARE_COLUMNS]
             for row in [*rows, footer]]
    widths = [max(len(heading[0]), len(heading[1]), *(len(line[i]) for line in cells))
              for i, (_, heading, _) in enumerate(SHARE_COLUMNS)]

    def line(values: Sequence[str]) -> str:
        return " ".join(
            value.ljust(width) if not spec else value.rjust(width)
            for value, width, (_, _, spec) in zip(values, widths, SHARE_COLUMNS, strict=True)
        ).rstrip()

    rule = " ".join("-" * width for width in widths)
    out = [line([heading[0] for _, heading, _ in SHARE_COLUMNS]),
           line([heading[1] for _, heading, _ in SHARE_COLUMNS]), rule]
    out += [line(values) for values in cells[:-1]]
    out += [rule, line(cells[-1])]
    return "\n".join(out)


@cli.command(cls=WithTerms, terms=("Provided", "Allocated", "PowerDiff", "omega", "Nodes",
                                   "Running Jobs, Idle Jobs", "MFlops"))
@click.option("--machines", "machines_paths", multiple=True, type=click.Path(),
              help="Machine (slot) ads: a condor_status -long, new syntax or -json file, or a "
              "directory whose *.status files are read; repeat for more.")
@click.option("--jobs", "jobs_paths", multiple=True, type=click.Path(),
              help="Job ads: a condor_q -long, new syntax or -json file, or a directory whose "
              "*.queue files are read; repeat for more [default: the *.queue files of the "
              "--machines directories].")
@click.option("--policy", "-p", type=click.Choice(policy_names()), default=None,
              help="A named composition of stages [default: with --pool, the installed "
              "daemon's (/etc/gridfair/htcondor.toml, else HTCondor's GRIDFAIR_POLICY_ "
              "knobs); else, or without one, hosep, unless --order is given].")
@click.option("--order", default=None, help="Order stage (who gets the next free slot).")
@click.option("--preempt", default=None, help="Preemption stage, or 'none'.")
@click.option("--admit", default=None, help="Admission stage, or 'none'.")
@click.option("--absolute-power-diff", is_flag=True,
              help="HOSEP: compare omega with |PowerDiff| (Eq. 6) instead of PowerDiff (Fig. 2).")
@click.option("--owner-attr", default=None, help="Machine attribute naming its owner "
              "[default: GridOwner].")
@click.option("--power-attr", default=None, help="Machine attribute with its power in MFlops "
              "[default: MFlops, else KFlops / 1000, else Mips].")
@click.option("--ad-format", type=click.Choice(FORMAT_NAMES), default=None,
              help="Format of both files [default: detected from each].")
@click.option("--now", type=float, default=None,
              help="Time of the snapshot, epoch seconds [default: the current time].")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="The daemon's store: shares as of its latest cycle, instead of ad files "
              "[default, with no other source: ./gridfair.db, else the store of "
              "/etc/gridfair/htcondor.toml, else HTCondor's GRIDFAIR_STORE].")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="The daemon's config: shares from the store it names, as "
              "--db.")
@click.option("--pool", "pool", default=None, metavar="HOST[:PORT]",
              help="Read a live HTCondor pool through this collector ('-': COLLECTOR_HOST), "
              "read-only, instead of ad files.")
@click.option("--uid-domain", default=None,
              help="Live pool: the pool's UID domain; an authenticated user of it is the "
              "owner of its name ('*': any domain) [default: UID_DOMAIN from HTCondor's "
              "configuration here].")
@click.option("--submitter-map", type=click.Path(dir_okay=False), default=None,
              help="Live pool: a file of 'submitter owner' lines, looked up first.")
@click.option("--trust-accounting-groups", is_flag=True,
              help="Live pool: charge jobs to the accounting group they name (only where the "
              "pool validates groups).")
@click.option("--tree", "tree_source", default=None, metavar="FILE|condor[@HOST]",
              help="Show the accounting group tree instead (quota, guaranteed and current "
              "dominant share, H-DRF share, surplus in use, per level): the [groups] table "
              "of FILE, or 'condor': the negotiator's GROUP_* knobs of HTCondor's "
              "configuration here ('condor@HOST[:PORT]': as the running negotiator of that "
              "collector's pool has them).")
@click.option("--groups", "by_group", is_flag=True,
              help="From the daemon's store: its accounting groups as of its latest cycle "
              "that recorded them, as --tree shows a tree.")
@click.option("--format", "output_format", type=click.Choice(FORMATS),
              default="table", show_default=True)
def shares(machines_paths, jobs_paths, policy, order, preempt, admit, absolute_power_diff,
           owner_attr, power_attr, ad_format, now, db_path, config_path, pool, uid_domain,
           submitter_map, trust_accounting_groups, tree_source, by_group,
           output_format) -> None:
    """Per-user shares of a pool's ads and the decisions a policy would take on them now."""
    # The report comes from ad files; another source of the same figures (the daemon's
    # store) builds a SharesReport of its own and shares the rendering below.
    if db_path is not None or config_path is not None or (pool is None and
                                                           not machines_paths):
        if tree_source is not None:
            raise click.UsageError("--tree reads ad files or a live pool, not the daemon's "
                                   "store: give --machines/--jobs or --pool")
        store = _store(None if db_path is None else Path(db_path), config_path)
        if by_group:
            from gridfair.cli.group_tree import groups_from_store

            click.echo(groups_from_store(store, output_format))
            return
        click.echo(shares_from_store(store, output_format))
        return
    if by_group:
        raise click.UsageError("--groups reads the daemon's store (--db or --config); for "
                               "ad files or a live pool give --tree")
    options: dict[str, Any] = {}
    status = ""
    if policy is None and order is None and tree_source is None:
        # A live pool: what its daemon would do, unless told otherwise.
        configured = configured_policy() if pool is not None else None
        if configured is None:
            policy = "hosep"
        else:
            settings, source = configured
            policy, order, preempt, admit = (settings[key] or None for key in (
                "name", "order", "preempt", "admit"))
            options = dict(settings["options"])
            status = f"Policy: the daemon's, from {source} (--policy to try another)"
    if pool is not None:
        snapshot = _live_snapshot(pool, owner_attr, power_attr, uid_domain, submitter_map,
                                  trust_accounting_groups)
    else:
        snapshot = _dumps_snapshot(machines_paths, jobs_paths, owner_attr, power_attr,
                                   ad_format)
    if now is not None or pool is None:
        snapshot = replace(snapshot, time=time.time() if now is None else now)
    if tree_source is not None:
        if policy or order or preempt or admit:
            raise click.UsageError("--tree orders by H-DRF: give no --policy, --order, "
                                   "--preempt or --admit with it")
        from gridfair.cli.group_tree import echo_tree

        echo_tree(snapshot, tree_source, output_format)
        return
    report = report_from_snapshot(snapshot, policy, order, preempt, admit,
                                  {**options, "absolute_power_diff": absolute_power_diff})
    report = replace(report, status=status) if status else report
    if output_format == "csv":  # the per-user table only, one row per user
        click.echo(to_csv(list(report.users)), nl=False)
    else:
        click.echo(shares_json(report) if output_format == "json" else render_shares(report))


def _store(db_path: Path | None, config_path: Path | None) -> Path:
    """The daemon's store to read; given no source at all, the one `find_store` finds, or a
    usage error naming every source."""
    try:
        return find_store(db_path, config_path)
    except StoreError as error:
        if db_path is not None or config_path is not None:
            raise
        raise click.UsageError(f"give --machines and --jobs, --machines DIRECTORY, --pool "
                               f"HOST, --config FILE or --db FILE ({error})") from None


def _dumps_snapshot(machines_paths: Sequence[str], jobs_paths: Sequence[str],
                    owner_attr: str | None, power_attr: str | None,
                    ad_format: str | None) -> Snapshot:
    """The pool of ad files and directories, read as the daemon's `files` backend reads
    them (`AdDumps`): a file or ad it cannot use, or no usable machine or job, is an error."""
    from gridfair.classads.reader import parse_format
    from gridfair.daemon.backends.files import AdDumps

    if not machines_paths or not (jobs_paths or all(map(os.path.isdir, machines_paths))):
        raise click.UsageError("give --machines and --jobs (files or directories), "
                               "--machines DIRECTORY (its *.status and *.queue dumps), "
                               "--pool HOST, --config FILE (the daemon's) or --db FILE")
    dumps = AdDumps(machines_paths, jobs_paths or machines_paths,
                    AdConfig.with_attributes(owner_attr, power_attr), parse_format(ad_format))
    return dumps.read()


def _live_snapshot(pool: str, owner_attr: str | None, power_attr: str | None,
                   uid_domain: str | None, submitter_map: str | None,
                   trust_groups: bool) -> Snapshot:
    """One read of a live pool through the htcondor backend; nothing is acted on."""
    from gridfair.classads.submitters import SubmitterMap
    from gridfair.daemon.backends import require_slots
    from gridfair.daemon.backends.htcondor import HTCondorBackend, pool_uid_domain

    uid_domain = uid_domain or pool_uid_domain()
    submitters = SubmitterMap.of(uid_domain, submitter_map, trust_groups)
    # A pool it cannot read (PoolUnavailable) is one line and exit 2, as a file is.
    backend = HTCondorBackend.connect(None if pool == "-" else pool,
                                      owner_attribute=owner_attr or "GridOwner",
                                      power_attribute=power_attr or "", submitters=submitters)
    return require_slots(backend.read_snapshot(), f"collector {pool}")
