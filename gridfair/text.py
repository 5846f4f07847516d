"""Text that came from outside (an ad, a dump, a history), made safe to show and bounded.

A pool's users write the strings gridfair shows: user and group names, slot names, job
attributes, the reasons that quote them. Shown raw, an escape sequence in one sets the
administrator's terminal title, clears the screen or hides text; a bidi override makes a name
read as another; a newline forges a line of a table or a log. `shown` escapes every such
character (the C0 and C1 controls, DEL, the bidi controls, the line and paragraph separators,
and lone surrogates, which no writer could encode), so what reaches a terminal, a CSV file or
a log is the string as data. `named_few` bounds a list of names made into text (a reason
that names every group of a 20,000-group flood would be as long as the flood).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

#: What `shown` escapes: C0 controls, DEL and C1 controls; ALM, LRM and RLM; the line and
#: paragraph separators and the bidi embeddings, overrides and isolates; lone surrogates.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                    "\ud800-\udfff]")
SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: Names a bounded list shows, and the characters it shows of each.
SHOWN_NAMES = 5
NAME_WIDTH = 64


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def shown(text: str) -> str:
    """`text` with every control, bidi and unencodable character written as an escape
    (`\\n`, `\\x1b`, `\\u202e`); text without them is returned as it is."""
    return UNSAFE.sub(_escape, text) if UNSAFE.search(text) else text


def shown_all(data: Any) -> Any:
    """`data` with `shown` applied to every string in it: in mappings (keys too), lists,
    tuples and dataclass instances, recursively; anything else as it is. For a report whose
    text is made of many of its fields at once."""
    if isinstance(data, str):
        return shown(data)
    if isinstance(data, Mapping):
        return {shown_all(key): shown_all(value) for key, value in data.items()}
    if isinstance(data, list):
        return [shown_all(item) for item in data]
    if isinstance(data, tuple):
        return tuple(shown_all(item) for item in data)
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.replace(data, **{field.name: shown_all(getattr(data, field.name))
                                            for field in dataclasses.fields(data)
                                            if field.init})
    return data


def named_few(names: Sequence[str]) -> str:
    """The first `SHOWN_NAMES` names, each escaped and cut at `NAME_WIDTH` characters, then
    how many more there are."""
    first = [shown(name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH] + "...")
             for name in names[:SHOWN_NAMES]]
    more = f" and {len(names) - len(first)} more" if len(names) > len(first) else ""
    return ", ".join(first) + more
