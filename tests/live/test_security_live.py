"""Attacks on gridfair by a pool's ordinary users, against the shipped pool configuration
(configs/htcondor-pool.config), live.

Each attacker is a real Unix account, neither a queue super user nor an administrator, that
submits and edits its own jobs with HTCondor's tools, authenticated as itself (FS). For each
attack the test checks the outcome: the pool refuses it, or it changes nothing about who runs
where, and the job is charged to the attacker's real identity."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from gridfair.ad_views import JobStatus
from gridfair.classads.submitters import SubmitterMap
from gridfair.daemon.backends.htcondor import HTCondorBackend
from tests.live.conftest import POOL_CONFIG, own_pool
from tests.live.harness.personal_pool import (
    UID_DOMAIN,
    JobSpec,
    PersonalPool,
    SlotSpec,
    as_account,
    ensure_account,
)

LONG = 132250 * 600
ATTACKER = "mallory"  # owns no slot
REFUSED = "GridfairSlot is set by gridfair only"


def backend(pool: PersonalPool, **options: object) -> HTCondorBackend:
    return HTCondorBackend.connect(pool.collector_host,
                                   **{"submitters": SubmitterMap(UID_DOMAIN), **options})


def sleep_job(*commands: str) -> list[str]:
    return ["executable = /bin/sleep", "arguments = 600", *commands]


def first_job(done: subprocess.CompletedProcess) -> str:
    """The first job id `condor_submit -terse` printed ("12.0 - 12.1")."""
    return re.split(r"\s|-", done.stdout.strip())[0]


def attribute(pool: PersonalPool, job: str, name: str) -> str:
    cluster, proc = job.split(".")
    [[value]] = pool.jobs(name, constraint=f"ClusterId == {cluster} && ProcId == {proc}")
    return value


@pytest.mark.parametrize("steering", [
    '+GridfairSlot = "slot1@vm"',
    'MY.gridfairslot = "slot1@vm"',  # attribute names are not case-sensitive
    '+GridfairSlot = strcat("slot", "1@vm")',
    # Undefined when the schedd judged the submit, a slot's name later (issue 31): accepted
    # while the submit requirement judged the value.
    '+GridfairSlot = SomeHelper',
    'MY.GridfairSlot = ifThenElse(time() < 2000000000, undefined, "slot1@vm")',
    '+GridfairSlot = ifThenElse(TARGET.Name =!= undefined, TARGET.Name, undefined)',
    '+GridfairSlot = undefined',
    # The size gridfair allocates beside the slot is its own too.
    '+GridfairSlotSize = {64, 100000, 8}',
    'MY.gridfairslotsize = {TARGET.Cpus, TARGET.Memory, 0}',
])
@pytest.mark.parametrize("materialize", [False, True])
def test_a_user_cannot_steer_a_job_at_submit(clean_queue: PersonalPool, steering: str,
                                             materialize: bool) -> None:
    pool = clean_queue
    late = ["max_materialize = 1"] if materialize else []  # the cluster ad, proc ads later
    done = pool.submit_as(ATTACKER, sleep_job(steering, *late), count=2)
    assert done.returncode != 0
    assert REFUSED in done.stderr + done.stdout
    assert pool.jobs("ClusterId") == []


def test_a_late_materialized_job_cannot_be_steered(clean_queue: PersonalPool) -> None:
    """A factory whose first job names no slot and whose second does (`$(slot)` from the
    queue items): the schedd judges the first at submit, makes the second later. Earlier
    accepted, and the second job was queued as `GridfairSlot = "slot1@vm"`; now refused."""
    pool = clean_queue
    done = pool.submit_as(ATTACKER, sleep_job("max_materialize = 1", "+GridfairSlot = $(slot)"),
                          queue=["queue name, slot from (", "  first,", '  second, "slot1@vm"',
                                 ")"])
    assert done.returncode != 0
    assert REFUSED in done.stderr + done.stdout
    assert pool.jobs("ClusterId") == []


def test_a_factory_job_past_the_submit_check_is_materialized_without_steering() -> None:
    """The transform alone, as if the submit requirement let everything through
    (`SUBMIT_REQUIREMENT_GridfairSteering = true`): a factory whose second job names a slot
    materializes that job without it (the transform runs on every materialized job), and
    records that something was written."""
    pool = own_pool([SlotSpec("User1", 132250)], extra_config=[
        *POOL_CONFIG.read_text().splitlines(), "SUBMIT_REQUIREMENT_GridfairSteering = true"])
    with pool:
        done = pool.submit_as(ATTACKER, sleep_job("max_materialize = 1", "hold = True",
                                                  "+GridfairSlot = $(slot)"),
                              queue=["queue name, slot from (", "  first,",
                                     '  second, "slot1@vm"', ")"])
        assert done.returncode == 0, done.stderr
        cluster = first_job(done).split(".")[0]
        pool.run_tool(["condor_rm", f"{cluster}.0"])  # the factory then makes the second
        second = f"{cluster}.1"
        pool.wait_until(lambda: pool.jobs("ProcId", constraint=f"ClusterId == {cluster} && "
                                          "ProcId == 1"), 30)
        assert attribute(pool, second, "GridfairSlot") == "undefined"
        assert int(attribute(pool, second, "GridfairSubmittedSteering")) > 0


def test_the_negotiator_takes_only_a_literal_steering(static_pool: PersonalPool) -> None:
    """Past the submit and edit checks (a queue super user may write anything), a steering
    that is an expression naming the slot is not one: with gridfair's lease held the
    negotiator is not sent the job, while the job steered by the literal gridfair writes
    starts."""
    pool = static_pool
    pool.clear_queue()
    live = backend(pool)
    live.hold_starts(time.time() + 60)
    try:
        crafted, steered = pool.submit([JobSpec(ATTACKER, LONG), JobSpec("User1", LONG)])
        cluster = crafted.split(".")[0]
        pool.run_tool(["condor_qedit", cluster, "GridfairSlot", 'strcat("slot2", "@vm")'])
        snapshot = live.read_snapshot()
        live.allocate(snapshot.jobs_by_id[steered], snapshot.machines_by_name["slot3@vm"])
        assert pool.wait_until(lambda: pool.running_on_nodes().get(steered), 30) == "slot3@vm"
        time.sleep(3 * pool.interval + 2)
        assert crafted not in pool.running()
    finally:
        live.release_starts()
        pool.clear_queue()


def test_a_user_cannot_steer_or_backdate_a_queued_job(clean_queue: PersonalPool) -> None:
    """condor_qedit of the job, of its cluster ad (which its procs inherit), by constraint, by
    another spelling: all refused. The queue date the submitter wrote is replaced by the
    schedd's clock, and cannot be edited either. gridfair (a queue super user) still steers."""
    pool = clean_queue
    before = time.time()
    done = pool.submit_as(ATTACKER, sleep_job("+QDate = 1", "hold = True"))
    assert done.returncode == 0, done.stderr
    job = first_job(done)
    cluster = job.split(".")[0]
    assert before - 5 <= float(attribute(pool, job, "QDate")) <= time.time() + 5
    for edit in ([job, "GridfairSlot", '"slot1@vm"'], [cluster, "GridfairSlot", '"slot1@vm"'],
                 ["-constraint", "true", "GridfairSlot", '"slot1@vm"'],
                 [job, "gridfairslot", '"slot1@vm"'], [job, "QDate", "1"],
                 [job, "GridfairSlotSize", "{64, 1000000, 8}"],
                 [cluster, "gridfairslotsize", "{4}"]):
        edited = pool.run_tool(["condor_qedit", *edit], account=ATTACKER, check=False)
        assert edited.returncode != 0, (edit, edited.stdout)
    assert attribute(pool, job, "GridfairSlot") == "undefined"
    assert float(attribute(pool, job, "QDate")) > before - 5
    live = backend(pool, job_constraint="JobStatus <= 5")
    snapshot = live.read_snapshot()
    [held] = [candidate for candidate in snapshot.jobs if candidate.id == job]
    live.allocate(held, snapshot.machines_by_name["slot1@vm"])
    assert attribute(pool, job, "GridfairSlot") == "slot1@vm"


