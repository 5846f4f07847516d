"""What a flood of jobs whose ads vary costs the read and the cycle (issue 31: a user who can
make gridfair slow can switch it off).

One synthetic pool (`tests.harness.synthetic`: static slots of varied power shared by
`--owners` owners, 90 % of them running a job of their users) and the rest of `--jobs` jobs
idle, submitted at once by one account: a flood, as one submit file makes it. Written as
`condor_status -long` / `condor_q -long` dumps, in four variants that differ only in what
the flood's submit file makes each job's ad say:
- `uniform`: one accounting group for all (the baseline);
- `groups`: `accounting_group = g$(Process)`, a group per job;
- `requirements`: a Requirements expression per job (one of the usual ones `&&` a clause
  reading a slot attribute named after the job, `TARGET.Flood<N> =?= undefined`: every job
  reads an attribute no other job reads);
- `owners`: a submitter per idle job (as many accounts as jobs: the worst an administrator could
  let happen, or a pool whose collector admits any schedd).

Each variant runs in its own process on its own dumps:
- `read`: the snapshot read as the daemon does it: the dumps read (the `files` backend's
  `AdDumps`) and every job charged to an owner (`charge_snapshot`, as the `htcondor` backend
  charges the jobs it queries; groups not trusted, so each identity's groups are listed);
- `cycle`: a first daemon cycle of the `files` backend on the same dumps (read, reconcile,
  lay out, negotiate, journal, write the store).
Wall and CPU seconds (this process, all threads), each the best of `--repeat` runs (each a
fresh process), and the ratio of each to the `uniform` run of the same command (target: every
ratio <= 1.5; judged on CPU seconds, which the load of a shared machine moves less than wall
seconds). The longest charge reason is printed too (a bounded text whatever the flood). The
load average is printed before and after.

    .venv/bin/python bench/adversarial_read.py [--jobs 20000] [--slots 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import classad2  # noqa: E402

from gridfair.classads.reader import AdFormat  # noqa: E402
from gridfair.classads.submitters import SubmitterMap, charge_snapshot  # noqa: E402
from gridfair.classads.views import AdConfig  # noqa: E402
from gridfair.daemon.backends.files import AdDumps, FilesBackend  # noqa: E402
from gridfair.daemon.config import validate  # noqa: E402
from gridfair.daemon.cycle import CycleRunner  # noqa: E402
from gridfair.daemon.store import Store  # noqa: E402
from tests.harness.synthetic import job_ads, machine_ads, write_ads  # noqa: E402

VARIANTS = ("uniform", "groups", "requirements", "owners")
TARGET_RATIO = 1.5
TIMES = ("read_seconds", "cycle_seconds", "read_cpu_seconds", "cycle_cpu_seconds")


def flood(variant: str, slots: int, jobs: int, owners: int) -> tuple[list, list]:
    """The slot ads and the job ads of `variant`: the running jobs of the synthetic pool's
    users, and its idle jobs as one flood, submitted by one account (`user0@grid`) or, in
    `owners`, by an account each."""
    machines = machine_ads(slots, owners)
    running = slots * 9 // 10
    ads = job_ads(jobs, owners, machines, running)
    for index, ad in enumerate(ads):
        owner = ad["Owner"] if index < running else "user0"
        if variant == "owners" and index >= running:
            owner = f"flood{index}"
        ad["Owner"], ad["User"] = owner, f"{owner}@grid"
        group = f"g{index}" if variant == "groups" else "g"
        ad["AcctGroup"], ad["AccountingGroup"] = group, f"{group}.{owner}"
        if variant == "requirements":
            ad["Requirements"] = classad2.ExprTree(
                f'({ad.lookup("Requirements")}) && (TARGET.Flood{index} =?= undefined)')
    for machine, job in zip(machines, ads, strict=False):  # slot i runs job i
        if "RemoteUser" in machine:  # its user, as the slot reports it
            machine["AccountingGroup"] = job["AccountingGroup"]
    return machines, ads


def run_variant(args: argparse.Namespace) -> dict[str, object]:
    machines, ads = flood(args.variant, args.slots, args.jobs, args.owners)
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        pool = directory / "pool"
        pool.mkdir()
        write_ads(pool / "pool.status", machines, AdFormat.OLD)
        write_ads(pool / "pool.queue", ads, AdFormat.OLD)
        del machines, ads
        start, cpu = time.perf_counter(), time.process_time()
        snapshot = AdDumps([pool], [pool], AdConfig()).read()
        charged = charge_snapshot(snapshot, SubmitterMap("grid"))
        read, read_cpu = time.perf_counter() - start, time.process_time() - cpu
        config = validate({"daemon": {"store": "state.db", "query_timeout": 3600.0},
                           "backend": {"kind": "files",
                                       "files": {"directory": "pool", "actions": "a.jsonl"}},
                           "safety": {"max_snapshot_age": 1e12, "min_runtime": 0.0}},
                          base=directory)
        runner = CycleRunner(config, FilesBackend(pool, directory / "a.jsonl"),
                             Store(directory / "state.db"))
        start, cpu = time.perf_counter(), time.process_time()
        report = runner.run()
        cycle, cycle_cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"read_seconds": round(read, 3), "cycle_seconds": round(cycle, 3),
            "read_cpu_seconds": round(read_cpu, 3), "cycle_cpu_seconds": round(cycle_cpu, 3),
            "outcome": report.outcome, "decisions": report.counts.get("decisions", 0),
            "jobs_read": len(snapshot.jobs), "identities": len(charged.charges),
            "longest_reason_chars": max((len(c.reason) for c in charged.charges), default=0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--slots", type=int, default=2000)
    parser.add_argument("--owners", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant, the best "
                        "kept (default 3)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, among {', '.join(VARIANTS)} (the first is the "
                        "baseline of the ratios)")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.slots < 1 or args.jobs < args.slots or args.owners < 1 or args.repeat < 1:
        parser.error("need 1 <= --slots <= --jobs, --owners >= 1 and --repeat >= 1")
    variants = [name for name in args.variants.split(",") if name]
    if not variants or any(name not in VARIANTS for name in variants):
        parser.error(f"--variants takes a comma-separated list of {', '.join(VARIANTS)}")
    if args.variant:
        print(json.dumps(run_variant(args)))
        return
    result: dict[str, object] = {"jobs": args.jobs, "slots": args.slots,
                                 "owners": args.owners, "repeat": args.repeat,
                                 "target_ratio": TARGET_RATIO,
                                 "load_average_before": os.getloadavg()[0]}
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in variants}
    for _ in range(args.repeat):  # interleaved: a burst of load spreads over the variants
        for name in variants:
            done = subprocess.run([sys.executable, __file__, "--variant", name, "--jobs",
                                   str(args.jobs), "--slots", str(args.slots), "--owners",
                                   str(args.owners)], capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                sys.exit(f"the {name} variant failed:\n{done.stderr}")
            runs[name].append(json.loads(done.stdout))
    result["load_average_after"] = os.getloadavg()[0]
    for name in variants:
        result[name] = {**runs[name][0], **{key: min(run[key] for run in runs[name])
                                            for key in TIMES}}
    base = result[variants[0]]
    for name in variants:
        for key in TIMES:
            result[name][key.replace("seconds", "ratio")] = round(
                result[name][key] / base[key], 2)
    result["within_target"] = all(result[name][f"{phase}_cpu_ratio"] <= TARGET_RATIO
                                  for name in variants for phase in ("read", "cycle"))
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    print(f"{args.jobs} jobs, {args.slots} slots, {args.owners} owners (load average "
          f"{result['load_average_before']:.2f} before, {result['load_average_after']:.2f} "
          "after)")
    for name in variants:
        run = result[name]
        print(f"{name:>12}: read {run['read_seconds']:.2f} s (x{run['read_ratio']:.2f}; CPU "
              f"{run['read_cpu_seconds']:.2f} s, x{run['read_cpu_ratio']:.2f}), cycle "
              f"{run['cycle_seconds']:.2f} s (x{run['cycle_ratio']:.2f}; CPU "
              f"{run['cycle_cpu_seconds']:.2f} s, x{run['cycle_cpu_ratio']:.2f}), "
              f"{run['identities']} identities, longest reason "
              f"{run['longest_reason_chars']} chars, {run['outcome']}")
    print(f"every CPU ratio <= {TARGET_RATIO}: {'yes' if result['within_target'] else 'NO'}")


if __name__ == "__main__":
    main()
