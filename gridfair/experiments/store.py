"""The results of a sweep in SQLite (through sqlite-utils), written as each run finishes.

Tables:
- `meta`: `schema_version` (a DB written by an incompatible version is refused, not misread)
  and the gridfair version that created the DB;
- `runs`: one row per run, keyed by the run's deterministic key: `position` (the run's place in
  the sweep, which fixes the order results are read back in, whatever order they finished in),
  `params` (the run's parameters as canonical JSON) and one column per parameter, so results
  can be queried with plain SQL; `status` (`ok` or `error`), `error`, `stages`,
  `allocation_rule` (the allocation rule the run used), `wall_seconds`, and one column per
  run-wide metric;
- `users`: one row per run and user (`run`, `user`, `user_index`), one column per user metric.

A run's row and its users' rows are written in one transaction: a sweep killed at any moment
leaves each run either fully recorded or absent, so resuming redoes exactly the absent ones.
Metric columns are added as they appear, so metrics added to the simulator later are stored
without a schema change.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlite_utils

from gridfair import __version__
from gridfair.errors import InputError
from gridfair.experiments.runs import PARAMETERS, RunOutcome, RunSpec

SCHEMA_VERSION = 2
OK, ERROR = "ok", "error"


class ResultsStore:
    """A results DB: created with the current schema, or opened if its schema matches."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise InputError("no such results DB", source=str(self.path))
        try:
            self.db = sqlite_utils.Database(self.path)
            self._check_or_create(create)
        except sqlite3.DatabaseError as error:
            raise InputError(f"not a gridfair results DB ({error})",
                             source=str(self.path)) from None

    def _check_or_create(self, create: bool) -> None:
        tables = set(self.db.table_names())
        if "meta" not in tables:
            if tables or not create:  # an empty file to read is not made a results DB
                raise InputError("not a gridfair results DB (no meta table)",
                                 source=str(self.path))
            self._create()
            return
        meta = {row["name"]: row["value"] for row in self.db["meta"].rows}
        found = meta.get("schema_version")
        if found != str(SCHEMA_VERSION):
            raise InputError(
                f"results DB has schema version {found} (written by gridfair "
                f"{meta.get('gridfair_version', '?')}); this gridfair reads version "
                f"{SCHEMA_VERSION}: use a new --db, or the gridfair version that wrote it",
                source=str(self.path))

    def _create(self) -> None:
        with self.db.atomic():
            self.db["meta"].insert_all([
                {"name": "schema_version", "value": str(SCHEMA_VERSION)},
                {"name": "gridfair_version", "value": __version__},
            ], pk="name")
            parameter_columns = {name: _column_type(parameter.types)
                                 for name, parameter in PARAMETERS.items()}
            self.db["runs"].create({
                "key": str, "position": int, "params": str, "status": str, "error": str,
                "stages": str, "allocation_rule": str, "wall_seconds": float,
                **parameter_columns,
            }, pk="key")
            self.db["users"].create({"run": str, "user": str, "user_index": int},
                                    pk=("run", "user"), foreign_keys=[("run", "runs", "key")])
            self.db["runs"].create_index(["position"])

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def count(self, status: str | None = None) -> int:
        where = "status = ?" if status else None
        return self.db["runs"].count_where(where, [status] if status else [])

    def done_keys(self) -> set[str]:
        """Keys of the runs that finished successfully (a resumed sweep skips these)."""
        return {row["key"] for row in self.db.query("select key from runs where status = ?",
                                                    [OK])}

    def record(self, position: int, spec: RunSpec, outcome: RunOutcome) -> None:
        """Store one run's outcome, replacing an earlier attempt of the same run."""
        run_row: dict[str, Any] = {
            "key": spec.key,
            "position": position,
            "params": json.dumps(dict(spec.params), sort_keys=True, separators=(",", ":")),
            "status": OK if outcome.ok else ERROR,
            "error": outcome.error or None,
            "stages": outcome.stages or None,
            # The rule the run used; the `allocation` parameter column is what was asked.
            "allocation_rule": outcome.allocation or None,
            "wall_seconds": outcome.wall_seconds,
            **spec.all_params(),
            **{_metric_column(name): value for name, value in outcome.summary.items()},
        }
        user_rows = [{"run": spec.key, "user_index": index,
                      **{(name if name == "user" else _metric_column(name)): value
                         for name, value in user.items()}}
                     for index, user in enumerate(outcome.users)]
        # atomic() (not `with conn`): sqlite-utils' own writes inside nest as savepoints instead
        # of committing on their own, so the run and its users land together or not at all.
        with self.db.atomic():
            self.db["users"].delete_where("run = ?", [spec.key])
            self.db["runs"].insert(run_row, pk="key", replace=True, alter=True)
            if user_rows:
                self.db["users"].insert_all(user_rows, pk=("run", "user"), alter=True)

    def results(self, status: str | None = None) -> list[tuple[RunSpec, RunOutcome]]:
        """Every stored run with its outcome, in sweep order (by position, then key)."""
        where = " where status = ?" if status else ""
        runs = list(self.db.query(f"select * from runs{where} order by position, key",
                                  [status] if status else []))
        users: dict[str, list[dict[str, Any]]] = {}
        for row in self.db.query("select * from users order by run, user_index"):
            metrics = {_metric_name(name): value for name, value in row.items()
                       if name.startswith(_METRIC_PREFIX)}
            users.setdefault(row["run"], []).append({"user": row["user"],
                                                     **_nan_for_null(metrics)})
        return [(RunSpec(json.loads(row["params"])), _outcome(row, users.get(row["key"], [])))
                for row in runs]

    def failures(self) -> list[tuple[RunSpec, str]]:
        return [(spec, outcome.error) for spec, outcome in self.results(ERROR)]


# Metric columns carry a prefix so that a metric can never collide with a parameter or
# bookkeeping column of the same name (the summary's `completed` vs a future parameter).
_METRIC_PREFIX = "m_"


def _metric_column(name: str) -> str:
    return _METRIC_PREFIX + name


def _metric_name(column: str) -> str:
    return column.removeprefix(_METRIC_PREFIX)


def _column_type(types: Sequence[type]) -> type:
    return float if float in types else types[0]


def _outcome(row: dict[str, Any], users: list[dict[str, Any]]) -> RunOutcome:
    ok = row["status"] == OK
    # A failed run has no metrics: its metric columns are only there for the other runs.
    summary = {_metric_name(name): value for name, value in row.items()
               if ok and name.startswith(_METRIC_PREFIX)}
    return RunOutcome(
        key=row["key"], ok=ok, users=users, summary=_nan_for_null(summary),
        stages=row["stages"] or "", allocation=row.get("allocation_rule") or "",
        error=row["error"] or "",
        wall_seconds=row["wall_seconds"] or 0.0)


def _nan_for_null(values: dict[str, Any]) -> dict[str, Any]:
    # SQLite stores NaN as NULL; metrics read back as NaN, as the simulator produced them.
    return {name: float("nan") if value is None else value for name, value in values.items()}

