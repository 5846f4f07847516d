"""Running a sweep's simulations as jobs on the researcher's own HTCondor pool.

The runs to do are submitted as one cluster, one job per run, through the bindings
(`htcondor2.Schedd.submit` with item data: the run's key and its input files). Each job gets
its run file, its input files and (optionally) the wheels of gridfair and its dependencies
through HTCondor's file transfer, so no shared file system is assumed; it runs the simulation
with `python -m gridfair.experiments.pool_job` and sends back a result file. Outcomes are read
from the cluster's job event log as jobs end, and handed to the sink, which stores them in the
same results DB as the other backends.

Not DAGMan: the results DB already records which runs are done and `--resume` submits the
rest, which is what a rescue DAG would add; a final gathering node would need gridfair and the
DB on an execute node. One cluster keeps every run a plain job of the researcher's, accounted
by the pool's fair share, and nothing needs an inbound port.

Everything is kept in a staging directory beside the DB (`runs/`, `inputs/`, `results/`,
`logs/`, the event log, and `clusters/`: which run each job of each cluster is), so a command
that stopped (Ctrl-C, a lost connection) is picked up by the next one: the jobs of its runs
still in the queue are waited for, those that ended meanwhile are read from the event log, and
only the rest is submitted again.

How a job fails is its run's error: held (the hold reason; the job is then removed, so that
`--resume` submits it again), removed (the reason given), or ended with a non-zero exit code
(the last lines of its stderr).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gridfair import __version__
from gridfair.errors import InputError
from gridfair.experiments.pool_job import read_result, write_run_file
from gridfair.experiments.runner import OutcomeSink
from gridfair.experiments.runs import RunOutcome, RunSpec

if TYPE_CHECKING:  # the bindings are imported when a sweep goes to a pool
    from htcondor2 import JobEventLog, Schedd

#: The job's program: a POSIX shell script, so that it needs nothing of gridfair to start.
#: $1: the run's key; $2: the Python to run it with; $3, when given: the gridfair to install
#: (`gridfair==VERSION`) in a venv the job first makes with that Python, from the wheels
#: transferred with it (no network needed).
JOB_SCRIPT = """#!/bin/sh
set -u
python=$2
if [ -n "${3:-}" ]; then
    "$python" -m venv env || exit 3
    env/bin/python -m pip install --quiet --no-index --find-links . "$3" >pip.log 2>&1 \\
        || { cat pip.log >&2; exit 4; }
    python=env/bin/python
