"""Read ClassAds from files: `-long` (old syntax), new syntax (`[ ... ]`) and `-json`.

Every ad is parsed by `classad2`; this module only frames the text into one string per ad, so
that each ad is parsed on its own. That framing is what makes reading linear (`parseAds` over
a whole file re-reads the remaining text for every ad, which is quadratic) and what lets an
error name the ad's index and first line:

- old syntax (`condor_status -long`): ads are separated by blank lines, one `Attr = value` a
  line. classad2's old parser drops a line it cannot parse without a word, so each ad's
  attribute count is checked against its lines, and a line it dropped is reported;
  an attribute set twice in one ad (two ads with no blank line between them read as one) is a
  warning naming both lines, and the last value is used, as HTCondor's own parser does
  (`condor_status -ads FILE` of HTCondor 25 shows the last);
- new syntax (`condor_status -long:new`): one top-level `[ ... ]` per ad; the framing skips
  brackets inside string literals, quoted attribute names and comments;
- JSON (`condor_status -json`): a list of objects, each decoded with `json` on its own;
  values are set on a ClassAd as they are, except HTCondor's `"\\/Expr(...)\\/"` strings,
  which are expressions.

A file is read in one pass, in pieces (`open_ads`, `gridfair.classads.framing`): what is held
is the ad being framed (an ad past `bounds.MAX_AD` keeps only its size until it ends, then is
skipped naming the limit) besides what the read returns. Every ad is checked against
`gridfair.classads.bounds` before or as it is parsed: its size, its lines', its JSON nesting,
and its strings (none the bindings cannot hold); bytes that are not UTF-8 skip their ad, named
with their line and attribute.

This module reads and re-reads; each syntax is framed and parsed in its own module
(`old_syntax`, `new_syntax`, `json_ads`), and what they share is in `ad_text`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import classad2

from gridfair.ad_views import AdWarning, SkippedAd
from gridfair.classads.ad_text import ASSIGNMENT, Batch, ad_digest
from gridfair.classads.bounds import (
    MAX_AD,
    open_regular,
    size_text,
)
from gridfair.classads.framing import (
    CHUNK,
    Framed,
    blank_line_segments,
    text_pieces,
    too_big,
)
from gridfair.classads.json_ads import json_framed, parse_json
from gridfair.classads.new_syntax import new_framed, parse_new
from gridfair.classads.old_syntax import old_blocks, old_chunk, old_syntax_ads, parse_old
from gridfair.errors import InputError


class AdFormat(StrEnum):
    OLD = "old"
    NEW = "new"
    JSON = "json"


FORMAT_NAMES = tuple(member.value for member in AdFormat)


class SourcedAd(NamedTuple):
    """A parsed ad and where it came from: its file, 1-based index in it and first line, and
    the text it was parsed from (to name the line of an attribute in an error). A tuple: a
    steady re-read makes one per ad of a dump, and a frozen dataclass costs twice as much to
    make."""

    ad: classad2.ClassAd
    source: str
    index: int
    line: int | None  # None for JSON, whose ads json does not place
    text: str | None = None  # None for JSON and for ads read from a live pool


def attribute_line(sourced: SourcedAd, attribute: str) -> int | None:
    """The line of the file where the ad sets `attribute` (the last time, as that value is
    the one used; names are case-insensitive), or None if its text does not show one."""
    if sourced.text is None or sourced.line is None:
        return None
    found = None
    for match in ASSIGNMENT.finditer(sourced.text):
        name = match.group(1)
        if name.strip("'").lower() == attribute.lower():
            found = match
    if found is None:
        return None
    return sourced.line + sourced.text.count("\n", 0, found.start(1))


def detect_format(text: str) -> AdFormat:
    """JSON if the text is a list of objects, new syntax if it opens with `[` or a comment,
    old syntax otherwise (as classad2's own auto-detection decides between old and new)."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        after = stripped[1:].lstrip()
        return AdFormat.JSON if after[:1] in ("{", "]") else AdFormat.NEW
    if stripped.startswith("/"):
        return AdFormat.NEW
    return AdFormat.OLD


def parse_format(name: str | AdFormat | None) -> AdFormat | None:
    """`None` (auto-detect) or the format named `name`; an unknown name is an InputError."""
    if name is None or isinstance(name, AdFormat):
        return name
    try:
        return AdFormat(name.lower())
    except ValueError:
        known = ", ".join(FORMAT_NAMES)
        raise InputError(f"unknown ad format {name!r} (known: {known})") from None


class AdFile:
    """A file of ads opened to be read once, in pieces of text (`text_pieces`, strict:
    universal newlines, bytes that are not UTF-8 kept for their ad to be refused), by
    `parse_ads` or `reread`. `head` is its first pieces, up to what tells its format
    (`detect_format`). A missing, unreadable or non-regular file (a FIFO, a device) or one with
    no ad in it (blank) is an InputError here, when opened; a NUL byte (a binary file) is one
    when it is reached."""

    def __init__(self, path: str | Path) -> None:
        self.source = str(path)
        self._pieces = self._read(path)
        head: list[str] = []
        try:
            for piece in self._pieces:
                head.append(piece)
                if not piece.isspace() and _format_shown("".join(head)):
                    break
                if len(head) * CHUNK > MAX_AD and "".join(head).isspace():
                    raise InputError(f"blank for more than {size_text(MAX_AD)}: no ads in it",
                                     source=self.source)
        except InputError:
            self._pieces.close()
            raise
        self.head = "".join(head)
        if self.head.isspace() or not self.head:  # not strip(): it would copy the text
            raise InputError("empty: no ads in it", source=self.source)

    def _read(self, path: str | Path) -> Iterator[str]:
        with open_regular(path) as stream:
            yield from text_pieces(stream, self.source, strict=True)

    def __iter__(self) -> Iterator[str]:
        yield self.head
        yield from self._pieces


def _format_shown(head: str) -> bool:
    """Whether `head` shows the format of the text it starts (`detect_format`): a character
    that is not blank, and after a `[` another."""
    stripped = head.lstrip()
    return stripped[:1] != "[" or not stripped[1:].isspace() and len(stripped) > 1


def open_ads(path: str | Path) -> AdFile:
    """The file of ads at `path`, opened to be read in one pass (`AdFile`)."""
    return AdFile(path)


def read_ads(
    path: str | Path,
    ad_format: str | AdFormat | None = None,
    *,
    lenient: bool = False,
    warnings: list[AdWarning] | None = None,
) -> tuple[list[SourcedAd], list[SkippedAd]]:
    """The ads in the file at `path`, in file order, auto-detecting the format unless given.

    A malformed ad is an InputError naming the file, line and ad index; with `lenient`, it is
    returned among the skipped ads instead and the others are read. Errors that leave no ad
    boundaries to go on (no file, an empty file, text that is not UTF-8, new-syntax text
    outside any ad or a `[` never closed) are raised either way. An ad that sets an attribute
    twice is used (the last value wins) and warned about in `warnings`, when given. The file
    is read in one pass, holding no more than the ad being framed besides the ads read.
    """
    return parse_ads(open_ads(path), str(path), ad_format, lenient=lenient,
                     warnings=warnings)


def parse_ads(
    text: str | AdFile,
    source: str,
    ad_format: str | AdFormat | None = None,
    *,
    lenient: bool = False,
    warnings: list[AdWarning] | None = None,
) -> tuple[list[SourcedAd], list[SkippedAd]]:
    """As `read_ads`, for text already read or a file opened (`open_ads`); `source` names it
    in errors."""
    chosen, pieces = _format_and_pieces(text, parse_format(ad_format))
    parse = partial(_parse, chosen)
    ads: list[SourcedAd] = []
    skipped: list[SkippedAd] = []
    for chunk in _FRAMERS[chosen](pieces, source):
        try:
            ads.append(SourcedAd(parse(chunk, source, warnings), source, chunk.index,
                                 chunk.line, _text_of(chunk)))
        except InputError as error:
            if not lenient:
                raise
            skipped.append(SkippedAd(source, chunk.index, None, skip_reason(error)))
    if not ads and not skipped:
        raise InputError(f"no ads found ({chosen.value} syntax)", source=source)
    return ads, skipped


def _format_and_pieces(text: str | AdFile, ad_format: AdFormat | None,
                       ) -> tuple[AdFormat, Iterable[str]]:
    """The format of the text (`ad_format`, or detected from its start) and its pieces."""
    if isinstance(text, str):
        return ad_format or detect_format(text), (text,)
    return ad_format or detect_format(text.head), text


def parse_one(payload: Any, syntax: AdFormat, source: str, index: int,
              line: int | None = None) -> SourcedAd:
    """One ad framed by the caller: old-syntax text whose first line is `line` of `source`,
    new-syntax text, or a JSON object (a dict) as `json` loaded it. An InputError names the
    file, line and ad index, as `parse_ads` does."""
    if syntax is AdFormat.OLD:
        chunk = old_chunk(payload, index, line or 1)
        if chunk is None:
            raise InputError("empty ad", source=source, line=line, ad=f"#{index}")
    else:
        chunk = Framed(payload, index, line)
    return SourcedAd(_PARSERS[syntax](chunk, source, None), source, index, chunk.line,
                     _text_of(chunk))


class AdText:
    """An ad kept as the text it was read from, parsed again when it is read (`readable`).
    A parsed `classad2` job ad weighs about 2.4 KB against ~300 bytes of text; a daemon cycle
    keeps every job but matches few (and jobs alike for matching share one: the `files`
    backend's match groups, which refer to it weakly)."""

    __slots__ = ("text", "syntax", "__weakref__")

    def __init__(self, text: str, syntax: AdFormat) -> None:
        self.text = text
        self.syntax = syntax

    def parsed(self) -> classad2.ClassAd:
        chunk = (old_chunk(self.text, 1, 1) if self.syntax is AdFormat.OLD
                 else Framed(self.text, 1, 1))
        assert chunk is not None  # it was an ad when it was read
        return _PARSERS[self.syntax](chunk, "an ad read before", None)


def readable(ad: Any) -> Any:
    """The ad itself, or the parsed ad of an `AdText`."""
    return ad.parsed() if isinstance(ad, AdText) else ad


#: How big the memo `reread` hands on may grow, against the ads of the read, before it is
#: remade from them alone: ads gone from the dump (a job that left, an ad that changed) stay in
#: it until then. At 1 % of the ads changing per read, it is remade every 25 reads.
STALE_MEMO = 1.25


class Reread(NamedTuple):
    """What `reread` made of a file: what `build` made of each usable ad, in file order, the
    ads that did not parse, the ads `build` refused, the memo for the next read, and the
    warnings about ads used (an attribute set twice)."""

    values: list[Any]
    unparsed: list[SkippedAd]
    refused: list[SkippedAd]
    #: digest of an ad's text (`ad_digest`) -> what was built from it, for the next read: this
    #: read's ads, and maybe some of the last reads' (`STALE_MEMO`). An ad warned about is
    #: left out, so that every read that has it warns again.
    memo: dict[int | bytes, Any]
    warned: list[AdWarning]

    @classmethod
    def nothing(cls) -> Reread:
        return cls([], [], [], {}, [])


def reread(text: str | AdFile, source: str, memo: Mapping[int | bytes, Any],
           build: Callable[..., Any],
           refuse: Callable[[SourcedAd, InputError], SkippedAd],
           keep_text: bool = False, ad_format: AdFormat | None = None) -> Reread:
    """`build` of every ad of `text` (text, or a file opened by `open_ads`, read in one pass;
    a view, say), reusing what was built from an ad whose text the last read saw (`memo`: the
    last read's `Reread.memo`, digest of the ad's text -> what was built; a dict is handed on,
    updated, as this read's). The memo holds no text: an unchanged ad is known by its digest.

    A steady pool's dump differs from the last in a few ads: the unchanged ones are looked up
    a segment of the text at a time (one `map` over its ads' texts), and only the others are
    parsed and built. Old syntax (`condor_q -long`) is framed by one split of each segment,
    and only ads built anew have their first line counted. An ad that does not parse is
    skipped, as is one `build` refuses (an InputError), made into a skipped ad by `refuse`;
    lenient, as `parse_ads(lenient=True)` is. With `keep_text`, `build` is given the ad's text
    too, as an `AdText` (for the view to keep instead of the parsed ad, which can then go).
    The format is detected unless given."""
    chosen, pieces = _format_and_pieces(text, ad_format)
    parse = partial(_parse, chosen)
    # Old and new syntax are looked up by their text's digest; JSON chunks are loaded values:
    # built every time, with no keys. No text is kept past its segment but in what `build`
    # keeps of it.
    keyed = 0  # ads looked up by their text's digest
    new_keys: list[tuple[int | bytes, int]] = []  # (digest, position) of each ad built anew
    missing = 0  # ads the memo did not have
    values: list[Any] = []
    result = Reread(values, [], [], {}, [])
    warned = result.warned
    warned_keys = []
    built = 0
    for batch in _BATCHES[chosen](pieces, source, memo):
        base = len(values)
        keyed += len(batch.keys)
        values.extend(batch.values)
        missing += len(batch.missing)
        for at in batch.missing:
            position = base + at
            key = batch.keys[at] if batch.keys else None
            text_kept = batch.texts[at] if keep_text and batch.keys else None
            if key is not None:
                new_keys.append((key, position))
            chunk = batch.chunk_at(at)
            if chunk is None:
                continue
            warnings = len(warned)
            try:
                sourced = SourcedAd(parse(chunk, source, warned), source, chunk.index,
                                    chunk.line, _text_of(chunk))
            except InputError as error:
                result.unparsed.append(SkippedAd(source, chunk.index, None,
                                                 skip_reason(error)))
                continue
            if len(warned) > warnings and key is not None:
                warned_keys.append(key)
            try:
                values[position] = (build(sourced, AdText(text_kept, chosen))
                                    if text_kept is not None else build(sourced))
            except InputError as error:
                result.refused.append(refuse(sourced, error))
                continue
            built += 1
    # The next read's memo: the last one with this read's new ads added, as long as the ads
    # it holds that this read no longer has stay few (`STALE_MEMO`); then this read's ads alone:
    # those the memo gave (found by the value they gave) and those built anew.
    # Remade every read, it would cost a pass over a million ads to drop a few thousand.
    built_anew = ((key, values[position]) for key, position in new_keys)
    if keyed and isinstance(memo, dict) and len(memo) + len(new_keys) <= STALE_MEMO * keyed:
        result = result._replace(memo=memo)
        memo.update(built_anew)
    elif keyed:
        given = set(map(id, values))
        result.memo.update((key, value) for key, value in memo.items()
                           if value is not None and id(value) in given)
        result.memo.update(built_anew)
    for key in warned_keys:
        result.memo.pop(key, None)
    if built < missing:  # blank blocks and skipped ads leave no value
        values[:] = [value for value in values if value is not None]
    if not values and not result.unparsed and not result.refused:
        raise InputError(f"no ads found ({chosen.value} syntax)", source=source)
    return result


def _framed_batches(pieces: Iterable[str], source: str, memo: Mapping[int | bytes, Any],
                    syntax: AdFormat) -> Iterator[Batch]:
    """A batch of each ad of new syntax or JSON, as `_FRAMERS` frames it; an ad that cannot
    be read (its problem) is given to be parsed, which raises it."""
    keyed = syntax is AdFormat.NEW
    for chunk in _FRAMERS[syntax](pieces, source):
        # A key for every ad of new syntax, None for one that cannot be read (memo: nothing).
        texts = [chunk.payload if chunk.problem is None else ""] if keyed else []
        keys = [ad_digest(texts[0]) if chunk.problem is None else None] if keyed else []
        value = memo.get(keys[0]) if keys and keys[0] is not None else None
        yield Batch(texts, keys, [value], [] if value is not None else [0],
                     lambda _, chunk=chunk: chunk)


def _old_batches(pieces: Iterable[str], source: str,
                 memo: Mapping[int | bytes, Any]) -> Iterator[Batch]:
    """The old-syntax ads of each segment of the text (`blank_line_segments`) looked up in
    `memo` (`old_blocks`); an ad too big to keep, as a batch of its problem."""
    index = 0
    for segment in blank_line_segments(pieces):
        if segment.text is None:
            index += 1
            problem = Framed(None, index, segment.line, too_big(segment.size))
            yield Batch([""], [None], [None], [0], lambda _, chunk=problem: chunk)
            continue
        batch = old_blocks(segment.text, memo, index, segment.line)
        index += len(batch.keys)
        yield batch


def _parse(syntax: AdFormat, chunk: Framed, source: str,
           warnings: list[AdWarning] | None) -> classad2.ClassAd:
    """The ad of a framed chunk; an InputError for one framed with its problem."""
    if chunk.problem is not None:
        raise InputError(chunk.problem, source=source, line=chunk.line, ad=f"#{chunk.index}")
    return _PARSERS[syntax](chunk, source, warnings)


def _text_of(chunk: Framed) -> str | None:
    """The ad's text (None for JSON, whose chunks are loaded values)."""
    return chunk.payload if isinstance(chunk.payload, str) else None


def skip_reason(error: InputError) -> str:
    """An error as a skipped ad's reason: the message, with its attribute and line if known
    (the file and ad index are the skipped ad's own fields)."""
    where = [f"line {error.line}"] if error.line is not None else []
    if error.attribute:
        where.append(f"attribute {error.attribute}")
    return (", ".join(where) + ": " if where else "") + error.message


_FRAMERS: dict[AdFormat, Callable[[Iterable[str], str], Iterator[Framed]]] = {
    AdFormat.OLD: old_syntax_ads, AdFormat.NEW: new_framed, AdFormat.JSON: json_framed}
_PARSERS = {AdFormat.OLD: parse_old, AdFormat.NEW: parse_new, AdFormat.JSON: parse_json}
_BATCHES: dict[AdFormat, Callable[[Iterable[str], str, Mapping[str, Any]], Iterator[Batch]]] = {
    AdFormat.OLD: _old_batches, AdFormat.NEW: partial(_framed_batches, syntax=AdFormat.NEW),
    AdFormat.JSON: partial(_framed_batches, syntax=AdFormat.JSON)}


