"""Reading a TOML input file, with errors that name the file and say what went wrong."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from gridfair.errors import InputError, not_text


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """The document in `path`; `what` names the kind of file in errors ("grid file")."""
    source = str(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"no such {what}", source=source) from None
    except UnicodeDecodeError as error:
        raise InputError(f"{what}: {not_text(error)}", source=source) from None
    except OSError as error:
        raise InputError(f"cannot read {what}: {error.strerror or error}", source=source
                         ) from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"{what}: not valid TOML: {error}", source=source) from None
