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
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import StrEnum
from functools import partial
from itertools import accumulate
from pathlib import Path
from typing import Any, NamedTuple

import classad2

from gridfair.classads.bounds import (
    MAX_AD,
    SHORT_VALUE,
    check_ad_text,
    check_json_ad,
    open_regular,
    operators_problem,
    size_text,
)
from gridfair.classads.framing import (
    CHUNK,
    Framed,
    blank_line_segments,
    json_objects,
    text_pieces,
    too_big,
    undecoded,
)
from gridfair.errors import InputError
from gridfair.model import AdWarning, SkippedAd


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
    for match in _ASSIGNMENT.finditer(sourced.text):
        name = match.group(1)
        if name.strip("'").lower() == attribute.lower():
            found = match
    if found is None:
        return None
    return sourced.line + sourced.text.count("\n", 0, found.start(1))


# Tokens that matter for framing new-syntax ads: strings and quoted names (which may hold
# brackets), comments, and the brackets themselves.
_NEW_SYNTAX_TOKENS = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|/\*.*?\*/|//[^\n]*|\[|\]', re.DOTALL
)
# An attribute's assignment at a line's start or after `[` or `;` (old and new syntax), its
# name (plain or quoted) the group; not a comparison (`==`, `=?=`, `=!=`).
_ASSIGNMENT = re.compile(
    r"(?:^|[\[;])[ \t]*([A-Za-z_][\w.]*|'(?:[^'\\]|\\.)*')[ \t]*=(?![=?!])", re.MULTILINE)
# One or more blank lines: what separates old-syntax ads.
_BLANK_LINE_RUNS = re.compile(r"(\n(?:[ \t\r]*\n)+)")
_JSON_EXPRESSION = re.compile(r"^/Expr\((.*)\)/$", re.DOTALL)


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
        chunk = _old_chunk(payload, index, line or 1)
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
        chunk = (_old_chunk(self.text, 1, 1) if self.syntax is AdFormat.OLD
                 else Framed(self.text, 1, 1))
        assert chunk is not None  # it was an ad when it was read
        return _PARSERS[self.syntax](chunk, "an ad read before", None)


def readable(ad: Any) -> Any:
    """The ad itself, or the parsed ad of an `AdText`."""
    return ad.parsed() if isinstance(ad, AdText) else ad