def test_a_steering_attempt_changes_nothing_about_who_runs_while_gridfair_holds_the_pool(
        static_pool: PersonalPool) -> None:
    """With gridfair's lease held, the attacker's refused edit leaves its job idle on an empty
    pool for three negotiation cycles; the job gridfair steers starts on its slot. (Steering
    to a partitionable slot is checked by the backend's and the daemon's tests.)"""
    pool = static_pool
    pool.clear_queue()
    live = backend(pool)
    live.hold_starts(time.time() + 60)
    try:
        [job] = pool.submit([JobSpec(ATTACKER, LONG)])
        refused = pool.run_tool(["condor_qedit", job, "GridfairSlot", '"slot2@vm"'],
                                account=ATTACKER, check=False)
        assert refused.returncode != 0
        time.sleep(3 * pool.interval + 2)
        assert job not in pool.running()
        [steered] = pool.submit([JobSpec("User1", LONG)])
        snapshot = live.read_snapshot()
        live.allocate(snapshot.jobs_by_id[steered], snapshot.machines_by_name["slot3@vm"])
        assert pool.wait_until(lambda: pool.running_on_nodes().get(steered), 30) == "slot3@vm"
        assert job not in pool.running()
    finally:
        live.release_starts()
    assert pool.wait_until(lambda: job in pool.running(), 30)  # the pool runs it on its own


