"""What a reader takes from a file before it refuses it: regular files only, bounded ads and
attributes, bounded JSON nesting, and strings the ClassAd bindings can hold.

The limits are generous (a real job ad is a few kB; HTCondor's own attribute values are far
below a MiB) and the same for every reader, so that no input makes a reader's memory grow
with the input rather than with the limit:
- `MAX_ATTRIBUTE`: one attribute's value (a line of old syntax, a JSON string or list), and
  one line of a task list (`bounded_lines`);
- `MAX_AD`: one ad's text (or one JSON object's);
- `MAX_JSON_DEPTH`: lists and objects nested in one JSON ad.

Strings are checked before they reach `classad2`: a lone UTF-16 surrogate (JSON `"\\ud800"`)
assigned to a ClassAd kills the process (SIGSEGV inside the bindings), and a NUL ends the
string there silently. JSON can carry either (its `\\u` escapes); in other text a NUL is
refused as not text, and bytes that are not UTF-8 are kept as lone surrogates (U+DC80 to
U+DCFF) only until their ad is refused naming them (`gridfair.classads.framing.undecoded`).
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from gridfair.errors import InputError

#: Characters of one attribute's value.
MAX_ATTRIBUTE = 1 << 20
#: Characters of one ad.
MAX_AD = 16 << 20
#: Lists and objects nested in one JSON ad (the ad itself is depth 1).
MAX_JSON_DEPTH = 64
#: Operators in one attribute's expression: classad2 parses `1+1+...+1` of any length, then
#: its unparser and copy recurse once per operator and overflow the stack (SIGSEGV) past
#: ~30,000 of them.
MAX_OPERATORS = 4096
#: Values shorter than this cannot hold more operators than that: only longer ones are counted.
SHORT_VALUE = 2 * MAX_OPERATORS


def size_text(size: int) -> str:
    """A limit in words: 16 MiB, 1 MiB, 512 kiB."""
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} kiB"


def bounded_lines(stream: TextIO, source: str, limit: int = MAX_ATTRIBUTE) -> Iterator[str]:
    """The lines of a text stream (a task list), none longer than `limit` characters: a
    longer one is an InputError naming its line, found without reading it whole (iterating
    the stream would read a file with no newline into memory at once)."""
    read = stream.readline
    number = 0
    while True:
        line = read(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit:
            raise InputError(f"a line longer than the limit of {size_text(limit)} a line",
                             source=source, line=number)
        yield line


def string_problem(text: str) -> str | None:
    """Why the bindings cannot hold `text`, or None: a lone surrogate, a NUL character."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            return (f"invalid Unicode: a lone surrogate U+{ord(text[error.start]):04X} at "
                    f"character {error.start}")
    nul = text.find("\0")
    if nul >= 0:
        return f"a NUL character at character {nul}"
    return None


#: String literals (and quoted names), whose characters are not operators.
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
#: The characters of ClassAd operators (`=` of an assignment is not counted).
_OPERATOR = re.compile(r"[-+*/%<>&|^?!~]")


def operators_problem(expression: str) -> str | None:
    """Why the bindings cannot take an expression's text (more than `MAX_OPERATORS`
    operators outside its string literals), or None."""
    if len(expression) <= SHORT_VALUE:
        return None
    count = len(_OPERATOR.findall(_QUOTED.sub("", expression)))
    if count > MAX_OPERATORS:
        return (f"an expression of {count} operators, more than the limit of {MAX_OPERATORS} "
                f"(the ClassAd library's unparser would overflow its stack)")
    return None


