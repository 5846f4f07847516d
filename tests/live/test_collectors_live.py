"""Machine ads from two collectors (a flock of two personal pools), against the daemon's read:
a name both give at different startds is read from the first collector only, with the reason;
the same startd heard by both is read once; a collector stopped with SIGSTOP (it accepts and
never answers) is skipped with the reason and the other is read."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from gridfair.classads.submitters import SubmitterMap
from gridfair.daemon.backends.htcondor import HTCondorBackend
from tests.live.conftest import own_pool
from tests.live.harness.personal_pool import UID_DOMAIN, PersonalPool

#: A pool of a collector and a schedd, no startd: its slots are advertised (fake ones).
NO_STARTD = "DAEMON_LIST = MASTER, COLLECTOR, SCHEDD"
STARTED = 1_700_000_000


def slot_ad(name: str, address: str, owner: str) -> str:
    """A one-cpu static slot's ad, as a startd at `address` sends it."""
    return "\n".join([
        'MyType = "Machine"', 'TargetType = "Job"', f'Name = "{name}"',
        f'Machine = "{name.partition("@")[2]}"', f'MyAddress = "{address}"',
        f"DaemonStartTime = {STARTED}", 'Arch = "X86_64"', 'OpSys = "LINUX"',
        "Cpus = 1", "Memory = 2048", "Disk = 1000000", "GPUs = 0", 'State = "Unclaimed"',
        'Activity = "Idle"', 'SlotType = "Static"', "START = true", "Requirements = START",
        f'GridOwner = "{owner}"', "MFlops = 2000", "ClassAdLifetime = 3600",
    ]) + "\n"


def advertise(pool: PersonalPool, ads: list[str]) -> None:
    """Send `ads` to the pool's collector, with the private ads it needs for them
    (`condor_advertise -multiple -fake-private-ad`), and wait until it lists them."""
    path = pool.jobs_folder / "slots.ads"
    path.write_text("\n".join(ads))
    path.chmod(0o644)
    pool.run_tool(["condor_advertise", "-multiple", "-fake-private-ad", "UPDATE_STARTD_AD",
                   str(path)])
    pool.wait_until(lambda: len(pool.status("Name")) == len(ads), 30, 0.5)


def collector_pid(pool: PersonalPool) -> int:
    marker = f"CONDOR_CONFIG={pool.config_file}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (b"condor_collector" in (entry / "cmdline").read_bytes()
                    and marker in (entry / "environ").read_bytes().split(b"\0")):
                return int(entry.name)
        except OSError:
            continue
    raise LookupError(f"no collector of {pool.config_file}")


def test_two_collectors_duplicate_names_and_a_stopped_collector() -> None:
    first = own_pool([], extra_config=[NO_STARTD], daemon_account=None)
    # Its own schedd name: both pools run on this host, whose name each schedd takes.
    second = own_pool([], extra_config=[NO_STARTD, "SCHEDD_NAME = second"],
                      daemon_account=None)
    with first, second:
        advertise(first, [slot_ad("slot1@a.example", "<10.0.0.1:9618>", "User1"),
                          slot_ad("slot1@both.example", "<10.0.0.2:9618>", "User1"),
                          slot_ad("slot1@twin.example", "<10.0.0.3:9618>", "User2")])
        advertise(second, [slot_ad("slot1@b.example", "<10.0.1.1:9618>", "User2"),
                           slot_ad("slot1@both.example", "<10.0.1.2:9618>", "Impostor"),
                           slot_ad("slot1@twin.example", "<10.0.0.3:9618>", "User2")])
        backend = HTCondorBackend.connect(first.collector_host,
                                          more_pools=[second.collector_host],
                                          submitters=SubmitterMap(UID_DOMAIN),
                                          collector_timeout=3.0)
        snapshot = backend.read_snapshot()
        machines = {machine.name: machine.owner for machine in snapshot.machines}
        assert machines == {"slot1@a.example": "User1", "slot1@both.example": "User1",
                            "slot1@twin.example": "User2", "slot1@b.example": "User2"}
        [duplicate] = snapshot.skipped
        assert duplicate.source == f"collector {second.collector_host}"
        assert duplicate.name == "slot1@both.example"
        assert duplicate.reason.startswith("attribute Name: duplicate machine name (also ad #")
        assert duplicate.reason.endswith(f" of collector {first.collector_host})")

        stopped = collector_pid(second)
        os.kill(stopped, signal.SIGSTOP)
        try:
            snapshot = backend.read_snapshot()
        finally:
            os.kill(stopped, signal.SIGCONT)
        assert sorted(machine.name for machine in snapshot.machines) == [
            "slot1@a.example", "slot1@both.example", "slot1@twin.example"]
        assert [(skip.source, skip.reason) for skip in snapshot.skipped] == [
            (f"collector {second.collector_host}", "no answer within 3 s")]