fi
"$python" -m gridfair.experiments.pool_job "$1.json" result.json
status=$?
# An empty result rather than none: a missing output file would hold the job, hiding its exit.
[ -e result.json ] || : > result.json
exit $status
"""
#: Lines of a failed job's stderr quoted in its run's error.
STDERR_LINES = 5
#: Seconds between looks at the event log, and between progress reports from the queue.
POLL_EVERY, STATUS_EVERY = 1.0, 10.0
#: HTCondor's job states, as `JobStatus` numbers them.
JOB_STATES = {1: "idle", 2: "running", 3: "removed", 4: "completed", 5: "held",
              6: "transferring output", 7: "suspended"}

#: A job: (cluster, proc).
JobId = tuple[int, int]


@dataclass(frozen=True)
class JobEnvironment:
    """How a job gets gridfair where it runs: `python` is an interpreter there; with
    `wheels` (a directory of gridfair's wheel and its dependencies'), each job makes a venv of
    its own with it and installs them, offline; without, `python` must already have gridfair
    (a venv made once on the execute nodes)."""

    python: str
    wheels: Path | None = None

    def check(self) -> None:
        if self.wheels is None:
            return
        if not self.wheels.is_dir():
            raise InputError("not a directory of wheels", source=str(self.wheels))
        if not any(self.wheels.glob(f"gridfair-{__version__}-*.whl")):
            raise InputError(f"no wheel of gridfair {__version__} (make one with "
                             f"`pip wheel --wheel-dir {self.wheels} gridfair=={__version__}`)",
                             source=str(self.wheels))


@dataclass(frozen=True)
class PoolTarget:
    """Where the jobs go and what they ask for."""

    environment: JobEnvironment
    collector: str | None = None  # default: the HTCondor configuration's
    schedd: str | None = None  # default: the collector's (or the configuration's) schedd
    request_memory: int | None = None  # MB; default: HTCondor's


def run_on_htcondor(specs: Sequence[RunSpec], sink: OutcomeSink, staging: Path,
                    target: PoolTarget, status: Callable[[str], None] | None = None) -> None:
    """Run `specs` as jobs (resuming the jobs of an earlier command in `staging`), and hand
    each outcome to `sink` as its job ends."""
    import htcondor2

    target.environment.check()
    schedd = _schedd(target)
    sweep = _Staging(staging)
    wanted = {spec.key: spec for spec in specs}
    pending = {job: key for key, job in sweep.latest_jobs().items()
               if key in wanted and job not in sweep.gathered}
    log = htcondor2.JobEventLog(str(sweep.event_log))

    gathered: set[str] = set()

    def gather(ended: dict[JobId, RunOutcome]) -> None:
        for job, outcome in ended.items():
            key = pending.pop(job)
            sink(wanted[key], outcome)
            sweep.mark_gathered(job)
            gathered.add(key)

    try:
        # Jobs of an earlier command: those that ended meanwhile are gathered, those still
        # queued waited for, and those neither in the log nor queued run again. The log is
        # read again after the queue: a job's end is logged before it leaves the queue, so
        # one that left meanwhile is in the log by then.
        gather(_read_events(log, pending, sweep, schedd))
        queued = _queued(schedd, pending)
        gather(_read_events(log, pending, sweep, schedd))
        for job in set(pending) - queued:
            del pending[job]
        waiting = set(pending.values())
        todo = [spec for spec in specs if spec.key not in waiting | gathered]
        if todo:
            cluster = _submit(schedd, todo, sweep, target)
            pending.update({(cluster, proc): spec.key for proc, spec in enumerate(todo)})
        next_status = 0.0
        while pending:
            gather(_read_events(log, pending, sweep, schedd))
            if status is not None and pending and time.monotonic() >= next_status:
                status(_queue_summary(schedd, pending))
                next_status = time.monotonic() + STATUS_EVERY
            if pending:
                time.sleep(POLL_EVERY)
    except htcondor2.HTCondorException as error:
        raise InputError(f"HTCondor: {error} (jobs already queued are gathered by "
                         "--resume)") from None


class _Staging:
    """The sweep's directory of job files beside its DB."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        for name in ("runs", "inputs", "results", "logs", "clusters"):
            (directory / name).mkdir(parents=True, exist_ok=True)
        self.event_log = directory / "events.log"
        self.event_log.touch()
        self.script = directory / "gridfair-run.sh"
        self.script.write_text(JOB_SCRIPT, encoding="utf-8")
        self.script.chmod(0o755)
        self._gathered_file = directory / "gathered"
        self.gathered: set[JobId] = set()
        if self._gathered_file.exists():
            for line in self._gathered_file.read_text().split():
                cluster, _, proc = line.partition(".")
                self.gathered.add((int(cluster), int(proc)))

    def latest_jobs(self) -> dict[str, JobId]:
        """The last job submitted for each run."""
        latest: dict[str, JobId] = {}
        for path in sorted(self.directory.glob("clusters/*.json"), key=lambda p: int(p.stem)):
            for proc, key in enumerate(json.loads(path.read_text(encoding="utf-8"))):
                latest[key] = (int(path.stem), proc)
        return latest

    def record_cluster(self, cluster: int, keys: Sequence[str]) -> None:
        (self.directory / "clusters" / f"{cluster}.json").write_text(json.dumps(list(keys)))

    def mark_gathered(self, job: JobId) -> None:
        """After its outcome is stored: a later command does not store it again."""
        self.gathered.add(job)
        with self._gathered_file.open("a") as gathered:
            gathered.write(f"{job[0]}.{job[1]}\n")

    def stage_inputs(self, spec: RunSpec) -> tuple[dict[str, str], list[str]]:
        """The run's parameters as its job sees them, and the staged inputs to transfer: each
        input file is linked (or copied) into a directory of its own, named after its path,
        so two files of the same name do not collide in the job's sandbox."""
        params = dict(spec.params)
        transfer = []
        for name, path in spec.input_files().items():
            digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
            folder = self.directory / "inputs" / digest
            staged = folder / Path(path).name
            if not staged.exists():
                folder.mkdir(exist_ok=True)
                try:
                    os.link(path, staged)
                except OSError:  # another file system, or links not allowed
                    shutil.copyfile(path, staged)
            params[name] = f"{digest}/{staged.name}"
            transfer.append(f"inputs/{digest}")
        return params, transfer


def _schedd(target: PoolTarget) -> Schedd:
    import htcondor2

    try:
        if target.collector is None and target.schedd is None:
            return htcondor2.Schedd()
        collector = htcondor2.Collector(target.collector) if target.collector else (
            htcondor2.Collector())
        location = (collector.locate(htcondor2.DaemonType.Schedd, target.schedd)
                    if target.schedd else collector.locate(htcondor2.DaemonType.Schedd))
        return htcondor2.Schedd(location)
    except (htcondor2.HTCondorException, OSError, RuntimeError, ValueError) as error:
        where = f" {target.schedd!r}" if target.schedd else ""
        pool = f" of the pool at {target.collector}" if target.collector else ""
        raise InputError(f"cannot reach the schedd{where}{pool}: {error}") from None


