"""Shared fixtures: where real data lives, and a skip with a reason when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

ROOT = Path(__file__).resolve().parent.parent
TEST_DATA = ROOT / "tests" / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"


def shared_file(relative: str) -> Path:
    """A file of ../shared/data, or a skip saying why the test cannot run without it."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"needs ../shared/data/{relative} (real data, present in CI; absent here)")
    return path


@pytest.fixture(scope="session")
def gridfair_cli():
    """Runs `gridfair ARGS...` in-process, as a user would (subcommands load as they run)."""
    from gridfair.cli import cli

    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return invoke


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The offline suite first, the live one (personal HTCondor pools, minutes) after it: a
    live fault then costs the offline results nothing."""
    items.sort(key=lambda item: "live" in item.path.relative_to(ROOT).parts[:2])
