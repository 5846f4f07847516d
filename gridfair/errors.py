"""Errors a user can act on: each names where the bad input is and what was expected."""

from __future__ import annotations


class GridfairError(Exception):
    """Base of every error gridfair reports to a user without a traceback."""


class InputError(GridfairError):
    """Bad input: names the source (file), the place in it (line, ad) and the attribute."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        ad: str | None = None,
        attribute: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.ad = ad
        self.attribute = attribute
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.source:
            where.append(self.source + (f":{self.line}" if self.line is not None else ""))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.ad:
            where.append(f"ad {self.ad}")
        if self.attribute:
            where.append(f"attribute {self.attribute}")
        return (", ".join(where) + ": " if where else "") + self.message


class ConfigError(GridfairError):
    """A configuration value is missing or invalid; names the key."""


def not_text(error: UnicodeDecodeError, *, whole: bool = True) -> str:
    """What to say of a file that does not decode: not UTF-8 text, and where when the error
    is of the `whole` file (a stream's decoder counts from its last chunk)."""
    return f"not UTF-8 text ({error.reason}" + (f" at byte {error.start})" if whole else ")")