def ad_digest(text: str) -> bytes:
    """What `reread`'s memo knows an ad's text by: a digest (collision-resistant, whatever
    users write), 16 bytes where a job ad's text is hundreds."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


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
    memo: dict[bytes, Any]
    warned: list[AdWarning]

    @classmethod
    def nothing(cls) -> Reread:
        return cls([], [], [], {}, [])


def reread(text: str | AdFile, source: str, memo: Mapping[bytes, Any],
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
    new_keys: list[tuple[bytes, int]] = []  # (digest, position) of each ad built anew
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


class _Batch(NamedTuple):
    """Ads framed for `reread`: their texts and the texts' digests (none for JSON), what the
    memo holds for each (None if nothing), the positions the memo has nothing for, and the
    `Framed` ad at such a position (None for a blank block), asked in increasing order."""

    texts: list[str]
    keys: list[bytes]
    values: list[Any]
    missing: list[int]
    chunk_at: Callable[[int], Framed | None]


def _framed_batches(pieces: Iterable[str], source: str, memo: Mapping[bytes, Any],
                    syntax: AdFormat) -> Iterator[_Batch]:
    """A batch of each ad of new syntax or JSON, as `_FRAMERS` frames it; an ad that cannot
    be read (its problem) is given to be parsed, which raises it."""
    keyed = syntax is AdFormat.NEW
    for chunk in _FRAMERS[syntax](pieces, source):
        # A key for every ad of new syntax, None for one that cannot be read (memo: nothing).
        texts = [chunk.payload if chunk.problem is None else ""] if keyed else []
        keys = [ad_digest(texts[0]) if chunk.problem is None else None] if keyed else []
        value = memo.get(keys[0]) if keys and keys[0] is not None else None
        yield _Batch(texts, keys, [value], [] if value is not None else [0],
                     lambda _, chunk=chunk: chunk)


def _old_batches(pieces: Iterable[str], source: str,
                 memo: Mapping[bytes, Any]) -> Iterator[_Batch]:
    """The old-syntax ads of each segment of the text (`blank_line_segments`) looked up in
    `memo` (`_old_blocks`); an ad too big to keep, as a batch of its problem."""
    index = 0
    for segment in blank_line_segments(pieces):
        if segment.text is None:
            index += 1
            problem = Framed(None, index, segment.line, too_big(segment.size))
            yield _Batch([""], [None], [None], [0], lambda _, chunk=problem: chunk)
            continue
        batch = _old_blocks(segment.text, memo, index, segment.line)
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


def _ad_name(ad: classad2.ClassAd) -> str | None:
    """A slot's Name or a job's id, for a warning about the ad (None if it has neither)."""
    name = ad.get("Name")
    if isinstance(name, str):
        return name
    cluster, proc = ad.get("ClusterId"), ad.get("ProcId")
    return f"{cluster}.{proc}" if type(cluster) is int and type(proc) is int else None


def _repeat_warning(source: str, chunk: Framed, ad: classad2.ClassAd,
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


def skip_reason(error: InputError) -> str:
    """An error as a skipped ad's reason: the message, with its attribute and line if known
    (the file and ad index are the skipped ad's own fields)."""
    where = [f"line {error.line}"] if error.line is not None else []
    if error.attribute:
        where.append(f"attribute {error.attribute}")
    return (", ".join(where) + ": " if where else "") + error.message


# ------------------------------------------------------------------- old syntax
def old_syntax_ads(pieces: Iterable[str], source: str = "") -> Iterator[Framed]:
    """The old-syntax ads of the text (given in pieces), segment by segment
    (`blank_line_segments`): an ad too big to keep comes with its problem. Also the framer of
    `condor_history -long` (`gridfair.classads.history`)."""
    index = 0
    for segment in blank_line_segments(pieces):
        if segment.text is None:
            index += 1
            yield Framed(None, index, segment.line, too_big(segment.size))
            continue
        line = segment.line  # line of the block's start
        # Blocks and the blank-line runs between them, alternately (split keeps the
        # separators).
        parts = _BLANK_LINE_RUNS.split(segment.text)
        for position in range(0, len(parts), 2):
            block = parts[position]
            chunk = _old_chunk(block, index + 1, line)
            if chunk is not None:
                index += 1
                yield chunk
            line += block.count("\n")
            if position + 1 < len(parts):
                line += parts[position + 1].count("\n")


def _old_chunk(block: str, index: int, line: int) -> Framed | None:
    """The ad of one old-syntax block that starts on `line`, or None for a blank block."""
    if block and not block[0].isspace() and block[-1] not in "\r\n":
        # The usual block: the split left no blank line or space around it.
        return Framed(block + "\n", index, line)
    if not block.strip():
        return None
    leading = len(block) - len(block.lstrip("\r\n\t "))
    first_line = line + block.count("\n", 0, leading) if leading else line
    return Framed(block.strip("\r\n") + "\n", index, first_line)


def _old_blocks(text: str, memo: Mapping[bytes, Any], index: int = 0, line: int = 1) -> _Batch:
    """Old-syntax text (the ads after the first `index`, from `line`) framed lazily, its ads
    looked up in `memo`: each ad's block of text and its digest, what `memo` holds for it
    (None if nothing), the positions of the blocks it has nothing for, and the `Framed` of the
    ad at a position, for positions asked in increasing order. A block's first line is counted
    only when its chunk is asked for: a reader that reuses most ads never needs theirs. Blank
    text before the first ad and after the last is no block.

    The blocks are cut at each "\\n\\n", several times faster than the blank-line runs'
    expression, which gives the same blocks unless a run is longer or holds blanks. Such a run
    leaves a block the expression would frame otherwise (`_misframed`), and only the blocks
    the memo has nothing for are checked: a block that has a value was built from a block
    with no blank line in it, and blank lines around such a block change neither its ad nor
    the ads' indexes. If one is misframed, the text is framed again by the expression.
    """
    parts: list[str] = []
    blocks = text.split("\n\n")
    keys = list(map(ad_digest, blocks))
    values = list(map(memo.get, keys))
    missing = [position for position, value in enumerate(values) if value is None]
    last = len(blocks) - 1
    if any(_misframed(blocks[position], position, last) for position in missing):
        parts = _BLANK_LINE_RUNS.split(text)
        blocks = parts[0::2]
        keys = list(map(ad_digest, blocks))
        values = list(map(memo.get, keys))
        missing = [position for position, value in enumerate(values) if value is None]
    first = 1 if not blocks[0].strip() else 0  # blank text before the first ad
    offsets: list[int] = []  # where each block starts in `text`, made on the first ask
    counted = [0, line]  # the offset lines are counted up to, and the line there

    def chunk_at(position: int) -> Framed | None:
        if not offsets:
            # Cut at "\n\n", block k starts after k separators of two characters.
            offsets.extend(accumulate(map(len, parts or blocks), initial=0))
            if parts:
                del offsets[1::2]  # the separators' starts
        block = position + first
        start = offsets[block] if parts else offsets[block] + 2 * block
        if start < counted[0]:
            counted[:] = [0, line]
        at = counted[1] + text.count("\n", counted[0], start)
        counted[:] = [start, at]
        return _old_chunk(blocks[block], index + position + 1, at)

    batch = (_Batch(blocks[1:], keys[1:], values[1:],
                    [position - 1 for position in missing if position], chunk_at) if first
             else _Batch(blocks, keys, values, missing, chunk_at))
    if batch.texts and not batch.texts[-1].strip():
        batch.texts.pop()
        batch.keys.pop()
        batch.values.pop()
        if batch.missing and batch.missing[-1] == len(batch.keys):
            batch.missing.pop()
    return batch


# Where a block cut at "\n\n" is not the expression's: a blank line at its start (the run
# before it goes on), inside it, or at its end (the run after it starts early).
_BLANK_LINE_AT_START = re.compile(r"[ \t\r]*\n")
_BLANK_LINE_INSIDE = re.compile(r"\n[ \t\r]*\n")
_BLANK_LINE_AT_END = re.compile(r"\n[ \t\r]*\Z")


def _misframed(block: str, position: int, last: int) -> bool:
    """Whether the blank-line runs would frame the block at `position` (of blocks 0..`last`
    cut at each "\\n\\n") otherwise. The first block has no run before it and the last none
    after it; a blank block between two others is part of a longer run (and would count as an
    ad in the ads' indexes)."""
    if 0 < position < last and not block.strip():
        return True
    return bool((position > 0 and _BLANK_LINE_AT_START.match(block))
                or _BLANK_LINE_INSIDE.search(block)
                or (position < last and _BLANK_LINE_AT_END.search(block)))


def _check_decodable(ad: classad2.ClassAd, chunk: Framed, source: str) -> None:
    """An InputError naming the attribute of `ad` that holds a string that is not UTF-8: a
    string escape (`"\\377"`) can make any byte, and the bindings then fail on every read
    of it. Only ads with a backslash in their text are looked at."""
    try:
        ad.printOld()  # decodes every string of the ad, literal or in an expression
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8 text: a string escape makes invalid bytes "
                         f"({error.reason})", source=source, line=chunk.line,
                         ad=f"#{chunk.index}", attribute=_undecodable(ad)) from None


