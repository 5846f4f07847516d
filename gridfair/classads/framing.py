"""A file of ads read in one pass, piece by piece, holding no more than the ad being framed:
the text decoded as it is read, the blank-line-separated ads of old syntax cut into segments of
whole ads, and JSON's top-level objects decoded one at a time. Shared by the ad reader
(`gridfair.classads.reader`: `shares --jobs`, the daemon's dumps) and the history reader
(`gridfair.classads.history`).

No input makes these hold more than the limits of `gridfair.classads.bounds` (an ad past
`MAX_AD` keeps only its size and lines until it ends) or read a byte twice, except a JSON
object not yet whole, decoded again once the text after its start has doubled.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
from collections.abc import Iterable, Iterator
from typing import IO, Any, NamedTuple

from gridfair.classads.bounds import MAX_AD, MAX_JSON_DEPTH, size_text
from gridfair.errors import InputError

#: Bytes read at a time.
CHUNK = 1 << 20


class Framed(NamedTuple):
    """One ad as framed: its text or loaded JSON object (None when it cannot be read), index,
    first line, why it cannot be read (None if it can), and whether that is because the text
    is corrupt there (not an ad past a limit): what is framed around it is a guess."""

    payload: Any
    index: int
    line: int | None
    problem: str | None = None
    corrupt: bool = False


def too_big(size: int) -> str:
    """Why an ad of `size` characters is not read."""
    return f"an ad of {size} characters, longer than the limit of {size_text(MAX_AD)} an ad"


def text_pieces(stream: IO[bytes], source: str, first: bytes = b"", *,
                strict: bool) -> Iterator[str]:
    """The stream's text, piece by piece (about `CHUNK` bytes each), starting with the bytes
    `first` already read, its newlines made "\\n" (as text mode's universal newlines do).
    `strict` (a file of ads): a NUL is an InputError naming where (a binary file is seldom
    anything else), and bytes that are not UTF-8 are kept as surrogate escapes (U+DC80 to
    U+DCFF), for the ad that holds them to be refused naming them (`undecoded`); else they
    become U+FFFD, which makes the ad that holds them unusable (a history goes on past it)."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape" if strict else "replace")
    data = first
    emitted = 0  # characters yielded
    held = ""  # a "\r" that ended a piece: the next may open with its "\n"
    while True:
        try:
            data = data or stream.read(CHUNK)
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            raise InputError(f"cannot read: {getattr(error, 'strerror', None) or error}",
                             source=source) from None
        text = held + decoder.decode(data, final=not data)
        held = ""
        if data and text.endswith("\r"):
            text, held = text[:-1], "\r"
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if strict:
            nul = text.find("\0")
            if nul >= 0:
                raise InputError(f"not text (a NUL byte at character {emitted + nul})",
                                 source=source)
        emitted += len(text)
        if text:
            yield text
        if not data:
            return
        data = b""


#: A character no UTF-8 text decodes to: a byte that was not UTF-8 (U+DC80 to U+DCFF, as
#: `text_pieces` keeps it) or another lone surrogate.
_SURROGATE = re.compile("[\ud800-\udfff]")


def undecoded(text: str) -> tuple[int, str] | None:
    """Where `text` holds a character that was not UTF-8 in its file, and what it was (a
    byte, or a lone surrogate); None if it holds none."""
    found = _SURROGATE.search(text)
    if found is None:
        return None
    code = ord(found.group())
    what = (f"byte 0x{code - 0xDC00:02X}" if 0xDC80 <= code <= 0xDCFF
            else f"a lone surrogate U+{code:04X}")
    return found.start(), what


# ------------------------------------------------------------------- old syntax
class Segment(NamedTuple):
    """Whole blank-line-separated ads of the text, from its `line`; or (`text` None) the
    `size` characters and `lines` of one ad past `MAX_AD`, not kept."""

    text: str | None
    line: int
    size: int = 0
    lines: int = 0


#: The end of a run of blank lines that no blank line can continue (what follows it on its
#: line is not blank): a place where the text can be cut without cutting a run.
_CUT = re.compile(r"\n[ \t\r]*\n(?=[ \t\r]*[^ \t\r\n])")
#: How far from a piece's end a cut is looked for first.
_CUT_WINDOW = 64 << 10


