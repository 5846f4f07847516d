"""Personal HTCondor pools for the live tests: one per layout per session, always stopped.

Without HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH or ../shared/htcondor), or without
root (the pools run as production pools do, with jobs from real Unix accounts), every live
test skips with the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.live.harness.personal_pool import (
    HTCondorMissing,
    PersonalPool,
    SlotSpec,
    daemon_command,
    daemon_directory,
    find_htcondor,
    install_daemon,
)

REPOSITORY = Path(__file__).resolve().parents[2]

#: Two owners, unequal power: slot1-2 User1, slot3-4 User2.
SLOTS = (SlotSpec("User1", 132250), SlotSpec("User1", 132250),
         SlotSpec("User2", 54760), SlotSpec("User2", 29750))

#: gridfair's pool knobs, as shipped: a steered job starts on its slot; no claim reuse.
POOL_CONFIG = REPOSITORY / "configs" / "htcondor-pool.config"
# The safety limits a short live test runs under: preemption at once, four vacates a cycle, a
# snapshot never too old, allocations given 20 s to land on a loaded machine.
QUICK_SAFETY = {"min_runtime": 0, "max_vacates_per_cycle": 4, "preempt_cooldown": 0,
                "max_snapshot_age": 3600, "landing_timeout": 20}


@contextmanager
def ghost_schedd(pool: PersonalPool, *, with_version: bool) -> Iterator[str]:
    """A schedd ad in the pool's collector for a schedd that is not there (it outlived its
    schedd, or anyone allowed to advertise one sent it): at an address that refuses
    connections, with or without the `CondorVersion` the bindings need to reach it. Yields
    its name; withdrawn after."""
    import htcondor2

    name = f"ghost{int(with_version)}@gridfair.test"
    ad = pool.jobs_folder / f"{name}.ad"
    ad.write_text(f'MyType = "Scheduler"\nName = "{name}"\nMachine = "gridfair.test"\n'
                  'MyAddress = "<127.0.0.1:1>"\nScheddIpAddr = "<127.0.0.1:1>"\n'
                  "ClassAdLifetime = 3600\n" + ('CondorVersion = "$CondorVersion: 25.14.0 '
                                                 '2026-08-21 $"\n' if with_version else ""))
    ad.chmod(0o644)
    collector = htcondor2.Collector(pool.collector_host)

    def schedds() -> int:
        return len(collector.locateAll(htcondor2.DaemonType.Schedd))

    alone = schedds()
    pool.run_tool(["condor_advertise", "UPDATE_SCHEDD_AD", str(ad)])
    try:
        pool.wait_until(lambda: schedds() == alone + 1, 30, 0.5)
        yield name
    finally:
        query = pool.jobs_folder / f"{name}.query"
        query.write_text(f'MyType = "Query"\nTargetType = "Scheduler"\n'
                         f'Requirements = Name == "{name}"\n')
        query.chmod(0o644)
        pool.run_tool(["condor_advertise", "INVALIDATE_SCHEDD_ADS", str(query)])
        pool.wait_until(lambda: schedds() == alone, 30, 0.5)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/live/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.live)


def htcondor_or_skip() -> Path:
    """The HTCondor install a pool would run, without making one (no directory left behind);
    the test skips with the reason where no pool can run (no HTCondor, not root)."""
    if os.geteuid() != 0:
        pytest.skip("a personal pool runs as a production pool does: it needs root")
    try:
        return find_htcondor()
    except HTCondorMissing as missing:
        pytest.skip(str(missing))


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


@pytest.fixture(params=["static", "partitionable"])
def clean_queue(request: pytest.FixtureRequest) -> Iterator[PersonalPool]:
    """Each pool in turn (the same machines as static slots, then as partitionable ones),
    with an empty queue before and after the test."""
    pool = request.getfixturevalue(f"{request.param}_pool")
    pool.clear_queue()
    yield pool
    pool.clear_queue()


@pytest.fixture(scope="session")
def daemon_python() -> Iterator[Path]:
    """gridfair installed for its daemon's account as an administrator would: a wheel built
    from this tree in a venv every account can read (`install_daemon`)."""
    directory = Path(tempfile.mkdtemp(prefix="gridfair-install-", dir="/var/tmp"))
    try:
        python = install_daemon(REPOSITORY, directory)
    except HTCondorMissing as missing:
        shutil.rmtree(directory, ignore_errors=True)
        pytest.skip(str(missing))
    yield python
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def daemon_dir() -> Iterator[Path]:
    """The daemon's own directory (its config, store and log), owned by its account and
    closed to others, as systemd's StateDirectory makes it."""
    directory = daemon_directory()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def run_daemon(python: Path, pool: PersonalPool, directory: Path, *args: str,
               fault: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The daemon run to its end (`--once`, `--cycles N`) in `directory` as its account."""
    return subprocess.run(daemon_command(python, *args), cwd=directory,
                          env=pool.daemon_environment(fault), capture_output=True, text=True,
                          timeout=timeout, check=False)


def start_daemon(python: Path, pool: PersonalPool, directory: Path) -> subprocess.Popen:
    """The daemon started in `directory` as its account, running until the test stops it; its
    stderr kept for the test's failure message."""
    return subprocess.Popen(daemon_command(python), cwd=directory,
                            env=pool.daemon_environment(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def write_daemon_config(directory: Path, pool: PersonalPool, *,
                        daemon: Mapping[str, object] | None = None,
                        policy: Mapping[str, object] | None = None,
                        policy_options: Mapping[str, object] | None = None,
                        safety: Mapping[str, object] | None = None,
                        htcondor: Mapping[str, object] | None = None) -> None:
    """`gridfair.toml` in `directory` for a daemon on `pool`: its store `state.db` and the
    `htcondor` backend on the pool's collector, with each table's further keys as given."""
    tables: dict[str, Mapping[str, object]] = {
        "daemon": {"store": "state.db", **(daemon or {})}, "policy": policy or {},
        "policy.options": policy_options or {}, "safety": safety or {},
        "backend": {"kind": "htcondor"},
        "backend.htcondor": {"collector": pool.collector_host, **(htcondor or {})}}
    lines = []
    for table, keys in tables.items():
        if keys:
            lines.append(f"[{table}]")
            lines.extend(f"{key} = {_toml_value(value)}" for key, value in keys.items())
    (directory / "gridfair.toml").write_text("\n".join(lines) + "\n")


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string for the plain text these tests use