def _check_utf8(chunk: Framed, source: str) -> None:
    """An InputError naming the line and attribute of an ad's text where its file was not
    UTF-8 (`undecoded`), if it was anywhere: such text must not reach the bindings (a lone
    surrogate kills the process)."""
    text = chunk.payload
    found = undecoded(text)
    if found is None:
        return
    at, what = found
    assignments = list(_ASSIGNMENT.finditer(text, 0, at))
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


def _attribute_lines(lines: list[str]) -> int:
    # classad2's file parser ignores lines starting with '#'.
    return sum(1 for line in lines if not line.lstrip().startswith("#"))


def _parse_old(chunk: Framed, source: str,
               warnings: list[AdWarning] | None) -> classad2.ClassAd:
    text = chunk.payload
    if not text.isascii():  # first: what is named below must be text
        _check_utf8(chunk, source)
    if len(text) > SHORT_VALUE:
        check_ad_text(text, source, chunk.index, chunk.line, by_line=True)
    ad = classad2.parseNext(text, classad2.ParserType.Old)
    lines = text.splitlines()
    expected = _attribute_lines(lines) if "#" in text else len(lines)
    if ad is not None and len(ad) == expected:
        if "\\" in text:
            _check_decodable(ad, chunk, source)
        return ad
    # Fewer attributes than lines: find the line the parser dropped (parsing it alone gives
    # nothing). None dropped means a repeated attribute, where the last value wins, as in
    # HTCondor: a warning.
    for offset, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            continue
        alone = classad2.parseNext(line + "\n", classad2.ParserType.Old)
        if alone is None or len(alone) == 0:
            raise InputError(
                f"malformed ad: cannot parse {_excerpt(line)}",
                source=source, line=chunk.line + offset, ad=f"#{chunk.index}",
            )
    if ad is None:
        raise InputError("malformed ad", source=source, line=chunk.line, ad=f"#{chunk.index}")
    if warnings is not None:
        repeats = _repeats(_ASSIGNMENT.finditer(text), text, chunk.line)
        if repeats:
            warnings.append(_repeat_warning(source, chunk, ad, repeats))
    return ad


