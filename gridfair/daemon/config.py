"""The daemon's TOML configuration: a fixed schema, checked at start.

Every key is declared once in `SCHEMA` with its type, default and bounds; an unknown key, a
wrong type or a value out of range is a `ConfigError` naming the key (`safety.min_runtime`),
so a typo never silently falls back to a default. A key with no default (`REQUIRED`) must be
written: `backend.kind`, so that a config says which pool it drives (an empty or unreadable
file is never the demo simulation). Relative paths are resolved against the config file's
directory, so a config works from any working directory.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from gridfair.core.placement import PLACEMENTS
from gridfair.core.stages import ALLOCATION_RULES
from gridfair.errors import ConfigError, not_text
from gridfair.policies.registry import unread_options

BACKENDS = ("sim", "files", "htcondor")
LOG_LEVELS = ("debug", "info", "warning", "error")
#: The default of a key that must be written.
REQUIRED = None


@dataclass(frozen=True)
class Key:
    """One configuration key: its type, default and allowed values."""

    kind: type
    default: Any
    minimum: float | None = None
    choices: tuple[str, ...] | None = None
    path: bool = False  # a file or directory, resolved against the config's directory
    #: A path that may instead be an embedded grid's name: kept as given when no such file is
    #: there (`gridfair grid list`).
    or_name: bool = False
    help: str = ""


# section -> key -> Key. The backend sections are only read for the backend in use, but are
# all checked so a config can carry every backend's settings.
SCHEMA: dict[str, dict[str, Key]] = {
    "daemon": {
        "interval": Key(float, 60.0, minimum=0.01, help="seconds between cycles"),
        "poll": Key(float, 0.0, minimum=0.0, help="seconds between cheap looks at the pool "
                    "for a slot freed or jobs submitted, each starting a cycle at once (the "
                    "interval is then the longest wait); 0: none"),
        "store": Key(str, "gridfair.db", path=True, help="SQLite file of the daemon's state"),
        "max_cycles": Key(int, 0, minimum=0, help="stop after this many cycles (0: never)"),
        "query_timeout": Key(float, 30.0, minimum=0.01, help="seconds a snapshot read may take"),
        "backoff_max": Key(float, 600.0, minimum=0.0, help="longest wait after failed cycles"),
        "incremental": Key(bool, True, help="keep the pool between cycles and apply each "
                           "snapshot's changes to it (false: rebuild it every cycle)"),
        "full_rebuild_every": Key(int, 100, minimum=0, help="with incremental, every this "
                                  "many cycles the pool is also rebuilt from the snapshot, "
                                  "what the kept pool differs in logged, and the rebuild kept "
                                  "(0: only at the start and after a failed cycle)"),
        "lease": Key(float, 0.0, minimum=0.0, help="seconds HTCondor waits for gridfair's "
                     "next cycle before starting jobs on its own (the htcondor backend's "
                     "lease); 0: two intervals"),
        "log_file": Key(str, "", path=True, help="also log to this file"),
        "log_max_bytes": Key(int, 0, minimum=0, help="rotate log_file once a line would take "
                             "it past this size, as HTCondor's MAX_<SUBSYS>_LOG does (0: never; "
                             "logrotate and SIGHUP instead)"),
        "log_backups": Key(int, 1, minimum=1, help="rotated log files kept (log_file.1, ...), "
                           "as HTCondor's MAX_NUM_<SUBSYS>_LOG"),
        "log_level": Key(str, "info", choices=LOG_LEVELS),
    },
    "policy": {
        "name": Key(str, "hosep", help="a named composition (--policy)"),
        "order": Key(str, "", help="override the composition's order stage"),
        "preempt": Key(str, "", help="override its preemption stage ('none' for none)"),
        "admit": Key(str, "", help="override its admission stage"),
        "options": Key(dict, {}, help="options passed to the stages"),
        # A live pool backfills as HTCondor's negotiator does: SDRF's paper rule (stop at
        # the first task that fits nowhere) left a fifth of a partitionable pool idle for
        # a minute in Showcase 2 while jobs that fitted waited.
        "allocation": Key(str, "backfill", choices=ALLOCATION_RULES,
                          help="when the first user's next job fits no free slot: backfill "
                          "(set it aside, go on with the next job or user; HTCondor's "
                          "negotiator) or stop (allocate nothing more this cycle; SDRF's "
                          "paper)"),
        # What won on the simulated multi-resource pools, with a machine kept for a
        # whole-machine job (docs/results/placement.md).
        "placement": Key(str, "shape", choices=tuple(sorted(PLACEMENTS)),
                         help="which free slot a job is given (docs/placement.md): shape (the "
                         "slot whose free cpus and memory are most like the request), fastest "
                         "(the most MFlops a cpu), condor, align, most-allocated, balanced"),
    },
    "safety": {
        "max_vacates_per_cycle": Key(int, 2, minimum=0),
        "min_runtime": Key(float, 600.0, minimum=0.0, help="seconds a job runs before a vacate"),
        "preempt_cooldown": Key(float, 1800.0, minimum=0.0, help="seconds a vacated job is "
                                "spared further vacates"),
        "max_snapshot_age": Key(float, 300.0, minimum=0.0, help="no action on an older snapshot"),
        "max_retries": Key(int, 2, minimum=0, help="retries of a failed action"),
        "landing_timeout": Key(float, 120.0, minimum=0.0, help="seconds an allocation holds "
                               "its slot before it starts: two of the pool's negotiation "
                               "cycles (2 x NEGOTIATOR_INTERVAL)"),
    },
    "backend": {
        "kind": Key(str, REQUIRED, choices=BACKENDS, help="the pool the daemon drives"),
    },
    "backend.sim": {
        "grid": Key(str, "", path=True, or_name=True,
                    help="grid file or embedded grid's name; empty: the embedded hosep-table1"),
        "step": Key(float, 60.0, minimum=0.0, help="simulated seconds per cycle"),
        "seed": Key(int, 1),
        "workload": Key(str, "medium", help="a workload the grid file defines"),
    },
    "backend.files": {
        "directory": Key(str, "", path=True, help="holds *.status and *.queue dumps"),
        "actions": Key(str, "", path=True, help="JSON-lines file actions are appended to"),
        "owner_attribute": Key(str, "GridOwner"),
        "power_attribute": Key(str, "", help="slot power in MFlops; empty: MFlops, else "
                               "KFlops / 1000, else Mips"),
    },
    "backend.htcondor": {
        "collector": Key(str, "", help="host[:port], or several separated by commas (an HA "
                         "pair, a flock of pools): each is read, an earlier one's machine "
                         "names win; empty: COLLECTOR_HOST"),
        "slot_constraint": Key(str, "true"),
        "demand": Key(str, "autocluster", choices=("autocluster", "jobs"),
                      help="idle jobs as autocluster ads + narrow rows, or every job ad"),
        "job_constraint": Key(str, "", help="jobs read; empty: 'JobStatus == 1' (autocluster), "
                              "'JobStatus == 1 || JobStatus == 2' (jobs)"),
        "owner_attribute": Key(str, "GridOwner"),
        "power_attribute": Key(str, "", help="slot power in MFlops; empty: MFlops, else "
                               "KFlops / 1000, else Mips"),
        "steer_attribute": Key(str, "GridfairSlot", help="job attribute naming the chosen "
                               "slot (the size allocated: the same name + Size)"),
        "uid_domain": Key(str, "", help="the pool's UID domain: an authenticated user of it "
                          "is the owner of its name; empty: UID_DOMAIN from HTCondor's "
                          "configuration here; '*': any domain (trusts every schedd)"),
        "submitter_map": Key(str, "", path=True, help="file of 'submitter owner' lines"),
        "trust_accounting_groups": Key(bool, False, help="charge jobs to the accounting "
                                       "group they name: only where the pool validates "
                                       "groups (configs/htcondor-accounting-groups.config)"),
        "lease_knob": Key(str, "GRIDFAIR_LEASE_UNTIL", help="negotiator knob gridfair renews "
                          "each cycle so that only its steered jobs start (fail-open when it "
                          "stops); empty: hold no lease"),
        "condor_now": Key(str, "", help="the condor_now program (a path, or a name on PATH): "
                          "a vacate and the allocation of the slot it frees run as one "
                          "`condor_now JOB VICTIM`; empty: vacate, then steer"),
        "schedd_timeout": Key(float, 20.0, minimum=0.1, help="seconds the schedds (asked side "
                              "by side) may take to answer before those that have not are "
                              "skipped for the cycle with the reason; under "
                              "daemon.query_timeout"),
        "collector_timeout": Key(float, 5.0, minimum=0.1, help="with several collectors: "
                                 "seconds they (asked side by side) may take to answer before "
                                 "those that have not are skipped for the cycle with the "
                                 "reason; with schedd_timeout, under daemon.query_timeout"),
    },
    # How long the store keeps each kind of record (`gridfair.daemon.retention`), in days of
    # the backend's clock; 0: for ever.
    "retention": {
        "decisions": Key(float, 7.0, minimum=0.0, help="days decisions and the journal's "
                         "closed actions of jobs gone from the pool are kept"),
        "job_events": Key(float, 7.0, minimum=0.0, help="days job events are kept"),
        "cycle_details": Key(float, 7.0, minimum=0.0, help="days a cycle's skipped ads, "
                             "warnings, events and held-back preemptions are kept"),
        "usage_full": Key(float, 1.0, minimum=0.0, help="days every cycle's usage is kept, "
                          "then one cycle an hour (0: every cycle for ever)"),
        "usage_hourly": Key(float, 30.0, minimum=0.0, help="days hourly usage is kept, then "
                            "one cycle a day (0: hourly for ever)"),
        "usage_daily": Key(float, 0.0, minimum=0.0, help="days usage is kept at all "
                           "(0: for ever)"),
        "shadow": Key(float, 7.0, minimum=0.0, help="days a shadow daemon's records are kept"),
        "users": Key(float, 30.0, minimum=0.0, help="days users and identities not seen are "
                     "kept"),
        "prune_rows": Key(int, 20000, minimum=1, help="most rows pruned after a cycle"),
        "vacuum_pages": Key(int, 4096, minimum=1, help="most free pages given back to the "
                            "file system after a cycle"),
    },
    "metrics": {
        "enabled": Key(bool, False),
        "port": Key(int, 9187, minimum=1),
        "address": Key(str, "127.0.0.1"),
        "user_labels": Key(bool, False, help="export per-user gauges labelled with user "
                           "names (any account that can reach the endpoint reads them)"),
    },
}


class Config:
    """Validated settings: `config["safety"]["min_runtime"]`, every key present."""

    def __init__(self, sections: dict[str, dict[str, Any]]) -> None:
        self.sections = sections

    def __getitem__(self, section: str) -> dict[str, Any]:
        return self.sections[section]

    @property
    def backend(self) -> str:
        return self.sections["backend"]["kind"]


def load_config(path: Path) -> Config:
    """Read and validate a TOML config file: one that cannot be read, is not text or TOML, or
    says nothing, is a ConfigError naming it."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read config: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: {not_text(error)}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    if not raw:
        raise ConfigError(f"{path}: empty config (no setting in it); it needs at least "
                          f"[backend] kind = one of {', '.join(BACKENDS)} (configs/ has an "
                          "example of each)")
    try:
        return validate(raw, base=path.resolve().parent)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def validate(raw: Mapping[str, Any], *, base: Path) -> Config:
    """Check `raw` (parsed TOML) against `SCHEMA`; fill defaults; resolve paths."""
    flat = _flatten_sections(raw)
    sections: dict[str, dict[str, Any]] = {}
    for section, keys in SCHEMA.items():
        given = flat.pop(section, {})
        unknown = sorted(set(given) - set(keys))
        if unknown:
            known = ", ".join(keys)
            raise ConfigError(f"config key {section}.{unknown[0]}: unknown key (known: {known})")
        sections[section] = {
            name: _check(f"{section}.{name}", key, given.get(name, key.default), base)
            for name, key in keys.items()
        }
    if flat:
        section = sorted(flat)[0]
        known = ", ".join(SCHEMA)
        raise ConfigError(f"config section [{section}]: unknown section (known: {known})")
    _require_keys(sections)
    kind = sections["backend"]["kind"]
    _require_backend_keys(kind, sections)
    _check_policy(sections["policy"])
    _check_lease(sections["daemon"])
    _check_schedd_timeout(sections)
    _check_retention(sections["retention"])
    return Config(sections)