def test_a_claimed_accounting_group_is_charged_to_the_real_identity(
        clean_queue: PersonalPool, gridfair_cli) -> None:
    """`accounting_group_user = User1` once made anyone User1, the owner of the fastest slots.
    The shipped pool does not validate groups, so gridfair charges the account that submitted,
    and says so."""
    pool = clean_queue
    # More memory than any slot has: it stays idle, on every read.
    done = pool.submit_as(ATTACKER, sleep_job("accounting_group = owners",
                                              "accounting_group_user = User1",
                                              "request_memory = 1000000"))
    assert done.returncode == 0, done.stderr
    job = first_job(done)
    assert attribute(pool, job, "AccountingGroup") == "owners.User1"
    charged = backend(pool).read_snapshot().jobs_by_id[job]
    assert (charged.user, charged.identity) == ("mallory@gridfair.test", "mallory@gridfair.test")
    result = gridfair_cli("shares", "--pool", pool.collector_host, "--uid-domain", UID_DOMAIN)
    assert result.exit_code == 0, result.output
    assert ("  mallory@gridfair.test -> mallory@gridfair.test: owns no slot; accounting "
            "group owners not trusted") in result.output
    rows = {line.split()[0]: line.split() for line in result.output.splitlines()
            if line.startswith(("User1 ", "mallory"))}
    # Running, idle, in flight: its idle job, its own.
    assert rows["mallory@gridfair.test"][-3:] == ["0", "1", "0"]
    assert rows["User1"][-3:] == ["0", "0", "0"]  # User1 has no job


def test_an_ordinary_user_cannot_renew_or_cancel_the_lease(clean_queue: PersonalPool,
                                                           daemon_python: Path) -> None:
    """Only gridfair's account administers the negotiator: a user's own lease (to stop the
    pool) or its own priority factor is refused."""
    pool = clean_queue
    ensure_account(ATTACKER)
    script = ("import htcondor2, sys\n"
              f"collector = htcondor2.Collector({pool.collector_host!r})\n"
              "[negotiator] = collector.query(htcondor2.AdType.Negotiator)\n"
              "htcondor2.RemoteParam(negotiator)['GRIDFAIR_LEASE_UNTIL'] = '9999999999'\n")
    attempt = subprocess.run(as_account(ATTACKER, [str(daemon_python), "-c", script]),
                             env=pool.environment, capture_output=True, text=True, check=False)
    assert attempt.returncode != 0
    assert "Failed to set remote daemon parameter" in attempt.stderr
    # Nor as persistent configuration, the way gridfair sets it (kept across restarts).
    persistent = pool.run_tool(["condor_config_val", "-negotiator", "-set",
                                "GRIDFAIR_LEASE_UNTIL = 9999999999"], account=ATTACKER,
                               check=False)
    assert persistent.returncode != 0, persistent
    assert int(pool.run_tool(["condor_config_val", "-negotiator",
                              "GRIDFAIR_LEASE_UNTIL"]).stdout) < 9999999999
    factor = pool.run_tool(["condor_userprio", "-setfactor", f"{ATTACKER}@{UID_DOMAIN}", "1"],
                           account=ATTACKER, check=False)
    assert factor.returncode != 0 or "denied" in (factor.stdout + factor.stderr).lower()


