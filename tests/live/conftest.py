"""Personal HTCondor pools for the live tests: one per layout per session, always stopped.

Without HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH or ../shared/htcondor), or without
root (the pools run as production pools do, with jobs from real Unix accounts), every live
test skips with the reason."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gridfair.daemon.backends.personal_pool import (
    HTCondorMissing,
    PersonalPool,
    SlotSpec,
    find_htcondor,
)

#: Two owners, unequal power: slot1-2 User1, slot3-4 User2.
SLOTS = (SlotSpec("User1", 132250), SlotSpec("User1", 132250),
         SlotSpec("User2", 54760), SlotSpec("User2", 29750))

#: gridfair's pool knobs, as shipped: a steered job starts on its slot; no claim reuse.
POOL_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "htcondor-pool.config"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/live/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.live)


def own_pool(slots: tuple[SlotSpec, ...] | list[SlotSpec], **options: object) -> PersonalPool:
    """A pool of the test's own configuration (not yet started); the test skips with the
    reason when HTCondor is missing."""
    try:
        return PersonalPool(slots, install=find_htcondor(), **options)
    except HTCondorMissing as missing:
        pytest.skip(str(missing))


def _pool(layout: str) -> Iterator[PersonalPool]:
    pool = own_pool(SLOTS, layout=layout, extra_config=POOL_CONFIG.read_text().splitlines())
    # The bindings reach the pool through its collector's address; they are not pointed at
    # its configuration (loading it would change ClassAd settings for the other tests).
    with pool:
        yield pool


@pytest.fixture(scope="session")
def static_pool() -> Iterator[PersonalPool]:
    yield from _pool("static")


@pytest.fixture(scope="session")
def partitionable_pool() -> Iterator[PersonalPool]:
    yield from _pool("partitionable")


@pytest.fixture
def clean_queue(static_pool: PersonalPool) -> Iterator[PersonalPool]:
    """The static pool with an empty queue before and after the test."""
    static_pool.clear_queue()
    yield static_pool
    static_pool.clear_queue()