def check_ad_text(text: str, source: str, index: int, line: int | None,
                  by_line: bool) -> None:
    """An InputError if an ad's text (its first line `line`) is longer than `MAX_AD` or,
    `by_line` (old syntax, an attribute a line), one of its lines is longer than
    `MAX_ATTRIBUTE`; or one of its lines (an attribute, in old syntax or as
    `condor_status -long:new` writes them) holds more than `MAX_OPERATORS` operators. Callers
    look only at an ad longer than `SHORT_VALUE`."""
    where = {"source": source, "ad": f"#{index}"}
    if len(text) > MAX_AD:
        raise InputError(f"an ad of {len(text)} characters, longer than the limit of "
                         f"{size_text(MAX_AD)} an ad", line=line, **where)
    for offset, text_line in enumerate(text.split("\n")):
        if len(text_line) <= SHORT_VALUE:
            continue
        name = text_line.partition("=")[0].strip(" \t[;")[:60] or None
        if by_line and len(text_line) > MAX_ATTRIBUTE:
            raise InputError(f"a line of {len(text_line)} characters, longer than the limit "
                             f"of {size_text(MAX_ATTRIBUTE)} an attribute",
                             line=(line or 1) + offset, attribute=name, **where)
        problem = operators_problem(text_line)
        if problem:
            raise InputError(problem, line=(line or 1) + offset, attribute=name, **where)


#: The integers a ClassAd holds (the bindings fail on others with a SystemError).
_INT64 = (-(1 << 63), (1 << 63) - 1)


def json_value_problem(value: Any, depth: int = 1) -> tuple[str | None, int]:
    """Why a JSON value (as `json` loaded it, `depth` deep in its ad) cannot be an
    attribute's value (None if it can), and its size (the characters of its strings and names,
    and one for each other item): a string `string_problem` refuses, an integer past 64 bits,
    a value whose size is past `MAX_ATTRIBUTE`, nesting deeper than `MAX_JSON_DEPTH`.
    Iterative: the nesting it is given may be deep."""
    pending = [(value, depth)]
    size = 0
    while pending:
        item, level = pending.pop()
        if type(item) is str:
            size += len(item)
            problem = string_problem(item)
            if problem:
                return problem, size
        else:
            size += 1
            if type(item) is int and not _INT64[0] <= item <= _INT64[1]:
                return f"an integer of {item.bit_length()} bits, past a ClassAd's 64", size
            if isinstance(item, list | dict):
                if level >= MAX_JSON_DEPTH:
                    return f"nested deeper than {MAX_JSON_DEPTH} levels", size
                if isinstance(item, dict):
                    for name in item:
                        size += len(name)
                        problem = string_problem(name)
                        if problem:
                            return f"a name with {problem}", size
                    pending.extend((element, level + 1) for element in item.values())
                else:
                    pending.extend((element, level + 1) for element in item)
        if size > MAX_ATTRIBUTE:
            return (f"a value of more than {size} characters, longer than the limit of "
                    f"{size_text(MAX_ATTRIBUTE)} an attribute"), size
    return None, size


def check_json_ad(value: dict, source: str, index: int, line: int | None = None) -> None:
    """An InputError naming the attribute of a JSON ad (a loaded object) that cannot reach the
    bindings (`json_value_problem`), or saying the ad is past `MAX_AD`, if so."""
    where = {"source": source, "line": line, "ad": f"#{index}"}
    total = 0
    for name, item in value.items():
        problem = string_problem(name)
        if problem:
            raise InputError(f"attribute name with {problem}", attribute=ascii(name), **where)
        if type(item) is str and item.isascii() and len(item) <= MAX_ATTRIBUTE \
                and "\0" not in item:
            size = len(item)  # the usual value: nothing more to look at
        else:
            problem, size = json_value_problem(item, 2)
            if problem:
                raise InputError(problem, attribute=name, **where)
        total += len(name) + size
        if total > MAX_AD:
            raise InputError(f"an ad of more than {total} characters, longer than the limit "
                             f"of {size_text(MAX_AD)} an ad", **where)


def open_regular(path: str | Path) -> io.BufferedReader:
    """The file at `path`, opened for reading in binary; an InputError if it is missing, not
    readable, or not a regular file (a FIFO or a device would block a read or never end).
    Opened without blocking, so that a FIFO with no writer is refused, not waited on."""
    source = str(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", source=source) from None
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", source=source) from None
    mode = os.fstat(descriptor).st_mode
    if stat.S_ISDIR(mode):
        os.close(descriptor)
        raise InputError("is a directory, not a file", source=source)
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise InputError(f"not a regular file (a {_file_kind(mode)}): give a file",
                         source=source)
    os.set_blocking(descriptor, True)
    return open(descriptor, "rb")  # noqa: SIM115 - the caller closes it


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"