def set_lease_as(account: str, pool: PersonalPool, python: Path,
                 until: str) -> subprocess.CompletedProcess:
    """`account` setting the lease knob on the negotiator, as gridfair does."""
    ensure_account(account)
    script = ("import htcondor2\n"
              f"collector = htcondor2.Collector({pool.collector_host!r})\n"
              "[negotiator] = collector.query(htcondor2.AdType.Negotiator)\n"
              f"htcondor2.RemoteParam(negotiator)['GRIDFAIR_LEASE_UNTIL'] = {until!r}\n"
              "htcondor2.send_command(negotiator, htcondor2.DaemonCommand.Reconfig)\n")
    return subprocess.run(as_account(account, [str(python), "-c", script]),
                          env=pool.environment, capture_output=True, text=True, check=False)


def test_a_host_based_admin_list_does_not_give_the_lease_to_every_account(
        daemon_python: Path) -> None:
    """A site with `use SECURITY : HOST_BASED` (its ADMINISTRATOR list a host: every account
    there administers the negotiator, and may have it reconfigure): mallory still cannot set
    the lease (earlier settable at ADMINISTRATOR, so anyone could hold or open the pool at
    will); gridfair's account can."""
    pool = own_pool([SlotSpec("User1", 132250)],
                    extra_config=["use SECURITY : HOST_BASED",
                                  *POOL_CONFIG.read_text().splitlines()])
    with pool:
        reconfig = pool.run_tool(["condor_reconfig", "-negotiator"], account=ATTACKER,
                                 check=False)
        assert reconfig.returncode == 0, reconfig.stderr  # the site's list does admit it
        attempt = set_lease_as(ATTACKER, pool, daemon_python, "9999999999")
        assert attempt.returncode != 0
        assert "Failed to set remote daemon parameter" in attempt.stderr
        own = set_lease_as(pool.daemon_account, pool, daemon_python, "1")
        assert own.returncode == 0, own.stderr
        lease = pool.run_tool(["condor_config_val", "-negotiator", "GRIDFAIR_LEASE_UNTIL"])
        assert pool.wait_until(lambda: pool.run_tool(
            ["condor_config_val", "-negotiator", "GRIDFAIR_LEASE_UNTIL"]).stdout.strip() == "1",
            10), lease.stdout


def test_a_job_that_says_it_runs_counts_as_running_only_where_a_slot_says_so(
        clean_queue: PersonalPool) -> None:
    """`demand = "jobs"` reads job ads, whose `JobStatus` and `RemoteHost` their owner may
    edit: mallory's idle job claiming to run on an owner's slot is not counted as running
    there (nor anywhere), and the slot stays free; skipped with the reason."""
    pool = clean_queue
    done = pool.submit_as(ATTACKER, sleep_job("hold = True"))
    assert done.returncode == 0, done.stderr
    job = first_job(done)
    for name, value in (("JobStatus", "2"), ("RemoteHost", '"slot1@vm"')):
        edited = pool.run_tool(["condor_qedit", job, name, value], account=ATTACKER,
                               check=False)
        assert edited.returncode == 0, (name, edited.stderr)
    assert attribute(pool, job, "JobStatus") == "2"
    snapshot = backend(pool, demand="jobs").read_snapshot()
    assert job not in snapshot.jobs_by_id
    assert [skip.reason for skip in snapshot.skipped if skip.name == job] == [
        "its ad says it runs, and no slot's ad names it: not counted as running"]
    assert snapshot.machines_by_name["slot1@vm"].running_job is None


