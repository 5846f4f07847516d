"""What the admin commands read from the daemon's store (read-only, while it runs).

Each report reads inside one read transaction, so it sees one consistent state of the store
(WAL gives readers a snapshot) even while the daemon commits a cycle.

Times: the store keeps the backend's clock (`cycles.now`): wall time for real pools,
simulated seconds for `sim`, after `cycles.sim_start`. Every row with a time carries the
`sim_start` of its cycle (None on a wall clock), so that it is shown as UTC wall time or as
`t+N s` of its simulation, never one as the other. A relative `--since` (`2h`, `30m`, `1d`) is
counted back from the latest cycle's clock, so it means the same on both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlite_utils

from gridfair.ad_views import ad_note_line
from gridfair.core.shares import SharesReport, share_totals
from gridfair.daemon.store import ACTION_STATES
from gridfair.errors import GridfairError, InputError
from gridfair.moments import is_relative, parse_moment

#: The per-user columns of `usage` that `gridfair shares` shows.
SHARE_KEYS = ("user", "provided_mflops", "allocated_mflops", "power_diff", "nodes_provided",
              "nodes_used", "running", "idle", "in_flight", "in_flight_mflops")


class ReportError(GridfairError):
    """A report cannot be made from this store (nothing recorded yet, unknown name)."""


@contextmanager
def reading(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """One read transaction: every query inside sees the same committed state."""
    db.execute("begin")
    try:
        yield db
    finally:
        db.execute("commit")


def latest_now(db: sqlite_utils.Database) -> float | None:
    row = db.execute("select max(now) from cycles").fetchone()
    return row[0] if row else None


def parse_since(text: str | None, db: sqlite_utils.Database) -> float | None:
    """`--since`: epoch seconds, an ISO date/time (UTC unless it says), or `N[smhd]` ago."""
    if text is None:
        return None
    latest = latest_now(db)
    if is_relative(text) and latest is None:
        return None
    try:
        return parse_moment(text, latest or 0.0)
    except InputError as error:
        raise ReportError(error.message) from None


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


def _last_cycle_with_usage(db: sqlite_utils.Database) -> dict[str, Any]:
    rows = list(db.query(
        "select * from cycles where id = (select max(cycle) from usage)"))
    if not rows:
        raise ReportError("the store has no finished cycle yet")
    return rows[0]


def cycle_time(cycle: dict[str, Any]) -> float:
    """When a cycle read the pool, on the backend's clock (a cycle that failed before it
    read: when it started, on the wall clock; its `sim_start` is then to be ignored)."""
    return cycle["now"] if cycle["now"] is not None else cycle["started"]


def cycle_note(cycle: dict[str, Any]) -> str:
    """`cycle N failed: why` for a cycle that did not finish as planned."""
    return (f"cycle {cycle['id']} {cycle['outcome']}"
            + (f": {cycle['error']}" if cycle["error"] else ""))


# --------------------------------------------------------------------- shares
def shares_report(db: sqlite_utils.Database) -> SharesReport:
    """The `gridfair shares` report as of the daemon's latest cycle that recorded shares,
    with the skipped ads and warnings of the latest cycle, and why it failed if it did."""
    with reading(db):
        latest = next(iter(db.query(
            "select * from cycles where outcome != 'running' order by id desc limit 1")), None)
        if latest is None:
            raise ReportError("the store has no finished cycle yet")
        shown = next(iter(db.query(
            "select * from cycles where id = (select max(cycle) from usage)")), None)
        cycle = latest if shown is None else shown
        # A store from before allocations in flight were counted apart has none recorded.
        users = [{key: row[key] if row[key] is not None else 0 for key in SHARE_KEYS}
                 for row in db.query(
            "select * from usage where cycle = ? order by rowid", [cycle["id"]])]
        decisions = [
            {"kind": row["kind"], "job": row["job"], "user": row["user"],
             "machine": row["machine"], "policy": row["policy"], "reason": row["reason"],
             "figures": _loads(row["figures"]),
             "action": row["action"], "state": row["state"]}
            for row in db.query(
                "select d.*, a.state from decisions d left join actions a on a.key = d.action "
                "where d.cycle = ? order by d.seq", [cycle["id"]])
        ]
        charges = _charges(db, "last_cycle >= ?", [cycle["id"]])
    status = None
    if shown is None:
        status = f"No cycle has recorded shares yet; the latest: {cycle_note(latest)}"
    elif latest["id"] != shown["id"]:
        status = (f"The latest cycle recorded no shares ({cycle_note(latest)}); the table "
                  f"is of cycle {shown['id']}")
    return SharesReport(
        time=cycle_time(cycle),
        sim_start=cycle["sim_start"] if cycle["now"] is not None else None,
        policy=f"{cycle['policy']}, daemon cycle {cycle['id']} {cycle['outcome']}",
        users=users,
        totals=share_totals(users),
        decisions=decisions,
        skipped=_loads(latest["skipped"]) or [],
        warnings=_loads(latest["warnings"]) or [],
        charges=charges,
        decisions_heading=f"Decisions of cycle {cycle['id']}",
        decisions_note="[state] of the action carried out",
        status=status,
    )


# -------------------------------------------------------------------- explain
def explain(db: sqlite_utils.Database, name: str, limit: int = 10) -> dict[str, Any]:
    """Why a user is where it is, or what happened to a job, with the recent decisions."""
    with reading(db):
        is_job = (db.execute("select 1 from decisions where job = ? limit 1", [name]).fetchone()
                  or db.execute("select 1 from jobs where id = ?", [name]).fetchone()
                  or db.execute("select 1 from job_events where job = ? limit 1",
                                [name]).fetchone())
        if is_job:
            return _explain_job(db, name, limit)
        # A user pruned after `retention.users` days still has its downsampled usage.
        if (db.execute("select 1 from users where name = ?", [name]).fetchone()
                or db.execute("select 1 from usage where user = ? limit 1", [name]).fetchone()):
            return _explain_user(db, name, limit)
        group = _explain_group(db, name, limit)
        if group is not None:
            return group
    raise ReportError(f"no user, job or accounting group named {name!r} in the store")


def _charges(db, where: str, args: list) -> list[dict[str, Any]]:
    """Rows of the `identities` table (identity, owner, rule, mapped), by identity."""
    return [{**row, "mapped": bool(row["mapped"])} for row in db.query(
        f"select identity, owner, rule, mapped from identities where {where} "
        "order by identity", args)]


def _decisions(db, where: str, args: list, limit: int) -> list[dict[str, Any]]:
    return [
        {**row, "figures": _loads(row["figures"])}
        for row in db.query(
            "select d.cycle, c.now as time, c.sim_start, d.kind, d.job, d.user, d.machine, "
            "d.policy, d.reason, d.figures, d.action, a.state as action_state "
            "from decisions d join cycles c on c.id = d.cycle "
            f"left join actions a on a.key = d.action where {where} "
            "order by d.cycle desc, d.seq limit ?", [*args, limit])
    ]


def _explain_user(db, user: str, limit: int) -> dict[str, Any]:
    cycle = _last_cycle_with_usage(db)
    usage = list(db.query("select * from usage where cycle = ? order by rowid", [cycle["id"]]))
    position = next((i for i, row in enumerate(usage, start=1) if row["user"] == user), None)
    mine = next((row for row in usage if row["user"] == user), None)
    record = next(db.query("select * from users where name = ?", [user]), None)
    last_seen = None
    if mine is None:  # gone from the pool: when it was last in it, as usage remembers
        last_seen = next(db.query(
            "select u.cycle, c.now as time, c.sim_start from usage u join cycles c "
            "on c.id = u.cycle where u.user = ? order by u.cycle desc limit 1", [user]), None)
    involved = ("d.user = ? or d.figures like ? or d.figures like ?")
    patterns = [user, f'%"receiver": "{user}"%', f'%"victim_user": "{user}"%']
    held = []
    for row in db.query("select id, held_back from cycles where held_back like ? "
                        "order by id desc limit ?", [f"%{user}%", limit]):
        held += [{"cycle": row["id"], **h} for h in _loads(row["held_back"]) or []
                 if user in (h.get("victim_user"), h.get("receiver_user"))]
    return {
        "user": user,
        "cycle": cycle["id"],
        "time": cycle["now"],
        "sim_start": cycle["sim_start"],
        "policy": cycle["policy"],
        "position": position,
        "users": len(usage),
        "shares": ({key: mine[key] for key in (*SHARE_KEYS, "dominant_share")}
                   if mine else None),
        "policy_figures": _loads(mine["figures"]) if mine else None,
        # None once the user's record is pruned (not seen for `retention.users` days).
        "first_seen": record["first_seen"] if record else None,
        "last_preempted": record["last_preempted"] if record else None,
        "record_pruned": record is None,
        "last_seen": last_seen,
        "held_back": held,
        "backoff": _backoff_note(db, f"user {user}"),
        "charged_as": _charges(db, "owner = ?", [user]),
        "decisions": _decisions(db, involved, patterns, limit),
    }


def _group_rows(db, since: float | None = None) -> Iterator[tuple[dict[str, Any], list]]:
    """Each cycle that recorded its accounting groups (from `since`), with their rows."""
    clause, args = ("and now >= ?", [since]) if since is not None else ("", [])
    for cycle in db.query(f"select id, now, sim_start, policy, groups from cycles where "
                          f"groups is not null {clause} order by id", args):
        yield cycle, _loads(cycle["groups"])


def is_group(db, name: str) -> bool:
    """Whether the latest cycle that recorded accounting groups has `name` among them."""
    row = db.execute("select groups from cycles where groups is not null "
                     "order by id desc limit 1").fetchone()
    return row is not None and any(group["group"] == name for group in _loads(row[0]))


def _latest_group_cycle(db) -> dict[str, Any] | None:
    """The latest cycle that recorded its accounting groups, if any."""
    return next(iter(db.query("select id, now, sim_start, policy, groups from cycles "
                              "where groups is not null order by id desc limit 1")), None)


def latest_groups(db: sqlite_utils.Database) -> dict[str, Any]:
    """The accounting groups' rows of the latest cycle that recorded them (`gridfair shares
    --db --groups`)."""
    with reading(db):
        cycle = _latest_group_cycle(db)
        if cycle is None:
            raise ReportError("no cycle in the store recorded accounting groups (the daemon "
                              "records them under the hdrf order with a tree)")
        return {"cycle": cycle["id"], "time": cycle["now"], "sim_start": cycle["sim_start"],
                "policy": cycle["policy"], "groups": _loads(cycle["groups"])}


def _explain_group(db, group: str, limit: int) -> dict[str, Any] | None:
    """Where accounting group `group` stands as of the latest cycle that recorded groups:
    its row, its subgroups', its users', and the recent decisions that name it."""
    if not is_group(db, group):
        return None
    cycle = _latest_group_cycle(db)
    assert cycle is not None  # is_group found it
    rows = _loads(cycle["groups"])
    row = next(row for row in rows if row["group"] == group)
    subgroups = [other for other in rows if other["level"] == row["level"] + 1
                 and (row["level"] == 0 or other["group"].startswith(group + "."))]
    named = f'%"group": "{group}"%'
    users = [{"user": usage["user"], "running": usage["running"], "idle": usage["idle"],
              "dominant_share": usage["dominant_share"]}
             for usage in db.query("select user, running, idle, dominant_share from usage "
                                   "where cycle = ? and figures like ? order by rowid",
                                   [cycle["id"], named])]
    decisions = _decisions(db, "d.figures like ? or d.figures like ? or d.figures like ?",
                           [named, f'%"receiver_group": "{group}"%',
                            f'%"victim_group": "{group}"%'], limit)
    return {"group": group, "cycle": cycle["id"], "time": cycle["now"],
            "sim_start": cycle["sim_start"], "policy": cycle["policy"], "row": row,
            "subgroups": subgroups, "users": users, "decisions": decisions}


def _explain_job(db, job: str, limit: int) -> dict[str, Any]:
    rows = list(db.query("select j.*, c.sim_start from jobs j left join cycles c "
                         "on c.id = j.cycle where j.id = ?", [job]))
    events = list(db.query("select e.cycle, e.time, c.sim_start, e.event, e.machine "
                           "from job_events e left join cycles c on c.id = e.cycle "
                           "where e.job = ? order by e.id desc limit ?", [job, limit]))
    actions = list(db.query("select key, kind, machine, state, attempts, error, reason "
                            "from actions where job = ? order by planned_at desc limit ?",
                            [job, limit]))
    for action in actions:
        action["log"] = list(db.query("select cycle, time, state, note from action_log "
                                      "where key = ? order by id", [action["key"]]))
    identity = rows[0]["identity"] if rows else None
    return {
        "job": job,
        "now": rows[0] if rows else None,
        "charge": next(iter(_charges(db, "identity = ?", [identity])), None),
        "events": events,
        "decisions": _decisions(db, "d.job = ? or d.figures like ?",
                                [job, f'%"{job}"%'], limit),
        "actions": actions,
        "backoff": _backoff_note(db, f"job {job}"),
    }


def _backoff_note(db: sqlite_utils.Database, name: str) -> str | None:
    """The latest cycle's note that `name` ("job 12.0", "user alice") was backed off for
    allocations that did not land (`gridfair.daemon.backoff`), with the cycle; None if none
    is recorded."""
    row = next(iter(db.query("select id, events from cycles where events like ? "
                             "order by id desc limit 1", [f"%of {name} did not land%"])), None)
    if row is None:
        return None
    note = next(note for note in (_loads(row["events"]) or {}).get("notes", ())
                if f"of {name} did not land" in note)
    return f"cycle {row['id']}: {note}"


# ------------------------------------------------------------ history, actions
def _filtered(db: sqlite_utils.Database, select: str, order: str, equal: dict[str, Any],
              since_column: str, since: str | None) -> list[dict[str, Any]]:
    """`select`, keeping rows whose columns equal the given values (None: any) and whose
    `since_column` is at or after `--since`."""
    with reading(db):
        clauses = [f"{column} = ?" for column, value in equal.items() if value is not None]
        args: list[Any] = [value for value in equal.values() if value is not None]
        start = parse_since(since, db)
        if start is not None:
            clauses.append(f"{since_column} >= ?")
            args.append(start)
        where = " where " + " and ".join(clauses) if clauses else ""
        return list(db.query(f"{select}{where} {order}", args))


def history(db: sqlite_utils.Database, user: str | None, since: str | None
            ) -> list[dict[str, Any]]:
    return _filtered(
        db, "select u.cycle, u.time, u.user, u.provided_mflops, u.allocated_mflops, "
        "u.power_diff, u.dominant_share, u.running, u.idle, u.in_flight, c.sim_start "
        "from usage u "
        "join cycles c on c.id = u.cycle", "order by u.cycle, u.rowid", {"u.user": user},
        "u.time", since)


def group_history(db: sqlite_utils.Database, group: str, since: str | None
                  ) -> list[dict[str, Any]]:
    """Accounting group `group`'s row of each cycle that recorded groups, from `--since`."""
    with reading(db):
        if not is_group(db, group):
            raise ReportError(f"no accounting group named {group!r} in the store's latest "
                              "cycle with groups (the daemon records them under the hdrf "
                              "order with a tree)")
        return [{"cycle": cycle["id"], "time": cycle["now"], "sim_start": cycle["sim_start"],
                 **row}
                for cycle, rows in _group_rows(db, parse_since(since, db))
                for row in rows if row["group"] == group]


def actions(db: sqlite_utils.Database, since: str | None, state: str | None
            ) -> list[dict[str, Any]]:
    if state is not None and state not in ACTION_STATES:
        raise ReportError(f"--state {state!r}: one of {', '.join(ACTION_STATES)}")
    return _filtered(
        db, "select a.planned_cycle, a.cycle, a.planned_at, a.updated_at, a.kind, a.job, "
        "a.user, a.machine, a.state, a.attempts, a.error, a.reason, a.key, c.sim_start "
        "from actions a left join cycles c on c.id = a.planned_cycle",
        "order by a.planned_at, a.rowid", {"a.state": state}, "a.updated_at", since)


def held_back(db: sqlite_utils.Database, cycle: int) -> list[str]:
    """The preemptions the safety rules held back in `cycle` (and decisions not acted on
    because the snapshot was stale), each with the rule and its figures."""
    row = next(iter(db.query("select held_back from cycles where id = ?", [cycle])), None)
    lines = []
    for item in (_loads(row["held_back"]) if row else None) or []:
        if "victim" in item:
            lines.append(f"vacate {item['victim']} ({item['victim_user']}) on {item['machine']}"
                         f" for {item['receiver']} ({item['receiver_user']}): {item['rule']}")
        else:
            lines.append(f"{item['decisions']} decision(s) not acted on: {item['rule']}")
    return lines


def cycle_notes(db: sqlite_utils.Database, first: int | None) -> list[str]:
    """What went wrong from cycle `first` (None: the first) to the latest: cycles that
    failed or were cut short, ads skipped and warnings about ads, each with the cycles it
    happened in (an ad skipped every cycle is one line, not one a cycle)."""
    seen: dict[str, list[int]] = {}
    with reading(db):
        for cycle in db.query("select id, outcome, error, skipped, warnings from cycles "
                              "where id >= ? order by id", [first or 0]):
            if cycle["outcome"] not in ("ok", "dry-run", "running"):
                what = cycle["outcome"] + (f": {cycle['error']}" if cycle["error"] else "")
                seen.setdefault(what, []).append(cycle["id"])
            for kind, column in (("ad skipped", "skipped"), ("ad warning", "warnings")):
                for item in _loads(cycle[column]) or []:
                    seen.setdefault(f"{kind}: {ad_note_line(**item)}", []).append(cycle["id"])
    notes = [f"{_cycle_span(cycles)}: {what}" for what, cycles in seen.items()]
    if len(notes) > SHOWN_NOTES:
        notes[SHOWN_NOTES:] = [f"and {len(notes) - SHOWN_NOTES} more (`gridfair shares --db` "
                               "lists the latest cycle's skipped ads)"]
    return notes


#: Runs of cycles a note lists before it counts the rest; notes listed before they are.
SHOWN_RUNS, SHOWN_NOTES = 8, 20


def _cycle_span(cycles: list[int]) -> str:
    """`cycle 3`, or `cycles 3-7, 9, 12-15` (runs of consecutive cycles), the runs past
    `SHOWN_RUNS` counted."""
    runs: list[list[int]] = []
    for cycle in cycles:
        if runs and cycle == runs[-1][-1] + 1:
            runs[-1].append(cycle)
        else:
            runs.append([cycle])
    shown = ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0])
                      for run in runs[:SHOWN_RUNS])
    if len(runs) > SHOWN_RUNS:
        shown += f" and {sum(map(len, runs[SHOWN_RUNS:]))} more"
    return ("cycle " if len(cycles) == 1 else "cycles ") + shown


def held_back_for(db: sqlite_utils.Database, job: str, limit: int = 10
                  ) -> list[dict[str, Any]]:
    """The preemptions the safety rules held back that would have made room for `job` (its
    receiver), latest first: cycle, its time (`now`, `sim_start`), rule, victim, victim_user,
    machine."""
    with reading(db):
        rows = list(db.query("select id, now, sim_start, held_back from cycles where "
                             "held_back like ? order by id desc limit ?",
                             [f'%"receiver": "{job}"%', limit]))
    return [{"cycle": row["id"], "now": row["now"], "sim_start": row["sim_start"], **item}
            for row in rows for item in _loads(row["held_back"]) or []
            if item.get("receiver") == job]
