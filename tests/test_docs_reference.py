"""docs/reference.md is what docs/gen_reference.py makes of the code now: a command, option,
config key, metric, column or term added, renamed or removed without regenerating the page
fails here (regenerate: `.venv/bin/python docs/gen_reference.py > docs/reference.md`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def generator():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_generated_from_the_code_as_it_is():
    assert (DOCS / "reference.md").read_text(encoding="utf-8") == generator().render()


def test_the_reference_names_every_command_config_key_and_metric():
    from gridfair.cli.group import COMMANDS
    from gridfair.daemon.config import SCHEMA

    text = (DOCS / "reference.md").read_text(encoding="utf-8")
    assert all(f"### `gridfair {name}" in text for name in COMMANDS)
    assert all(f"### `[{section}]`" in text and all(f"| `{key}` |" in text for key in keys)
               for section, keys in SCHEMA.items())
    assert "| `--check` |" in text and "`gridfair_cycle_duration_seconds`" in text
