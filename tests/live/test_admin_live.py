"""`gridfair shares --pool` and `gridfair daemon --once --dry-run` on a live pool."""

from __future__ import annotations

import json
from pathlib import Path

from tests.live.harness.personal_pool import JobSpec, PersonalPool

LONG = 132250 * 600


def test_shares_reads_the_live_pool_and_names_unmapped_submitters(
        clean_queue: PersonalPool, gridfair_cli) -> None:
    pool = clean_queue
    ids = pool.submit([JobSpec("User2", LONG), JobSpec("User2", LONG), JobSpec("Stranger", LONG)])
    pool.wait_until(lambda: set(pool.running()) == set(ids), 30)
    result = gridfair_cli("shares", "--pool", pool.collector_host, "--uid-domain",
                          "gridfair.test")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.output.splitlines()
            if line.startswith(("User", "Stranger"))}
    assert rows["User1"][1:3] == ["264500", "0"]  # provides two fast slots, uses none
    assert rows["User2"][1] == "84510" and rows["User2"][6] == "2"
    assert "Users who own no slot (an owner listed here is misnamed: see --uid-domain, " \
           "--submitter-map): Stranger@gridfair.test" in result.output
    assert ("  Stranger@gridfair.test -> Stranger@gridfair.test: owns no slot; accounting "
            "group owners not trusted") in result.output
    as_json = gridfair_cli("shares", "--pool", pool.collector_host, "--uid-domain",
                           "gridfair.test", "--format", "json")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["unmapped"] == ["Stranger@gridfair.test"]


def test_daemon_once_dry_run_decides_on_the_live_pool(
        clean_queue: PersonalPool, gridfair_cli, tmp_path: Path) -> None:
    """User2 holds User1's slots; User1 arrives: HOSEP decides to vacate for User1, and a dry
    run records the decisions without acting (the jobs keep running)."""
    pool = clean_queue
    ids = pool.submit([JobSpec("User2", LONG)] * 4)
    pool.wait_until(lambda: set(pool.running()) == set(ids), 30)
    pool.submit([JobSpec("User1", LONG)])  # idle: every slot is busy
    config = tmp_path / "htcondor.toml"
    config.write_text(f"""
[daemon]
store = "{tmp_path / 'gridfair.db'}"
[safety]
min_runtime = 0
[backend]
kind = "htcondor"
[backend.htcondor]
collector = "{pool.collector_host}"
uid_domain = "gridfair.test"
""")
    result = gridfair_cli("daemon", "--config", str(config), "--once", "--dry-run")
    assert result.exit_code == 0, result.output
    log = result.output
    # Four static slots, or four partitionable slots and the dynamic slots cut from them.
    slots = 4 if pool.layout == "static" else 8
    assert f"{slots} slots" in log and "5 jobs" in log
    assert "1 idle" in log and "decisions, 0 actions confirmed" in log
    assert " 0 decisions" not in log
    assert set(pool.running()) == set(ids)


def test_daemon_check_reads_the_live_pool_and_makes_nothing(
        clean_queue: PersonalPool, gridfair_cli, tmp_path: Path) -> None:
    """`daemon --check` connects to the pool the config names, reads it once, prints one line
    and exits 0, making no store; a collector that does not answer is one line and exit 2."""
    pool = clean_queue
    config = tmp_path / "htcondor.toml"
    body = (f'[daemon]\nstore = "{tmp_path / "gridfair.db"}"\n[backend]\nkind = "htcondor"\n'
            '[backend.htcondor]\nuid_domain = "gridfair.test"\n')
    config.write_text(body + f'collector = "{pool.collector_host}"\n')
    result = gridfair_cli("daemon", "--config", str(config), "--check")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{config}: ok: backend htcondor: ")
    assert result.output.count("\n") == 1 and not (tmp_path / "gridfair.db").exists()
    config.write_text(body + 'collector = "127.0.0.1:9"\n')  # nothing listens there
    result = gridfair_cli("daemon", "--config", str(config), "--check")
    assert result.exit_code == 2
    assert "collector 127.0.0.1:9: query failed" in result.output
