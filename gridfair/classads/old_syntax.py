"""Old-syntax ads (`condor_status -long`): framed at blank lines, one `Attr = value` a line,
parsed by classad2's old parser with every dropped line reported (`reader`'s docstring)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from itertools import accumulate
from typing import Any

import classad2

from gridfair.ad_views import AdWarning
from gridfair.classads.ad_text import (
    ASSIGNMENT,
    Batch,
    ad_digests,
    check_decodable,
    check_utf8,
    excerpt,
    repeat_warning,
    repeated_attributes,
)
from gridfair.classads.bounds import SHORT_VALUE, check_ad_text
from gridfair.classads.framing import Framed, blank_line_segments, too_big
from gridfair.errors import InputError

# One or more blank lines: what separates old-syntax ads.
_BLANK_LINE_RUNS = re.compile(r"(\n(?:[ \t\r]*\n)+)")


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
            chunk = old_chunk(block, index + 1, line)
            if chunk is not None:
                index += 1
                yield chunk
            line += block.count("\n")
            if position + 1 < len(parts):
                line += parts[position + 1].count("\n")


def old_chunk(block: str, index: int, line: int) -> Framed | None:
    """The ad of one old-syntax block that starts on `line`, or None for a blank block."""
    if block and not block[0].isspace() and block[-1] not in "\r\n":
        # The usual block: the split left no blank line or space around it.
        return Framed(block + "\n", index, line)
    if not block.strip():
        return None
    leading = len(block) - len(block.lstrip("\r\n\t "))
    first_line = line + block.count("\n", 0, leading) if leading else line
    return Framed(block.strip("\r\n") + "\n", index, first_line)


def old_blocks(text: str, memo: Mapping[int | bytes, Any], index: int = 0, line: int = 1) -> Batch:
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
    keys = ad_digests(blocks)
    values = list(map(memo.get, keys))
    missing = [position for position, value in enumerate(values) if value is None]
    last = len(blocks) - 1
    if any(_misframed(blocks[position], position, last) for position in missing):
        parts = _BLANK_LINE_RUNS.split(text)
        blocks = parts[0::2]
        keys = ad_digests(blocks)
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
        return old_chunk(blocks[block], index + position + 1, at)

    batch = (Batch(blocks[1:], keys[1:], values[1:],
                    [position - 1 for position in missing if position], chunk_at) if first
             else Batch(blocks, keys, values, missing, chunk_at))
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


def _attribute_lines(lines: list[str]) -> int:
    # classad2's file parser ignores lines starting with '#'.
    return sum(1 for line in lines if not line.lstrip().startswith("#"))


def parse_old(chunk: Framed, source: str,
               warnings: list[AdWarning] | None) -> classad2.ClassAd:
    text = chunk.payload
    if not text.isascii():  # first: what is named below must be text
        check_utf8(chunk, source)
    if len(text) > SHORT_VALUE:
        check_ad_text(text, source, chunk.index, chunk.line, by_line=True)
    ad = classad2.parseNext(text, classad2.ParserType.Old)
    lines = text.splitlines()
    expected = _attribute_lines(lines) if "#" in text else len(lines)
    if ad is not None and len(ad) == expected:
        if "\\" in text:
            check_decodable(ad, chunk, source)
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
                f"malformed ad: cannot parse {excerpt(line)}",
                source=source, line=chunk.line + offset, ad=f"#{chunk.index}",
            )
    if ad is None:
        raise InputError("malformed ad", source=source, line=chunk.line, ad=f"#{chunk.index}")
    if warnings is not None:
        repeats = repeated_attributes(ASSIGNMENT.finditer(text), text, chunk.line)
        if repeats:
            warnings.append(repeat_warning(source, chunk, ad, repeats))
    return ad