def blank_line_segments(pieces: Iterable[str]) -> Iterator[Segment]:
    """The text cut into segments of whole ads, each cut at the end of a run of blank lines
    (`_CUT`): blank-line runs framed in each segment on its own are the whole text's. An ad
    (the text since the last cut) past `MAX_AD` and a piece is dropped as it is read."""
    pending: list[str] = []  # the text since the last cut
    size = 0
    line = 1  # the line `pending` starts on
    dropped = dropped_lines = 0  # characters and lines of an ad too big, not kept
    for piece in pieces:
        if dropped:
            first = _CUT.search(piece)
            if first is None:
                dropped += len(piece)
                dropped_lines += piece.count("\n")
                continue
            dropped += first.end()
            dropped_lines += piece.count("\n", 0, first.end())
            yield Segment(None, line, dropped, dropped_lines)
            line += dropped_lines
            dropped = 0
            piece = piece[first.end():]
        cut = _last_cut(piece)
        if cut:
            pending.append(piece[:cut])
            text = "".join(pending)
            yield Segment(text, line)
            line += text.count("\n")
            pending, size = [piece[cut:]], len(piece) - cut
            continue
        pending.append(piece)
        size += len(piece)
        if size > MAX_AD + CHUNK:
            dropped = size
            dropped_lines = sum(part.count("\n") for part in pending)
            pending, size = [], 0
    if dropped:
        yield Segment(None, line, dropped, dropped_lines)
    elif pending:
        yield Segment("".join(pending), line)


def _last_cut(piece: str) -> int:
    """Where the last cut of `piece` is (looked for near its end first), or 0 if none."""
    start = max(0, len(piece) - _CUT_WINDOW)
    while True:
        found = 0
        for match in _CUT.finditer(piece, start):
            found = match.end()
        if found or not start:
            return found
        start = 0


# ------------------------------------------------------------------------ JSON
_JSON_GAP = re.compile(r"[\s,\[\]]*")
_NEXT_OBJECT = re.compile(r"^\{", re.M)
#: A JSON object key (or a string ending in `":`: never fewer than the keys).
_JSON_KEY = re.compile(r'"\s*:')


class KeyedObject(dict):
    """A JSON object that knows the keys its text repeated (the last value is kept)."""

    repeated: list[str]

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> KeyedObject:
        loaded = cls(pairs)
        loaded.repeated = []
        seen: set[str] = set()
        for key, _ in pairs:
            if key.lower() in seen:
                loaded.repeated.append(key)
            seen.add(key.lower())
        return loaded


def json_objects(pieces: Iterable[str], *, keyed: bool = False,
                 closed: bool = False) -> Iterator[Framed]:
    """Top-level objects of a JSON list or of JSON lines. An object that does not decode is
    framed with its problem, and reading goes on at the next line that opens an object. An
    object not yet whole is decoded again once the text after its start has doubled (so each
    object is decoded a bounded number of times), up to `MAX_AD`: past that it is corrupt.
    `keyed`: an object whose text holds more keys than it has is decoded again as
    `KeyedObject`s, to tell which it repeated; `closed`: a list not closed at the end of the
    text (cut short) is framed as a problem after its last object."""
    decoder = json.JSONDecoder()
    pieces = iter(pieces)
    text, position, line, index, done = "", 0, 1, 0, False
    lists = 0  # `[` opened and not closed between objects
    while True:
        gap = _JSON_GAP.match(text, position)
        line += text.count("\n", position, gap.end())
        if closed:
            lists += text.count("[", position, gap.end()) - text.count("]", position, gap.end())
        position = gap.end()
        if position == len(text):
            if done:
                if lists > 0:
                    yield Framed(None, index + 1, line, "truncated JSON: the list of ads is "
                                                        "never closed", corrupt=True)
                return
            text, position = text[position:] + next(pieces, ""), 0
            done = done or not text
            continue
        try:
            value, end = decoder.raw_decode(text, position)
        except (json.JSONDecodeError, RecursionError) as error:
            unfinished = isinstance(error, json.JSONDecodeError)
            if unfinished and not done and len(text) - position <= MAX_AD:
                more = [text[position:]]
                wanted = len(more[0])  # read as much again
                while wanted > 0 and not done:
                    piece = next(pieces, "")
                    done = not piece
                    more.append(piece)
                    wanted -= len(piece)
                text, position = "".join(more), 0
                continue
            index += 1
            follow = _NEXT_OBJECT.search(text, position + 1)
            end = follow.start() if follow else len(text)
            corrupt = False
            if not unfinished:
                problem = f"JSON ad nested deeper than {MAX_JSON_DEPTH} levels"
            elif len(text) - position > MAX_AD:
                problem = f"JSON ad longer than the limit of {size_text(MAX_AD)} an ad"
            else:
                assert isinstance(error, json.JSONDecodeError)
                cut = "truncated" if follow is None else "corrupted"
                at = line + text.count("\n", position, error.pos)
                problem, corrupt = f"{cut} JSON ad: {error.msg} (line {at})", True
            yield Framed(None, index, line, problem, corrupt)
            line += text.count("\n", position, end)
            position = end
            continue
        index += 1
        if isinstance(value, dict):
            if keyed and len(_JSON_KEY.findall(text, position, end)) > len(value):
                # More keys in the text than in the object: some object (or a nested one)
                # repeats a key, which `json` drops silently. Decoded again, keeping count.
                value = json.loads(text[position:end], object_pairs_hook=KeyedObject.of)
            yield Framed(value, index, line)
        else:
            yield Framed(None, index, line, f"not a JSON object but {type(value).__name__}")
        line += text.count("\n", position, end)
        position = end