def _check_retention(retention: Mapping[str, Any]) -> None:
    """Usage goes from every cycle to hourly to daily to gone: each step (that happens at
    all) no sooner than the ones before it."""
    for earlier, later in combinations(("usage_full", "usage_hourly", "usage_daily"), 2):
        if retention[earlier] and retention[later] and retention[later] < retention[earlier]:
            raise ConfigError(f"config key retention.{later}: must be at least "
                              f"retention.{earlier} ({retention[earlier]:g} days), got "
                              f"{retention[later]:g}")


def _check_schedd_timeout(sections: Mapping[str, Mapping[str, Any]]) -> None:
    """Schedds that hang are skipped after `schedd_timeout` (collectors, when there are
    several, after `collector_timeout` before them), which must leave the rest of the read
    time to finish: one at or past `query_timeout` fails the whole read instead."""
    if sections["backend"]["kind"] != "htcondor":
        return
    htcondor = sections["backend.htcondor"]
    query_timeout = sections["daemon"]["query_timeout"]
    if htcondor["schedd_timeout"] >= query_timeout:
        raise ConfigError(f"config key backend.htcondor.schedd_timeout: must be under "
                          f"daemon.query_timeout ({query_timeout:g} s), got "
                          f"{htcondor['schedd_timeout']:g}")
    waits = htcondor["schedd_timeout"] + htcondor["collector_timeout"]
    if len(collector_addresses(htcondor["collector"])) > 1 and waits >= query_timeout:
        raise ConfigError(f"config key backend.htcondor.collector_timeout: with "
                          f"backend.htcondor.schedd_timeout, must be under daemon.query_timeout "
                          f"({query_timeout:g} s), got {htcondor['collector_timeout']:g} + "
                          f"{htcondor['schedd_timeout']:g}")


