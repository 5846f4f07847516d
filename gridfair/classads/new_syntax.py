"""New-syntax ads (`condor_status -long:new`): one top-level `[ ... ]` an ad, framed past
brackets inside strings, quoted names and comments (`reader`'s docstring)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import classad2

from gridfair.ad_views import AdWarning
from gridfair.classads.ad_text import (
    ASSIGNMENT,
    check_decodable,
    check_utf8,
    excerpt,
    repeat_warning,
    repeated_attributes,
)
from gridfair.classads.bounds import MAX_AD, SHORT_VALUE, check_ad_text, size_text
from gridfair.classads.framing import CHUNK, Framed, too_big
from gridfair.errors import InputError

# Tokens that matter for framing new-syntax ads: strings and quoted names (which may hold
# brackets), comments, and the brackets themselves.
_NEW_SYNTAX_TOKENS = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|/\*.*?\*/|//[^\n]*|\[|\]', re.DOTALL
)


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


def new_framed(pieces: Iterable[str], source: str) -> Iterator[Framed]:
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
        raise InputError(f"text outside any [ ... ] ad: {excerpt(stray.splitlines()[0])}",
                         source=source, line=line + cleaned.count("\n", 0, offset),
                         ad=f"#{index}")


def parse_new(chunk: Framed, source: str,
               warnings: list[AdWarning] | None) -> classad2.ClassAd:
    text = chunk.payload
    if not text.isascii():  # first: what is named below must be text
        check_utf8(chunk, source)
    if len(text) > SHORT_VALUE:
        check_ad_text(text, source, chunk.index, chunk.line, by_line=False)
    try:
        ad = classad2.ClassAd(text)
    except (ValueError, classad2.ClassAdException):
        raise InputError("malformed ad: classad2 cannot parse it", source=source,
                         line=chunk.line, ad=f"#{chunk.index}") from None
    if "\\" in text:
        check_decodable(ad, chunk, source)
    if warnings is not None and _assignments_at_most(text) > len(ad):
        repeats = repeated_attributes(_top_level_assignments(text), text, chunk.line)
        if repeats:
            warnings.append(repeat_warning(source, chunk, ad, repeats))
    return ad


def _assignments_at_most(text: str) -> int:
    """At least as many as the `=` of the text that assign (the others compare: `==`, `!=`,
    `<=`, `>=`, `=?=`, `=!=`), counted in C: when it is no more than the ad's attributes,
    none was set twice, and the text need not be scanned."""
    return (text.count("=") - 2 * text.count("==") - text.count("!=") - text.count("<=")
            - text.count(">=") - 2 * text.count("=?=") - text.count("=!="))


def _top_level_assignments(text: str) -> list[re.Match[str]]:
    """The `ASSIGNMENT` matches of a new-syntax ad's own attributes: not in strings,
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
            found.append(match)  # its group 1 is the name, as in `ASSIGNMENT`
    return found


_NESTING_OR_ASSIGNMENT = re.compile(r"[\[\]{}]|" + ASSIGNMENT.pattern.replace(
    "(?:^|[\\[;])", "(?:^|(?<=[\\[;]))"), re.MULTILINE)