def test_a_users_own_schedd_cannot_pass_its_jobs_off_as_an_owners(tmp_path: Path) -> None:
    """A user starts a schedd of their own that claims another UID domain and names its jobs'
    owner as they like (`User1@evil.example`). A pool that lets any account advertise a schedd
    (ALLOW_ADVERTISE_SCHEDD = *) lists it, and gridfair reads its jobs: they are charged to
    `User1@evil.example`, which owns nothing, not to User1. (The shipped configuration leaves
    HTCondor's default, which refuses the advertisement: checked first.)"""
    attacker_dir = Path("/var/tmp") / f"gridfair-rogue-{time.monotonic_ns()}"
    for admits in (False, True):
        extra = ["ALLOW_ADVERTISE_SCHEDD = *"] if admits else []
        pool = own_pool([SlotSpec("User1", 132250)],
                        extra_config=[*POOL_CONFIG.read_text().splitlines(), *extra])
        with pool, RogueSchedd(pool, attacker_dir) as rogue:
            if not admits:  # refused by the pool: the collector says so, and lists no rogue
                pool.wait_until(rogue.refused, 20)
                assert not rogue.listed(timeout=0)
                continue
            assert rogue.listed()
            job = rogue.submit_as_user("User1")
            snapshot = backend(pool).read_snapshot()
            [charged] = [candidate for candidate in snapshot.jobs if candidate.id == job]
            assert charged.user == "User1@evil.example"
            [charge] = [c for c in snapshot.charges if c.identity == "User1@evil.example"]
            assert not charge.mapped
            assert charge.rule == ("owns no slot: evil.example is not the pool's UID_DOMAIN "
                                   "gridfair.test")