def collector_addresses(text: str) -> list[str]:
    """The collectors `backend.htcondor.collector` names, in order (commas or spaces between,
    as HTCondor's COLLECTOR_HOST lists an HA pair); none for COLLECTOR_HOST. One named twice
    is a ConfigError."""
    addresses = text.replace(",", " ").split()
    twice = next((address for number, address in enumerate(addresses)
                  if address in addresses[:number]), None)
    if twice is not None:
        raise ConfigError(f"config key backend.htcondor.collector: {twice} named twice")
    return addresses


def _check_lease(daemon: dict[str, Any]) -> None:
    """The lease defaults to two intervals; one no longer than an interval would let the pool
    start jobs on its own between every two cycles."""
    if not daemon["lease"]:
        daemon["lease"] = 2 * daemon["interval"]
    elif daemon["lease"] <= daemon["interval"]:
        raise ConfigError(f"config key daemon.lease: must be longer than daemon.interval "
                          f"({daemon['interval']:g} s), got {daemon['lease']:g}: HTCondor would "
                          "start jobs on its own between cycles")


def _check_policy(policy: Mapping[str, Any]) -> None:
    """Build the stages once at load time, so a bad policy name or option value fails before
    the first cycle, and reject an option no chosen stage reads: a misspelt `delat` must not
    silently leave SDRF at its default."""
    try:
        unread, read = unread_options(policy["name"] or None, order=policy["order"] or None,
                                      preempt=policy["preempt"] or None,
                                      admit=policy["admit"] or None, options=policy["options"])
    except ConfigError as error:
        raise ConfigError(f"config section [policy]: {error}") from None
    if unread:
        raise ConfigError(f"config key policy.options.{unread[0]}: not an option of the chosen "
                          f"stages (they read: {', '.join(read) or 'none'})")


