"""Which daemon store an admin command reads (`explain`, `history`, `actions`, `shadow`,
`shares --config`): `--db FILE`, or `--config FILE` (the daemon's own config: its
`daemon.store`), or, with neither, `./gridfair.db` (the demo daemon's, `make run`) and then the
installed daemon's config, `/etc/gridfair/htcondor.toml` (configs/gridfair-daemon.service),
and then the store of a daemon `condor_master` runs (`GRIDFAIR_STORE` in HTCondor's
configuration here, docs/condor-daemon.md). `$GRIDFAIR_DB` and `$GRIDFAIR_CONFIG` stand for
the options. When no store is found, the error says every place looked at and what to give."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gridfair.daemon.store import StoreError

DB_ENV = "GRIDFAIR_DB"
CONFIG_ENV = "GRIDFAIR_CONFIG"
#: The demo daemon's store (configs/sim.toml, `make run`), in the current directory.
LOCAL_STORE = Path("gridfair.db")
#: Where the installed daemon's config lives (configs/gridfair-daemon.service).
INSTALLED_CONFIG = Path("/etc/gridfair/htcondor.toml")


def store_of_config(config_path: Path) -> Path:
    """The store a daemon config names (`daemon.store`, resolved as the daemon resolves it)."""
    from gridfair.daemon.config import load_config

    return Path(load_config(config_path)["daemon"]["store"])


def store_of_knobs() -> Path | None:
    """The store of a daemon condor_master runs: its `daemon.store` knob in HTCondor's
    configuration here (GRIDFAIR_STORE), None when it is not set."""
    import htcondor2

    from gridfair.daemon.knobs import knob_name

    value = htcondor2.param.get(knob_name("daemon", "store"))
    return Path(value) if value else None


def configured_policy() -> tuple[dict[str, Any], str] | None:
    """The installed daemon's policy settings (its `[policy]` section) and where they were
    read: /etc/gridfair/htcondor.toml, else HTCondor's configuration here when it sets any
    `GRIDFAIR_POLICY_` knob (a daemon condor_master runs); None when neither."""
    from gridfair.daemon.config import load_config

    if INSTALLED_CONFIG.exists():
        return load_config(INSTALLED_CONFIG)["policy"], str(INSTALLED_CONFIG)
    import htcondor2

    from gridfair.daemon.knobs import knob_name, read_knobs

    knobs = [name for name in htcondor2.param if name.upper().startswith(
        knob_name("policy", ""))]
    if not knobs:
        return None
    return read_knobs(htcondor2.param)["policy"], "HTCondor's " + ", ".join(sorted(knobs))


def find_store(db_path: Path | None, config_path: Path | None) -> Path:
    """The store to read: `--db`, else `--config`'s, else the first of ./gridfair.db,
    /etc/gridfair/htcondor.toml's and GRIDFAIR_STORE's that is there; a StoreError saying
    where it looked if none."""
    if db_path is not None and config_path is not None:
        raise click.UsageError(f"--db {db_path} and --config {config_path} each name a store: "
                               "give one")
    if db_path is not None:
        path = db_path
    elif config_path is not None:
        path = store_of_config(config_path)
    elif LOCAL_STORE.exists():
        path = LOCAL_STORE
    elif INSTALLED_CONFIG.exists():
        path = store_of_config(INSTALLED_CONFIG)
    elif (knob := store_of_knobs()) is not None:
        path = knob
    else:
        raise StoreError(f"store {LOCAL_STORE} (the current directory): no such file, no "
                         f"{INSTALLED_CONFIG}, and no GRIDFAIR_STORE in HTCondor's "
                         "configuration; give --config FILE (the daemon's config) or "
                         "--db FILE (its daemon.store)")
    try:
        readable = not path.exists() or os.access(path, os.R_OK)
    except PermissionError:  # a directory on the way is closed to this account
        readable = False
    if not readable:
        raise StoreError(f"store {path}: not readable by this account (the daemon's store is "
                         "its account's alone: run the command as that account, e.g. "
                         "sudo -u gridfair)")
    return path


def store_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--db` and `--config`, passed on to `function` as one `db_path` (`find_store`)."""
    @functools.wraps(function)
    def with_store(*args: Any, db_path: Path | None, config_path: Path | None,
                   **kwargs: Any) -> Any:
        return function(*args, db_path=find_store(db_path, config_path), **kwargs)

    with_store = click.option(
        "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
        envvar=CONFIG_ENV, default=None,
        help=f"The daemon's config: read the store it names (or ${CONFIG_ENV}).")(with_store)
    return click.option(
        "--db", "db_path", type=click.Path(path_type=Path), envvar=DB_ENV, default=None,
        help=f"The daemon's store (daemon.store in its config; or ${DB_ENV}) "
             f"[default: ./{LOCAL_STORE}, else the store of {INSTALLED_CONFIG}, else "
             "HTCondor's GRIDFAIR_STORE].")(with_store)
