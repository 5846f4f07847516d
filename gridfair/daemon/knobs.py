"""The daemon's settings as HTCondor configuration knobs, for a daemon run by `condor_master`.

Each key of `config.SCHEMA` is one knob: `GRIDFAIR_<SECTION>_<KEY>`, upper case, where the
section is the TOML table's last word and the `[daemon]` table has none:

    daemon.interval            -> GRIDFAIR_INTERVAL
    policy.name                -> GRIDFAIR_POLICY_NAME
    safety.min_runtime         -> GRIDFAIR_SAFETY_MIN_RUNTIME
    backend.kind               -> GRIDFAIR_BACKEND_KIND
    backend.htcondor.collector -> GRIDFAIR_HTCONDOR_COLLECTOR
    metrics.port               -> GRIDFAIR_METRICS_PORT

A knob's value is written as HTCondor values are, unquoted: a string is the knob's text as it
stands (`GRIDFAIR_HTCONDOR_SLOT_CONSTRAINT = GridOwner =!= undefined`), a number is a number,
a boolean is true or false in any case (HTCondor's `True`), and `policy.options` is an inline
TOML table (`GRIDFAIR_POLICY_OPTIONS = { delta = 0.5 }`). A knob with no value is not set, as
everywhere in HTCondor; `""` is the empty string. The settings then go through the
TOML reader's own checks (`config.validate`), and its one-line errors name the knob instead of
the key. Two differences from a TOML file: `backend.kind` defaults to `htcondor` (a daemon
the master runs drives the master's pool), and a relative path is taken from the daemon's
working directory (give absolute ones: `configs/htcondor-gridfair-daemon.config` does).

A knob whose name starts with a section's prefix (`GRIDFAIR_POLICY_`, `GRIDFAIR_SAFETY_`, ...)
but names no key of it is an error, as an unknown TOML key is: `GRIDFAIR_SAFETY_MIN_RUNTIM`
must not silently leave the default. `[daemon]` knobs have no prefix of their own, so a typo
in one of them cannot be told from another GRIDFAIR_ knob of the pool's configuration
(`GRIDFAIR_LEASE_UNTIL`, `GRIDFAIR_ACCOUNT`) and is not caught.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gridfair.daemon.config import SCHEMA, Config, Key, validate
from gridfair.daemon.store import private_file
from gridfair.errors import ConfigError

PREFIX = "GRIDFAIR_"
#: A string knob's value for the empty string: HTCondor takes a knob with no value for one
#: that is not set (the default applies), so "no lease" is `GRIDFAIR_HTCONDOR_LEASE_KNOB = ""`.
EMPTY = '""'
#: What `condor_master` itself reads for a daemon named GRIDFAIR in DAEMON_LIST: no setting
#: of the daemon may be named so.
MASTER_KNOBS = ("GRIDFAIR", "GRIDFAIR_ARGS", "GRIDFAIR_USERID", "GRIDFAIR_ENVIRONMENT",
                "GRIDFAIR_LOG", "GRIDFAIR_FLAG", "GRIDFAIR_ADDRESS_FILE")


def section_word(section: str) -> str:
    """The word a section's knobs carry after GRIDFAIR_: none for `daemon`."""
    return "" if section == "daemon" else section.rpartition(".")[2].upper() + "_"


def knob_name(section: str, key: str) -> str:
    """`policy`, `name` -> `GRIDFAIR_POLICY_NAME` (see the module's docstring)."""
    return f"{PREFIX}{section_word(section)}{key.upper()}"


#: knob -> (section, key), in SCHEMA's order.
KNOBS: dict[str, tuple[str, str]] = {
    knob_name(section, key): (section, key) for section, keys in SCHEMA.items() for key in keys
}


def read_knobs(param: Mapping[str, str], *, base: Path | None = None) -> Config:
    """The daemon's settings from HTCondor's configuration `param` (`htcondor2.param`, or any
    mapping of knob -> text): the knobs set, defaults for the others, checked as a TOML
    file's settings are. A bad knob is a ConfigError naming it."""
    _refuse_unknown(name for name in param if name.upper().startswith(PREFIX))
    raw: dict[str, dict[str, Any]] = {}
    for knob, (section, key) in KNOBS.items():
        text = param.get(knob)
        if text is not None:
            raw.setdefault(section, {})[key] = _value(SCHEMA[section][key], text)
    raw.setdefault("backend", {}).setdefault("kind", "htcondor")
    try:
        return validate(_nested(raw), base=base or Path.cwd())
    except ConfigError as error:
        raise ConfigError(knob_message(str(error))) from None


