"""docs/runbook.md, followed on one machine: a pool built from the runbook's own configuration
blocks (security, central manager, schedd host, execute host, then the shipped pool and daemon
files, then shadow mode), gridfair run by the master in shadow mode, then switched to acting
as the runbook says; it then holds the lease and a job starts where it steered it."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

from tests.live.conftest import POOL_CONFIG, REPOSITORY, SLOTS, own_pool
from tests.live.harness.personal_pool import CONDOR_ACCOUNT, UID_DOMAIN, JobSpec
from tests.live.test_condor_daemon_live import SNIPPET, gridfair_ads, lease, master_control

RUNBOOK = REPOSITORY / "docs" / "runbook.md"
MARKED = re.compile(r"<!-- snippet: ([\w-]+) -->\n```[^\n]*\n(.*?)```", re.DOTALL)


def snippets() -> dict[str, list[str]]:
    """The runbook's marked configuration blocks, by name."""
    return {name: body.splitlines() for name, body in MARKED.findall(RUNBOOK.read_text())}


def test_the_runbook_s_snippets_make_a_pool_gridfair_acts_on(daemon_python: Path,
                                                              daemon_dir: Path) -> None:
    blocks = snippets()
    assert set(blocks) == {"security", "central-manager", "schedd-host", "execute-host",
                           "shadow"}
    # What one machine changes: its names and account, loopback, and where this test keeps
    # gridfair (the rest of the harness's configuration is overridden by the blocks).
    here = [f"POOL_ACCOUNT_NAME = {CONDOR_ACCOUNT[0]}", f"UID_DOMAIN = {UID_DOMAIN}",
            "CONDOR_HOST = 127.0.0.1", f"GRIDFAIR = {daemon_python.parent / 'gridfair'}",
            f"GRIDFAIR_STORE = {daemon_dir / 'state.db'}",
            f"GRIDFAIR_LOG_FILE = {daemon_dir / 'GridfairLog'}", "GRIDFAIR_INTERVAL = 2",
            "GRIDFAIR_METRICS_ENABLED = False"]
    # The harness's FS rendezvous, set before the blocks, kept after them.
    fs_dir = "GRIDFAIR_FS_DIR = $(LOCAL_DIR)/fs-auth"
    acting = ["DAEMON_LIST = MASTER", *blocks["security"], *blocks["central-manager"],
              *blocks["schedd-host"], *blocks["execute-host"],
              *POOL_CONFIG.read_text().splitlines(), *SNIPPET.read_text().splitlines(),
              *here, fs_dir]
    pool = own_pool(SLOTS[:2], extra_config=[*acting, *blocks["shadow"]])
    with pool:
        [shadow] = pool.wait_until(lambda: [ad for ad in gridfair_ads(pool)
                                            if ad["LastCycleOutcome"] == "dry-run"], 60)
        assert shadow["GridfairDryRun"] and lease(pool) == 0  # HTCondor starts jobs as before
        # Acting: the shadow block removed, then `condor_reconfig` and gridfair restarted.
        text = pool.config_file.read_text()
        pool.config_file.write_text(text.replace("\n".join(blocks["shadow"]) + "\n", ""))
        pool.run_tool(["condor_reconfig"])
        master_control(pool, "condor_off")
        pool.wait_until(lambda: not gridfair_ads(pool), 30)
        master_control(pool, "condor_on")
        pool.wait_until(lambda: lease(pool) > time.time(), 60)
        [job] = pool.submit([JobSpec("User2", 132250 * 600)])
        pool.wait_until(lambda: job in pool.running(), 30)
        with sqlite3.connect(f"file:{daemon_dir / 'state.db'}?mode=ro", uri=True) as db:
            steered = db.execute("select machine from actions where kind = 'allocate' and "
                                 "job = ?", [job]).fetchall()
        assert steered == [(pool.running()[job],)]