def _flatten_sections(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"backend": {"kind": ..., "files": {...}}} -> {"backend": {...}, "backend.files": {...}}."""
    flat: dict[str, dict[str, Any]] = {}
    for section, body in raw.items():
        if not isinstance(body, dict):
            raise ConfigError(f"config key {section}: expected a [{section}] table")
        top = flat.setdefault(section, {})
        for name, value in body.items():
            nested = f"{section}.{name}"
            if isinstance(value, dict) and nested in SCHEMA:
                flat[nested] = dict(value)
            else:
                top[name] = value
    return flat


def _require_keys(sections: Mapping[str, Mapping[str, Any]]) -> None:
    """A key with no default (`REQUIRED`) that the config does not write is an error naming
    it and its choices."""
    for section, keys in SCHEMA.items():
        for name, key in keys.items():
            if sections[section][name] is REQUIRED:
                choices = f"one of {', '.join(key.choices)}" if key.choices else "..."
                raise ConfigError(f"config key {section}.{name}: missing ({key.help}): "
                                  f"write [{section}] {name} = {choices}")


def _check(name: str, key: Key, value: Any, base: Path) -> Any:
    if value is REQUIRED:
        return value  # `_require_keys` names it, after the keys written are checked
    kind = key.kind
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    # bool is an int subclass: `max_retries = true` must not pass as 1.
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        expected = kind.__name__
        meaning = f" ({key.help})" if key.help else ""
        raise ConfigError(
            f"config key {name}: expected {_article(expected)}{meaning}, got {value!r}")
    if key.minimum is not None and value < key.minimum:
        raise ConfigError(f"config key {name}: must be at least {key.minimum:g}, got {value!r}")
    if key.choices is not None and value not in key.choices:
        raise ConfigError(
            f"config key {name}: must be one of {', '.join(key.choices)}, got {value!r}"
        )
    if key.path and value and not Path(value).is_absolute():
        resolved = base / value
        if not key.or_name or resolved.exists():
            # Not the last name: a link there is the store's or log's to refuse, not follow.
            value = str(resolved.parent.resolve() / resolved.name)
    return value


def _article(word: str) -> str:
    names = {"float": "a number", "int": "an integer", "str": "a string", "bool": "true/false",
             "dict": "a table"}
    return names.get(word, word)


def _require_backend_keys(kind: str, sections: dict[str, dict[str, Any]]) -> None:
    required = {"files": ("directory", "actions")}.get(kind, ())
    for name in required:
        if not sections[f"backend.{kind}"][name]:
            raise ConfigError(f"config key backend.{kind}.{name}: required by backend {kind!r}")