def _submit(schedd: Schedd, specs: Sequence[RunSpec], sweep: _Staging, target: PoolTarget) -> int:
    """Submit `specs` as one cluster, proc N running specs[N]; the cluster's id."""
    import htcondor2

    environment = target.environment
    items = []
    for spec in specs:
        params, inputs = sweep.stage_inputs(spec)
        write_run_file(sweep.directory / "runs" / f"{spec.key}.json", params)
        items.append({"key": spec.key, "inputs": "".join(f", {path}" for path in inputs)})
    wheels = f", {environment.wheels.resolve()}/" if environment.wheels else ""
    description = {
        "universe": "vanilla",
        "initialdir": str(sweep.directory.resolve()),
        "executable": str(sweep.script.resolve()),
        "arguments": _arguments(["$(key)", environment.python,
                                 *([f"gridfair=={__version__}"] if wheels else [])]),
        "should_transfer_files": "YES",
        "when_to_transfer_output": "ON_EXIT",
        "transfer_input_files": f"runs/$(key).json$(inputs){wheels}",
        "transfer_output_files": "result.json",
        "transfer_output_remaps": '"result.json = results/$(key).json"',
        "output": "logs/$(key).out",
        "error": "logs/$(key).err",
        "log": str(sweep.event_log.resolve()),
        "request_cpus": "1",
        "JobBatchName": "gridfair-sweep-" + re.sub(r"[^\w.-]", "_", sweep.directory.stem),
        "+GridfairRun": '"$(key)"',
    }
    if target.request_memory is not None:
        description["request_memory"] = str(target.request_memory)
    result = schedd.submit(htcondor2.Submit(description), itemdata=iter(items))
    cluster = result.cluster()
    sweep.record_cluster(cluster, [spec.key for spec in specs])
    return cluster


def _arguments(arguments: Sequence[str]) -> str:
    """`arguments` in the submit language's quoted syntax: a path may hold spaces or quotes."""
    quoted = ("'" + argument.replace("'", "''").replace('"', '""') + "'"
              for argument in arguments)
    return '"' + " ".join(quoted) + '"'


def _read_events(log: JobEventLog, pending: Mapping[JobId, str], sweep: _Staging,
                 schedd: Schedd) -> dict[JobId, RunOutcome]:
    """The outcomes of the pending jobs whose end the event log shows since the last read;
    held jobs are removed from the queue (their run is recorded as failed)."""
    import htcondor2

    kinds = {htcondor2.JobEventType.JOB_TERMINATED: "terminated",
             htcondor2.JobEventType.JOB_HELD: "held",
             htcondor2.JobEventType.JOB_ABORTED: "removed"}
    ended: dict[JobId, RunOutcome] = {}
    for event in log.events(stop_after=0):
        job = (event.cluster, event.proc)
        kind = kinds.get(event.type)
        if kind is None or job not in pending or job in ended:
            continue
        key = pending[job]
        ended[job] = job_outcome(key, kind, dict(event.items()),
                                 sweep.directory / "results" / f"{key}.json",
                                 sweep.directory / "logs" / f"{key}.err")
        if kind == "held":
            schedd.act(htcondor2.JobAction.Remove, [f"{job[0]}.{job[1]}"],
                       "gridfair sweep: recorded as failed; --resume submits it again")
    return ended


def job_outcome(key: str, kind: str, event: Mapping[str, object], result_file: Path,
                stderr_file: Path) -> RunOutcome:
    """A run's outcome from the event that ended its job (`terminated`, `held`, `removed`)."""
    if kind == "held":
        return RunOutcome(key, False, error=f"job held: {event.get('HoldReason', '?')}")
    if kind == "removed":
        return RunOutcome(key, False, error="job removed from the queue: "
                          f"{event.get('Reason', 'no reason given')}")
    if not event.get("TerminatedNormally", True):
        return RunOutcome(key, False, error=f"job killed by signal "
                          f"{event.get('TerminatedBySignal', '?')}{_stderr_tail(stderr_file)}")
    if event.get("ReturnValue", 0) != 0:
        return RunOutcome(key, False, error=f"job exited with code {event.get('ReturnValue')}"
                          f"{_stderr_tail(stderr_file)}")
    return read_result(key, result_file)


def _stderr_tail(stderr_file: Path) -> str:
    try:
        lines = stderr_file.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return (": " + "\n".join(lines[-STDERR_LINES:])) if lines else ""


def _queued(schedd: Schedd, pending: Mapping[JobId, str]) -> set[JobId]:
    """Which of `pending` are still in the queue."""
    clusters = sorted({cluster for cluster, _ in pending})
    if not clusters:
        return set()
    rows = schedd.query(constraint=" || ".join(f"ClusterId == {c}" for c in clusters),
                        projection=["ClusterId", "ProcId"])
    return {(row["ClusterId"], row["ProcId"]) for row in rows} & set(pending)


def _queue_summary(schedd: Schedd, pending: Mapping[JobId, str]) -> str:
    """'N idle, M running, ...' over the pending jobs, from the schedd's queue."""
    clusters = sorted({cluster for cluster, _ in pending})
    rows = schedd.query(constraint=" || ".join(f"ClusterId == {c}" for c in clusters),
                        projection=["ClusterId", "ProcId", "JobStatus"])
    counts: dict[str, int] = {}
    for row in rows:
        if (row["ClusterId"], row["ProcId"]) in pending:
            state = JOB_STATES.get(row["JobStatus"], str(row["JobStatus"]))
            counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{count} {state}" for state, count in sorted(counts.items())) or (
        "no job queued")