def read_knobs_logged(param: Mapping[str, str]) -> Config:
    """`read_knobs`, a bad knob's error also appended to the daemon's log file (its knob, if
    set): a daemon condor_master runs has no terminal, and the master's log only says that it
    exited with status 2."""
    try:
        return read_knobs(param)
    except ConfigError as error:
        log_file = param.get(knob_name("daemon", "log_file"))
        if log_file:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            with contextlib.suppress(OSError):
                private_file(Path(log_file))
                with open(log_file, "a", encoding="utf-8") as log:
                    log.write(f"{stamp} gridfair ERROR {error}\n")
        raise


def reread_knobs() -> Config:
    """HTCondor's configuration files read again (`htcondor2.reload_config`), and the settings
    from them: what a daemon the master runs does on `condor_reconfig` (its SIGHUP)."""
    import htcondor2

    htcondor2.reload_config()
    return read_knobs(htcondor2.param)


def _refuse_unknown(names: Iterable[str]) -> None:
    prefixes = {section_word(section): section for section in SCHEMA if section != "daemon"}
    for name in sorted(names):
        upper = name.upper()
        if upper in KNOBS:
            continue
        for word, section in prefixes.items():
            if upper.startswith(PREFIX + word):
                known = ", ".join(knob_name(section, key) for key in SCHEMA[section])
                raise ConfigError(f"HTCondor knob {name}: unknown knob (known: {known})")


def _value(key: Key, text: str) -> Any:
    """A knob's text as the value of `key`'s type; text of another shape is passed on as it
    is, for `validate` to refuse with the key's expected type."""
    text = text.strip()
    if key.kind is str:
        return "" if text == EMPTY else text
    if key.kind is bool:
        return {"true": True, "false": False}.get(text.lower(), text)
    if key.kind in (int, float):
        try:
            number = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                return text
            if not math.isfinite(number):
                return text
        return number
    try:
        value = tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text
    return value if isinstance(value, key.kind) else text


def _nested(flat: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """{"backend.htcondor": {...}} -> {"backend": {"htcondor": {...}}}, as TOML reads it."""
    nested: dict[str, Any] = {}
    for section, keys in flat.items():
        top, _, sub = section.partition(".")
        table = nested.setdefault(top, {})
        if sub:
            table.setdefault(sub, {}).update(keys)
        else:
            table.update(keys)
    return nested


_DOTTED = {f"{section}.{key}": knob for knob, (section, key) in KNOBS.items()}
_KEY_MENTION = re.compile(
    r"(config key )?(?<![\w.])("
    + "|".join(map(re.escape, sorted(_DOTTED, key=len, reverse=True)))
    + r")(?:\.(\w+))?(?![\w])")
_SECTION_MENTION = re.compile(r"config section \[([\w.]+)\]")


def knob_message(message: str) -> str:
    """A `validate` error naming keys (`config key daemon.lease: must be longer than
    daemon.interval`) as one naming knobs (`HTCondor knob GRIDFAIR_LEASE: must be longer than
    GRIDFAIR_INTERVAL`)."""
    def knob(match: re.Match[str]) -> str:
        lead = "HTCondor knob " if match.group(1) else ""
        inner = f", key {match.group(3)}" if match.group(3) else ""
        return f"{lead}{_DOTTED[match.group(2)]}{inner}"

    message = _KEY_MENTION.sub(knob, message)
    return _SECTION_MENTION.sub(
        lambda match: f"HTCondor knobs {knob_name(match.group(1), '*')}", message)


def knob_table() -> str:
    """The reference table of every knob (docs/condor-daemon.md): knob, TOML key, type,
    default, meaning; from SCHEMA, so it cannot drift from what the daemon reads."""
    rows = ["| Knob | TOML key | Type | Default | Meaning |", "|---|---|---|---|---|"]
    for knob, (section, key) in KNOBS.items():
        spec = SCHEMA[section][key]
        default = _shown_default(spec, section, key)
        meaning = spec.help
        if spec.choices:
            meaning = f"{meaning}; one of {', '.join(spec.choices)}".lstrip("; ")
        if spec.minimum is not None:
            meaning = f"{meaning}; at least {spec.minimum:g}".lstrip("; ")
        meaning = meaning.replace("|", r"\|")  # a table cell's own bar
        rows.append(f"| `{knob}` | `{section}.{key}` | {spec.kind.__name__} | {default} | "
                    f"{meaning} |")
    return "\n".join(rows) + "\n"


def _shown_default(spec: Key, section: str, key: str) -> str:
    if (section, key) == ("backend", "kind"):
        return "`htcondor`"
    if spec.default is None:
        return "(required)"
    if spec.kind is bool:
        return f"`{str(spec.default).lower()}`"
    if spec.kind is dict:
        return "`{ }`"
    if spec.default == "":
        return "(empty)"
    return f"`{spec.default:g}`" if spec.kind is float else f"`{spec.default}`"