class RogueSchedd:
    """A schedd an ordinary account runs by itself (a personal HTCondor of one daemon),
    advertising to the pool's collector with UID_DOMAIN evil.example; it lets its own account
    claim any user name (CLAIMTOBE), so its jobs name whatever owner it likes."""

    def __init__(self, pool: PersonalPool, directory: Path) -> None:
        self.pool = pool
        self.directory = directory
        self.config = directory / "condor_config"
        self.master: subprocess.Popen | None = None

    def __enter__(self) -> RogueSchedd:
        ensure_account(ATTACKER)
        local = self.directory / "local"
        for name in ("log", "spool", "execute", "lock", "run"):
            (local / name).mkdir(parents=True, exist_ok=True)
        self.config.write_text("\n".join([
            f"RELEASE_DIR = {self.pool.install}", f"LOCAL_DIR = {local}",
            "LOG = $(LOCAL_DIR)/log", "SPOOL = $(LOCAL_DIR)/spool",
            "EXECUTE = $(LOCAL_DIR)/execute", "LOCK = $(LOCAL_DIR)/lock",
            "RUN = $(LOCAL_DIR)/run", "DAEMON_LIST = MASTER, SCHEDD",
            "CONDOR_HOST = 127.0.0.1", "NETWORK_INTERFACE = 127.0.0.1",
            f"COLLECTOR_HOST = {self.pool.collector_host}", "USE_SHARED_PORT = False",
            "UID_DOMAIN = evil.example", "SCHEDD_NAME = rogue", "SCHEDD_INTERVAL = 2",
            "SEC_DEFAULT_AUTHENTICATION_METHODS = FS, CLAIMTOBE",
            "SEC_CLIENT_AUTHENTICATION_METHODS = FS",
            "ALLOW_READ = *", "ALLOW_WRITE = *", "QUEUE_ALL_USERS_TRUSTED = True",
        ]) + "\n")
        subprocess.run(["chown", "-R", f"{ATTACKER}:{ATTACKER}", str(self.directory)],
                       check=True)
        self.master = subprocess.Popen(
            as_account(ATTACKER, [self.pool.tool("condor_master"), "-f"]),
            env={"CONDOR_CONFIG": str(self.config), "PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        return self

    def refused(self) -> bool:
        """The pool's collector refused the rogue schedd's advertisement (its log says so)."""
        log = (self.pool.directory / "local" / "log" / "CollectorLog").read_text()
        return "UPDATE_SCHEDD_AD), access level ADVERTISE_SCHEDD" in log and (
            f"PERMISSION DENIED to {ATTACKER}@" in log)

    def listed(self, timeout: float = 20) -> bool:
        try:
            return bool(self.pool.wait_until(lambda: "rogue@" in self.pool.run_tool(
                ["condor_status", "-schedd", "-af", "Name"]).stdout, timeout))
        except TimeoutError:
            return False

    def submit_as_user(self, user: str) -> str:
        """A job submitted to the rogue schedd by its account, claiming to be `user`."""
        submit = self.directory / "job.sub"
        submit.write_text("universe = vanilla\nexecutable = /bin/sleep\narguments = 600\n"
                          "should_transfer_files = NO\nqueue\n")
        submit.chmod(0o644)
        # Listed by the collector, the schedd may still not be found by name for a moment
        # (seen once in a full run): a few tries.
        for _ in range(10):
            done = self._submit(submit, user)
            if done.returncode == 0 or "Can't find address" not in done.stderr:
                break
            time.sleep(1)
        assert done.returncode == 0, done.stderr
        return first_job(done)

    def _submit(self, submit: Path, user: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            as_account(ATTACKER, [self.pool.tool("condor_submit"), "-terse", "-name",
                                  "rogue@vm", str(submit)]),
            env={"CONDOR_CONFIG": str(self.config), "PATH": "/usr/bin:/bin",
                 "_CONDOR_SEC_CLIENT_AUTHENTICATION_METHODS": "CLAIMTOBE",
                 "_CONDOR_SEC_CLAIMTOBE_USER": user,
                 "_CONDOR_SEC_CLAIMTOBE_INCLUDE_DOMAIN": "false"},
            capture_output=True, text=True, check=False,
            cwd=self.directory)  # its own: the checkout may lie under a 0700 directory

    def __exit__(self, *exc_info: object) -> None:
        if self.master is not None:
            subprocess.run(["pkill", "-KILL", "-s", str(self.master.pid)], check=False)
            self.master.wait()
        subprocess.run(["rm", "-rf", str(self.directory)], check=False)


GROUPS_CONFIG = POOL_CONFIG.with_name("htcondor-accounting-groups.config")


def test_a_pool_that_validates_groups_refuses_a_borrowed_one_and_gridfair_trusts_it(
        tmp_path: Path) -> None:
    """configs/htcondor-accounting-groups.config with a map giving each owner's account its
    own group and any other account `guests`: an account asking for an owner's group is
    refused, a group cannot be edited afterwards, and gridfair told to trust groups charges
    each job to the group the schedd assigned."""
    group_map = Path("/var/tmp") / f"gridfair-groups-{time.monotonic_ns()}.map"
    # The pool first: where none can run, the test skips before it writes anything.
    pool = own_pool([SlotSpec("User1", 132250), SlotSpec("User2", 54760)], extra_config=[
        *POOL_CONFIG.read_text().splitlines(), f"GRIDFAIR_GROUP_MAP = {group_map}",
        *GROUPS_CONFIG.read_text().splitlines()])
    group_map.write_text("* User1 User1\n* User2 User2\n* /.*/ guests\n")
    group_map.chmod(0o644)
    try:
        with pool:
            refused = pool.submit_as(ATTACKER, sleep_job("accounting_group = User1",
                                                         "hold = True"))
            assert refused.returncode != 0
            assert "Permission denied setting accounting_group to User1" in refused.stderr
            own = first_job(pool.submit_as("User1", sleep_job("hold = True")))
            guest = first_job(pool.submit_as(ATTACKER, sleep_job("hold = True")))
            assert attribute(pool, guest, "AccountingGroup") == f"guests.{ATTACKER}"
            edited = pool.run_tool(["condor_qedit", guest, "AcctGroup", '"User1"'],
                                   account=ATTACKER, check=False)
            assert edited.returncode != 0
            live = backend(pool, job_constraint="JobStatus <= 5",
                           submitters=SubmitterMap(UID_DOMAIN, trust_groups=True))
            snapshot = live.read_snapshot()
    finally:
        group_map.unlink()
    jobs = snapshot.jobs_by_id
    assert (jobs[own].user, jobs[own].identity) == ("User1", "group User1")
    assert (jobs[guest].user, jobs[guest].identity) == ("group guests", "group guests")
    charges = {charge.identity: charge for charge in snapshot.charges}
    assert charges["group guests"].reason == ("accounting group (trusted: the pool validates "
                                              "groups); owns no slot")


def run_count(pool: PersonalPool, job: str) -> int:
    value = attribute(pool, job, "JobRunCount")
    return 0 if value == "undefined" else int(value)


def idle_again(pool: PersonalPool, job: str, how: str) -> None:
    """The job, started once, returns to idle as its owner makes it: it exits and is kept
    (`on_exit_remove = false`), or its owner vacates it, or holds and releases it."""
    if how == "vacate":
        pool.run_tool(["condor_vacate_job", job], account=ATTACKER)
    elif how == "hold-release":
        pool.run_tool(["condor_hold", job], account=ATTACKER)
        pool.wait_until(lambda: attribute(pool, job, "JobStatus") == "5", 20)
        pool.run_tool(["condor_release", job], account=ATTACKER)
    assert pool.wait_until(lambda: attribute(pool, job, "JobStatus") == "1", 30)


@pytest.mark.parametrize(("layout", "how"), [
    ("static", "exit"), ("static", "vacate"), ("static", "hold-release"),
    ("partitionable", "exit")])
def test_a_steering_authorizes_one_start(request: pytest.FixtureRequest, layout: str,
                                         how: str) -> None:
    """Issue 43, attack 3: a job gridfair steered starts once on its slot; when it returns to
    idle (its program exits and the job is kept, its owner vacates it, or holds and releases
    it) the same steering starts it nowhere for three negotiation cycles while gridfair holds
    its lease, and the owner cannot write the run count back. A new decision starts it again.
    (Before: the job restarted on its old steering, 8 times in 180 s.)"""
    pool = request.getfixturevalue(f"{layout}_pool")
    pool.clear_queue()
    live = backend(pool)
    live.hold_starts(time.time() + 120)
    try:
        arguments = ["arguments = 3", "on_exit_remove = false"] if how == "exit" else []
        done = pool.submit_as(ATTACKER, ["executable = /bin/sleep", *(arguments or
                                                                       ["arguments = 600"])])
        assert done.returncode == 0, done.stderr
        job = first_job(done)
        snapshot = live.read_snapshot()
        slot = snapshot.machines_by_name["slot3@vm"]
        live.allocate(snapshot.jobs_by_id[job], slot)
        live.actions_done()
        assert pool.wait_until(lambda: job in pool.running(), 30)
        assert run_count(pool, job) == 1
        idle_again(pool, job, how)
        edited = pool.run_tool(["condor_qedit", job, "JobRunCount", "0"], account=ATTACKER,
                               check=False)
        assert edited.returncode != 0
        time.sleep(3 * pool.interval + 2)
        assert job not in pool.running()
        assert run_count(pool, job) == 1
        again = live.read_snapshot().jobs_by_id[job]
        assert again.run_count == 1
        live.allocate(again, slot)
        live.actions_done()
        assert pool.wait_until(lambda: run_count(pool, job) == 2, 30)
    finally:
        live.release_starts()
        pool.clear_queue()


AFTER_STEERING = ("exit-kept", "vacate", "hold-release", "remove-resubmit", "edit-requirements",
                  "qedit-run-count")


def test_generated_sequences_after_steering_never_start_a_job_again(
        static_pool: PersonalPool) -> None:
    """Issue 43: sequences over time, as an ordinary account would play them once gridfair
    has steered its jobs and they started: each job then returns to idle its own way (kept on
    exit, vacated, held and released, removed and submitted again, its Requirements edited,
    its run count edited), in a generated order (seeded: the same every run). For three
    negotiation cycles after, with gridfair's lease held and no new decision, no job starts
    again and no new job starts."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    pool = static_pool
    live = backend(pool)

    @settings(max_examples=2, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(moves=st.lists(st.sampled_from(AFTER_STEERING), min_size=3, max_size=4))
    def sequence(moves: list[str]) -> None:
        pool.clear_queue()
        live.hold_starts(time.time() + 120)
        try:
            jobs = []
            for move in moves:
                arguments = (["arguments = 3", "on_exit_remove = false"] if move == "exit-kept"
                             else ["arguments = 600"])
                done = pool.submit_as(ATTACKER, ["executable = /bin/sleep", *arguments])
                assert done.returncode == 0, done.stderr
                jobs.append(first_job(done))
            snapshot = live.read_snapshot()
            for job, slot in zip(jobs, ("slot1@vm", "slot2@vm", "slot3@vm", "slot4@vm"),
                                 strict=False):
                live.allocate(snapshot.jobs_by_id[job], snapshot.machines_by_name[slot])
            live.actions_done()
            assert pool.wait_until(lambda: all(run_count(pool, job) >= 1 for job in jobs), 30)
            fresh = []
            for job, move in zip(jobs, moves, strict=True):
                if move in ("vacate", "hold-release"):
                    idle_again(pool, job, move)
                elif move == "remove-resubmit":
                    pool.run_tool(["condor_rm", job], account=ATTACKER)
                    fresh.append(first_job(pool.submit_as(ATTACKER, sleep_job())))
                elif move == "edit-requirements":
                    pool.run_tool(["condor_qedit", job, "Requirements",
                                   "MY.GridfairSlot =!= undefined"], account=ATTACKER)
                    pool.run_tool(["condor_vacate_job", job], account=ATTACKER)
                elif move == "qedit-run-count":
                    edited = pool.run_tool(["condor_qedit", job, "JobRunCount", "0"],
                                           account=ATTACKER, check=False)
                    assert edited.returncode != 0
                    pool.run_tool(["condor_vacate_job", job], account=ATTACKER)
            deadline = time.monotonic() + 3 * pool.interval + 2
            while time.monotonic() < deadline:
                running = pool.running()
                assert not set(fresh) & set(running), (moves, fresh, running)
                for job, move in zip(jobs, moves, strict=True):
                    if move != "remove-resubmit":
                        assert run_count(pool, job) <= 1, (moves, job, move)
                time.sleep(0.5)
        finally:
            live.release_starts()
            pool.clear_queue()

    sequence()


def test_an_owners_edit_of_an_idle_job_is_not_hidden_from_a_steady_read(
        clean_queue: PersonalPool) -> None:
    """A steady read fetches an idle job's row only when its AutoClusterId, JobRunCount or
    EnteredCurrentStatus moved (`backends/htcondor/kept_idle.py`). The schedd keeps a job's
    AutoClusterId until an attribute its AutoClusterAttrs names is edited: both are protected,
    so an owner cannot keep the id through an edit of its request. The owner's edits of its
    request, Requirements and EnteredCurrentStatus are seen by the next steady read as a full
    read sees them."""
    pool = clean_queue
    done = pool.submit_as(ATTACKER, sleep_job('requirements = TARGET.Name == "nowhere"'),
                          count=2)
    assert done.returncode == 0, done.stderr
    job = first_job(done)
    steady = backend(pool, full_read_every=0)

    def idle(live: HTCondorBackend) -> dict[str, tuple]:
        return {found.id: (found.request_cpus, found.request_memory, found.run_count,
                           found.qdate, str(found.ad.lookup("Requirements")))
                for found in live.read_snapshot().jobs if found.status is JobStatus.IDLE}

    assert len(idle(steady)) == 2
    # Unprotected, the first keeps the job's AutoClusterId through the edits below: every
    # read then says it asks for 1 cpu (seen before the protection).
    refused = [pool.run_tool(["condor_qedit", job, *edit], account=ATTACKER, check=False)
               for edit in (["AutoClusterAttrs", '""'], ["AutoClusterId", "1"])]
    for edit in (["RequestCpus", "2"], ["Requirements", 'TARGET.Name == "elsewhere"'],
                 ["EnteredCurrentStatus", "1"], ["RequestMemory", "4"]):
        edited = pool.run_tool(["condor_qedit", job, *edit], account=ATTACKER, check=False)
        assert edited.returncode == 0, (edit, edited.stderr)
        assert idle(steady) == idle(backend(pool, full_read_every=1)), edit
    assert idle(steady)[job][:2] == (2, 4)
    assert [done.returncode != 0 for done in refused] == [True, True]