def _repeats(assignments: Any, text: str,
             first_line: int) -> list[tuple[str, int | None, int | None]]:
    """(name, line set first, line set last) of each attribute the `_ASSIGNMENT` matches of
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


# ------------------------------------------------------------------- new syntax
#: `_NEW_SYNTAX_TOKENS`, and strings and comments not yet closed where the text read so far
#: ends (a lone `/` may open a comment): such a token is matched again with more text.
_NEW_SYNTAX_PARTIAL_TOKENS = re.compile(
    r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|\'(?:[^\'\\]|\\.)*(?:\'|\\?\Z)|/\*.*?(?:\*/|\Z)|//[^\n]*'
    r"|/\Z|\[|\]", re.DOTALL)


class _Lines:
    """Lines counted in a text as positions are asked in increasing order."""

    __slots__ = ("at", "line")

    def __init__(self, line: int) -> None:
        self.at, self.line = 0, line

    def of(self, text: str, position: int) -> int:
        self.line += text.count("\n", self.at, position)
        self.at = position
        return self.line

    def drop(self, text: str, before: int) -> None:
        """`text[:before]` is dropped: positions are counted from there on."""
        self.of(text, before)
        self.at = 0


def _new_framed(pieces: Iterable[str], source: str) -> Iterator[Framed]:
    """Top-level `[ ... ]` ads of the text, read piece by piece: what is kept is the ad being
    framed (an ad past `MAX_AD` keeps only its size), and the text after the last token that
    may not be whole."""
    text = ""  # the text kept: from the ad's start, or from where stray text is looked for
    scan = depth = start = end = index = 0  # positions in `text`: scanned, ad, between ads
    dropped = 0  # characters of the ad being framed not kept (past `MAX_AD`)
    line = 1  # the ad's first line
    lines = _Lines(1)
    pieces = iter(pieces)
    done = False
    while not done:
        piece = next(pieces, "")
        done = not piece
        keep = start if depth else end
        if depth and (dropped or scan - start > MAX_AD):  # too big: its size is kept
            dropped += scan - start
            keep = start = scan
        elif not depth and keep < scan:
            _no_stray_text(text[keep:scan], source, lines.of(text, keep), index + 1)
            keep = end = scan
        if len(text) - scan > MAX_AD + CHUNK:
            raise InputError(f"a string or comment longer than the limit of "
                             f"{size_text(MAX_AD)} an ad (never closed?)", source=source,
                             line=lines.of(text, scan), ad=f"#{index + 1}")
        lines.drop(text, keep)
        text = text[keep:] + piece
        scan, start, end = scan - keep, start - keep if depth else 0, end - keep
        for match in _NEW_SYNTAX_PARTIAL_TOKENS.finditer(text, scan):
            if match.end() == len(text) and not done:
                scan = match.start()  # it may go on in the next piece
                break
            token = match.group()
            if token == "[":
                if depth == 0:
                    _no_stray_text(text[end:match.start()], source, lines.of(text, end),
                                   index + 1)
                    start = match.start()
                    line = lines.of(text, start)
                depth += 1
            elif token == "]" and depth > 0:
                depth -= 1
                if depth == 0:
                    index += 1
                    end = match.end()
                    yield (Framed(None, index, line, too_big(dropped + end - start)) if dropped
                           else Framed(text[start:end], index, line))
                    dropped = 0
        else:
            scan = len(text)
    if depth > 0:
        raise InputError("malformed ad: '[' is never closed (truncated file?)",
                         source=source, line=line, ad=f"#{index + 1}")
    _no_stray_text(text[end:], source, lines.of(text, end), index + 1)


def _no_stray_text(between: str, source: str, line: int, index: int) -> None:
    """Text between new-syntax ads that is neither blank nor a comment is an error, reported
    at its line (`line` is the line `between` starts on)."""
    # Comments become spaces (newlines kept), so positions and line numbers stay right.
    cleaned = _NEW_SYNTAX_TOKENS.sub(
        lambda m: re.sub(r"[^\n]", " ", m.group()) if m.group().startswith("/") else m.group(),
        between,
    )
    stray = cleaned.lstrip()
    if stray:
        offset = len(cleaned) - len(stray)
        raise InputError(f"text outside any [ ... ] ad: {_excerpt(stray.splitlines()[0])}",
                         source=source, line=line + cleaned.count("\n", 0, offset),
                         ad=f"#{index}")


def _parse_new(chunk: Framed, source: str,
               warnings: list[AdWarning] | None) -> classad2.ClassAd:
    text = chunk.payload
    if not text.isascii():  # first: what is named below must be text
        _check_utf8(chunk, source)
    if len(text) > SHORT_VALUE:
        check_ad_text(text, source, chunk.index, chunk.line, by_line=False)
    try:
        ad = classad2.ClassAd(text)
    except (ValueError, classad2.ClassAdException):
        raise InputError("malformed ad: classad2 cannot parse it", source=source,
                         line=chunk.line, ad=f"#{chunk.index}") from None
    if "\\" in text:
        _check_decodable(ad, chunk, source)
    if warnings is not None and _assignments_at_most(text) > len(ad):
        repeats = _repeats(_top_level_assignments(text), text, chunk.line)
        if repeats:
            warnings.append(_repeat_warning(source, chunk, ad, repeats))
    return ad


def _assignments_at_most(text: str) -> int:
    """At least as many as the `=` of the text that assign (the others compare: `==`, `!=`,
    `<=`, `>=`, `=?=`, `=!=`), counted in C: when it is no more than the ad's attributes,
    none was set twice, and the text need not be scanned."""
    return (text.count("=") - 2 * text.count("==") - text.count("!=") - text.count("<=")
            - text.count(">=") - 2 * text.count("=?=") - text.count("=!="))


def _top_level_assignments(text: str) -> list[re.Match[str]]:
    """The `_ASSIGNMENT` matches of a new-syntax ad's own attributes: not in strings,
    comments, or nested ads and lists."""
    # Strings and comments become spaces (newlines kept), so positions stay right.
    cleaned = _NEW_SYNTAX_TOKENS.sub(
        lambda m: m.group() if m.group() in "[]" or m.group()[0] == "'"
        else re.sub(r"[^\n]", " ", m.group()), text)
    depth = 0
    found = []
    for match in _NESTING_OR_ASSIGNMENT.finditer(cleaned):
        token = match.group()
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
        elif depth == 1:
            found.append(match)  # its group 1 is the name, as in `_ASSIGNMENT`
    return found


_NESTING_OR_ASSIGNMENT = re.compile(r"[\[\]{}]|" + _ASSIGNMENT.pattern.replace(
    "(?:^|[\\[;])", "(?:^|(?<=[\\[;]))"), re.MULTILINE)


# ------------------------------------------------------------------------ JSON
def _json_framed(pieces: Iterable[str], source: str) -> Iterator[Framed]:
    """The objects of a JSON list (or JSON lines), each decoded on its own (`json_objects`,
    keeping count of repeated keys); no line is kept (a JSON ad is named by its index). JSON
    that does not decode is an InputError."""
    for chunk in json_objects(pieces, keyed=True, closed=True):
        if chunk.corrupt:  # no ad boundary left to trust: the file is refused, lenient or not
            raise InputError(f"not valid JSON: {chunk.problem}", source=source,
                             ad=f"#{chunk.index}")
        yield chunk._replace(line=None)


def _parse_json(chunk: Framed, source: str,
                warnings: list[AdWarning] | None) -> classad2.ClassAd:
    value, index = chunk.payload, chunk.index
    if not isinstance(value, dict):
        raise InputError(f"not a JSON object but {type(value).__name__}", source=source,
                         ad=f"#{index}")
    check_json_ad(value, source, index)
    ad = _json_ad(value, source, index)
    if any(type(item) is str and "\\" in item for item in value.values()):
        _check_decodable(ad, chunk, source)  # an expression's string escapes
    repeated = getattr(value, "repeated", None)
    if repeated and warnings is not None:
        warnings.append(_repeat_warning(source, chunk, ad,
                                        [(name, None, None) for name in repeated]))
    return ad


def _json_ad(value: dict, source: str, index: int) -> classad2.ClassAd:
    ad = classad2.ClassAd()
    for name, item in value.items():
        try:
            ad[name] = _json_value(item)
        except (ValueError, TypeError, SystemError, classad2.ClassAdException) as error:
            raise InputError(f"unusable value {_excerpt(json.dumps(item))}: {error}",
                             source=source, ad=f"#{index}", attribute=name) from None
    return ad


def _json_value(item: Any) -> Any:
    if isinstance(item, str):
        expression = _JSON_EXPRESSION.match(item)
        if expression:
            problem = operators_problem(expression.group(1))
            if problem:
                raise ValueError(problem)
            return classad2.ExprTree(expression.group(1))
    elif isinstance(item, list):
        return [_json_value(element) for element in item]
    elif isinstance(item, dict):
        nested = classad2.ClassAd()
        for name, element in item.items():
            nested[name] = _json_value(element)
        return nested
    return item


_FRAMERS: dict[AdFormat, Callable[[Iterable[str], str], Iterator[Framed]]] = {
    AdFormat.OLD: old_syntax_ads, AdFormat.NEW: _new_framed, AdFormat.JSON: _json_framed}
_PARSERS = {AdFormat.OLD: _parse_old, AdFormat.NEW: _parse_new, AdFormat.JSON: _parse_json}
_BATCHES: dict[AdFormat, Callable[[Iterable[str], str, Mapping[str, Any]], Iterator[_Batch]]] = {
    AdFormat.OLD: _old_batches, AdFormat.NEW: partial(_framed_batches, syntax=AdFormat.NEW),
    AdFormat.JSON: partial(_framed_batches, syntax=AdFormat.JSON)}


# ------------------------------------------------------------------------ help
def _excerpt(text: str, limit: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
