"""Moments a user types (`--since`, `--until`): epoch seconds, an ISO date/time (UTC unless
it says otherwise), or `N` followed by s, m, h or d, counted back from a reference time."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from gridfair.errors import InputError

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def is_relative(text: str) -> bool:
    """Whether `text` is counted back from a reference (`2h`), not a moment of its own."""
    return _RELATIVE.match(text.strip()) is not None


def parse_moment(text: str, reference: float, option: str = "--since") -> float:
    """Epoch seconds of `text`; `N[smhd]` is that long before `reference`."""
    match = _RELATIVE.match(text.strip())
    if match:
        return reference - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{option} {text!r}: expected epoch seconds, an ISO date/time or "
                         "N followed by s, m, h or d (e.g. 2h)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
