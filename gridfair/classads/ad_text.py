"""What the readers of every ad syntax share (`reader`, `old_syntax`, `new_syntax`,
`json_ads`): the pattern of an attribute's assignment, an ad text's digest, a batch of framed
ads for `reader.reread`, and the checks and warnings on each parsed ad."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from itertools import repeat
from operator import and_, lshift, or_
from typing import Any, NamedTuple

import classad2

from gridfair.ad_views import AdWarning
from gridfair.classads.framing import Framed, undecoded
from gridfair.errors import InputError

# An attribute's assignment at a line's start or after `[` or `;` (old and new syntax), its
# name (plain or quoted) the group; not a comparison (`==`, `=?=`, `=!=`).
ASSIGNMENT = re.compile(
    r"(?:^|[\[;])[ \t]*([A-Za-z_][\w.]*|'(?:[^'\\]|\\.)*')[ \t]*=(?![=?!])", re.MULTILINE)


#: Whether the process's string hash has a key no user knows: Python draws one at random
#: at start unless PYTHONHASHSEED fixes it (then anyone who knows the seed could write two
#: ads of one hash, and the memo keys by a digest instead).
KEYED_HASH = os.environ.get("PYTHONHASHSEED", "random") == "random"


def ad_digest(text: str) -> int | bytes:
    """What `reread`'s memo knows an ad's text by, an int where its text is hundreds of bytes:
    the string's own hash (SipHash, keyed at random per process: no user can write a text
    that collides with another's) with the text's length beside it (`ad_digests`); a
    blake2b digest when the key is fixed (`KEYED_HASH`)."""
    return ad_digests([text])[0]


def _blake2b(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def ad_digests(texts: list[str]) -> list[int] | list[bytes]:
    """`ad_digest` of each text, made over all of them at once in C (a steady re-read of a
    million-job dump keys every ad: the string hash costs a sixth of the digest it
    replaces). Two texts of one key would give the second the first's view: a 64-bit
    keyed hash and the length make that about one in 10^19 a pair (measured alternatives
    in docs/results/scale.md)."""
    if not KEYED_HASH:
        return list(map(_blake2b, texts))
    return list(map(or_, map(lshift, map(len, texts), repeat(64)),
                    map(and_, map(hash, texts), repeat(_LOW_64))))


_LOW_64 = (1 << 64) - 1


class Batch(NamedTuple):
    """Ads framed for `reread`: their texts and the texts' digests (none for JSON), what the
    memo holds for each (None if nothing), the positions the memo has nothing for, and the
    `Framed` ad at such a position (None for a blank block), asked in increasing order."""

    texts: list[str]
    keys: list[int | bytes]
    values: list[Any]
    missing: list[int]
    chunk_at: Callable[[int], Framed | None]


def _ad_name(ad: classad2.ClassAd) -> str | None:
    """A slot's Name or a job's id, for a warning about the ad (None if it has neither)."""
    name = ad.get("Name")
    if isinstance(name, str):
        return name
    cluster, proc = ad.get("ClusterId"), ad.get("ProcId")
    return f"{cluster}.{proc}" if type(cluster) is int and type(proc) is int else None


def repeat_warning(source: str, chunk: Framed, ad: classad2.ClassAd,
                    repeats: list[tuple[str, int | None, int | None]]) -> AdWarning:
    """The warning about an ad that sets attributes more than once: `repeats` holds (name,
    first line, last line) of each, lines None where the syntax has none (JSON)."""
    name, first, last = repeats[0]
    where = (f"line {last}, " if last is not None else "") + f"attribute {name}: "
    told = where + (f"also set on line {first}" if first is not None else "set twice")
    if len(repeats) > 1:
        told += (f", and {len(repeats) - 1} more attribute(s) set twice (two ads with no "
                 "blank line between them?)")
    told += "; the last value is used, as HTCondor's own parser does"
    return AdWarning(source, chunk.index, _ad_name(ad), told)


def check_decodable(ad: classad2.ClassAd, chunk: Framed, source: str) -> None:
    """An InputError naming the attribute of `ad` that holds a string that is not UTF-8: a
    string escape (`"\\377"`) can make any byte, and the bindings then fail on every read
    of it. Only ads with a backslash in their text are looked at."""
    try:
        ad.printOld()  # decodes every string of the ad, literal or in an expression
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8 text: a string escape makes invalid bytes "
                         f"({error.reason})", source=source, line=chunk.line,
                         ad=f"#{chunk.index}", attribute=_undecodable(ad)) from None


def check_utf8(chunk: Framed, source: str) -> None:
    """An InputError naming the line and attribute of an ad's text where its file was not
    UTF-8 (`undecoded`), if it was anywhere: such text must not reach the bindings (a lone
    surrogate kills the process)."""
    text = chunk.payload
    found = undecoded(text)
    if found is None:
        return
    at, what = found
    assignments = list(ASSIGNMENT.finditer(text, 0, at))
    name = assignments[-1].group(1) if assignments else None
    raise InputError(f"not UTF-8 text ({what})", source=source,
                     line=chunk.line + text.count("\n", 0, at) if chunk.line else None,
                     ad=f"#{chunk.index}",
                     attribute=name if name is None or name.isascii() else ascii(name))


def _undecodable(ad: classad2.ClassAd) -> str | None:
    """The first attribute whose value (evaluated) is not UTF-8, if one is."""
    for name in ad:
        try:
            ad.eval(name)
        except (UnicodeDecodeError, SystemError):  # SystemError: in a list
            return name
        except (ValueError, TypeError, classad2.ClassAdException):
            continue
    return None


def repeated_attributes(assignments: Any, text: str,
             first_line: int) -> list[tuple[str, int | None, int | None]]:
    """(name, line set first, line set last) of each attribute the `ASSIGNMENT` matches of
    `text` (which starts on `first_line`) set more than once, in the order of their last."""
    seen: dict[str, int] = {}
    repeated: dict[str, tuple[str, int | None, int | None]] = {}
    for match in assignments:
        name = match.group(1)
        key = name.strip("'").lower()
        line = first_line + text.count("\n", 0, match.start(1))
        if key in seen:
            repeated.pop(key, None)
            repeated[key] = (name, seen[key], line)
        else:
            seen[key] = line
    return list(repeated.values())


# ------------------------------------------------------------------------ help
def excerpt(text: str, limit: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
