"""gridfair against the papers' own simulators, side by side in one run (issues 27 and 50).

Cases (wall time of the whole process, start-up included, and its peak RSS; peer, gridfair and
gridfair's pure-Python path run in turn, round after round, so all see the same load; best of
--rounds):
- SDRF (delta = 0.9999), DRF and weighted DRF on the Google derived task list at r = 0.9,
  gridfair in `--form authors`, against the SDRF authors' simulator (github hsadok/sdrf,
  f0159ee, Python 2.7 with its C++ live tree). Target: gridfair at least 10x faster.
- HOSEP on iSPD's 4-owner grid (`../shared/data/ispd/multi_owner/multi_owner_HOSEP.imsx`) with
  the CTC-SP2 top-4 trace (the 4 busiest users' completed jobs of 60 s or more, arrivals
  compressed 50x: 7,087 tasks; gridfair writes the tasks, and both read the same `.wmsx`),
  gridfair under `--arrivals sequential --hosep-test ispd2014`, against iSPD 2014 (github
  gspd-unesp/ispd 196cdf6, the HOSEP paper's code). Target: gridfair at least 20x faster.
gridfair is the one installed beside this interpreter: compiled where its wheel was built with a
C compiler (`setup.py`); its pure-Python side is the same install with GRIDFAIR_PURE_PYTHON=1
(`compiled` in the figures says whether the two differ). `--baseline DIR` adds a side: the
same command with DIR first on PYTHONPATH (another build of gridfair, e.g. main's compiled
tree), so a change is measured against what it changes in the same rounds.
Both run with their Python bytecode cached, as installed programs do (PYTHONDONTWRITEBYTECODE
is dropped for them). Prints each case's times, the ratio peer / gridfair and whether the
target is met, and the load average before and after (the machine is shared); `--json` for
the figures.

The peers are not in the project and this script does not build them: it finds them, built
by hand outside the repository, in --peers-dir (default /var/tmp/peers), laid out as
- `sdrf/`: a checkout of hsadok/sdrf at f0159ee, its C++ live tree compiled (their
  `compile.sh`); `sdrf-venv/bin/python`: a Python 2.7 with the packages their simulator
  imports (numpy, pandas, click, sortedcontainers, tqdm; `../shared/notes/peers-build.md`);
- `ispd2014/`: a checkout of gspd-unesp/ispd at 196cdf6 compiled into `ispd2014/classes`
  (with its resources), its jars in `ispd2014/lib/`; `java` on PATH.
A case whose peer is missing is reported as such and skipped.

    .venv/bin/python bench/peers.py [--peers-dir DIR] [--rounds 3] [--only NAME]
                                    [--baseline DIR] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ispd_inputs import ispd2014_model, tasks_of, write_wmsx

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
GOOGLE = SHARED / "google" / "derived" / "tasks_parts00000-00001.csv.gz"
MULTI_OWNER = SHARED / "ispd" / "multi_owner" / "multi_owner_HOSEP.imsx"
CTC = SHARED / "swf" / "CTC-SP2-1996-3.1-cln.swf.gz"
#: How the CTC-SP2 top-4 trace is made from the SWF log on the 4-owner grid.
CTC_TOP4 = ("--unmapped", "drop", "--swf-status", "completed", "--min-run-time", "60",
            "--compress", "50")
SDRF_COMMIT = "f0159ee"
ISPD_COMMIT = "196cdf6"
AUTHORS_TARGET, ISPD_TARGET = 10.0, 20.0


@dataclass(frozen=True)
class Case:
    name: str
    peer: str
    target: float
    peer_command: list[str]
    peer_cwd: Path
    gridfair_command: list[str]


def gridfair_command() -> list[str]:
    """The installed `gridfair` script beside this interpreter (as a user runs it)."""
    script = shutil.which("gridfair", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "gridfair"]


def checkout_at(folder: Path, commit: str) -> str | None:
    """Why FOLDER is not a checkout of COMMIT, or None when it is."""
    if not folder.is_dir():
        return f"no {folder}"
    head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    return None if head.startswith(commit) else f"{folder} is at {head or '?'}, not {commit}"


def authors_cases(peers: Path, work: Path) -> list[Case] | str:
    source, python = peers / "sdrf", peers / "sdrf-venv" / "bin" / "python"
    problem = checkout_at(source, SDRF_COMMIT)
    if problem is None and not (source / "sdrf/helpers/c_live_tree/lib_c_priority_queue.so"
                                ).exists():
        problem = f"{source}: the C++ live tree is not compiled"
    if problem is None and not python.exists():
        problem = f"no {python}"
    if problem is not None:
        return problem
    tasks = work / "tasks.csv"  # their simulator reads plain CSV; gridfair reads the same file
    with gzip.open(GOOGLE, "rb") as packed, open(tasks, "wb") as plain:
        shutil.copyfileobj(packed, plain)
    out = work / "authors-out"
    out.mkdir()
    theirs = [str(python), "-m", "sdrf", "simulate_task_allocation", str(tasks), str(out),
              "-r0.9"]
    ours = [*gridfair_command(), "simulate", "--workload", str(tasks), "--capacity-ratio",
            "0.9", "--form", "authors", "--quiet"]
    return [
        Case("SDRF, delta = 0.9999", "authors' simulator", AUTHORS_TARGET,
             [*theirs, "-a", "sdrf", "-d0.9999"], source,
             [*ours, "--policy", "sdrf", "--delta", "0.9999"]),
        Case("DRF", "authors' simulator", AUTHORS_TARGET, [*theirs, "-a", "wdrf"], source,
             [*ours, "--policy", "drf"]),
        Case("weighted DRF", "authors' simulator", AUTHORS_TARGET,
             [*theirs, "-a", "wdrf", "-w"], source, [*ours, "--policy", "wdrf"]),
    ]


def ispd_case(peers: Path, work: Path) -> list[Case] | str:
    source = peers / "ispd2014"
    problem = checkout_at(source, ISPD_COMMIT)
    if problem is None and not (source / "classes" / "ispd" / "Main.class").exists():
        problem = f"{source}/classes has no compiled ispd.Main"
    if problem is None and shutil.which("java") is None:
        problem = "no java on PATH"
    if problem is not None:
        return problem
    tasks_out = work / "ctc_tasks.csv"
    subprocess.run([*gridfair_command(), "simulate", str(MULTI_OWNER), "--workload", str(CTC),
                    *CTC_TOP4, "--policy", "hosep", "--tasks-out", str(tasks_out), "--quiet"],
                   check=True, capture_output=True)
    tasks = tasks_of(tasks_out)
    trace = work / "ctc_top4.wmsx"
    write_wmsx(tasks, trace)
    model = work / "ctc_top4_ispd2014.imsx"
    model.write_text(ispd2014_model(MULTI_OWNER, trace, len(tasks)), encoding="iso-8859-1")
    classpath = f"{source / 'classes'}:{source / 'lib'}/*"
    return [Case(f"HOSEP, CTC-SP2 top 4 ({len(tasks):,} tasks)", "iSPD 2014", ISPD_TARGET,
                 ["java", "-Djava.awt.headless=true", "-cp", classpath, "ispd.Main",
                  str(model)], source,
                 [*gridfair_command(), "simulate", str(MULTI_OWNER), "--workload", str(trace),
                  "--policy", "hosep", "--arrivals", "sequential", "--hosep-test", "ispd2014",
                  "--quiet"])]


#: Both simulators run as installed programs do: with their bytecode cached (an environment
#: that sets PYTHONDONTWRITEBYTECODE, as this machine's does, would make both compile their
#: sources on every run; the first round writes the caches).
ENVIRONMENT = {name: value for name, value in os.environ.items()
               if name != "PYTHONDONTWRITEBYTECODE"}


PURE_ENVIRONMENT = {**ENVIRONMENT, "GRIDFAIR_PURE_PYTHON": "1"}


def measured(command: list[str], cwd: Path, environment: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of `command`."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=environment)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command)
    return wall, usage.ru_maxrss / 1024


def gridfair_is_compiled() -> bool:
    """Whether the gridfair under test loads compiled modules (its pool, as a witness)."""
    probe = "import gridfair.core.pool as m; print(m.__file__.endswith('.py'))"
    found = subprocess.run([sys.executable, "-P", "-c", probe], capture_output=True, text=True,
                           check=True, env=ENVIRONMENT, cwd=tempfile.gettempdir())
    return found.stdout.strip() == "False"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers-dir", type=Path, default=Path("/var/tmp/peers"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=None, help="run only the cases whose name has this")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a side more: gridfair from this tree (first on PYTHONPATH)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    environments = {"peer": ENVIRONMENT, "gridfair": ENVIRONMENT,
                    "gridfair_pure": PURE_ENVIRONMENT}
    if args.baseline is not None:
        environments["baseline"] = {**ENVIRONMENT,
                                    "PYTHONPATH": str(args.baseline.resolve())}
    sides_run = tuple(environments)
    missing_data = [path for path in (GOOGLE, MULTI_OWNER, CTC) if not path.exists()]
    if missing_data:
        sys.exit(f"peers.py: needs {missing_data[0]} (../shared/data)")
    load_before = os.getloadavg()
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="gridfair-peers-") as folder:
        cases: list[Case] = []
        makers: tuple[tuple[str, Callable], ...] = (
            ("authors' simulator", authors_cases), ("iSPD 2014", ispd_case))
        for peer, make in makers:
            made = make(args.peers_dir.resolve(), Path(folder))
            if isinstance(made, str):
                skipped[peer] = made
            else:
                cases += [case for case in made if args.only is None or args.only in case.name]
        # case -> side -> [(wall s, peak RSS MB) per round]
        runs: dict[str, dict[str, list[tuple[float, float]]]] = {
            case.name: {side: [] for side in sides_run} for case in cases}
        for _ in range(args.rounds):
            for case in cases:
                for side, environment in environments.items():
                    command, cwd = ((case.peer_command, case.peer_cwd) if side == "peer" else
                                    (case.gridfair_command, Path(folder)))
                    runs[case.name][side].append(measured(command, cwd, environment))
    rows = []
    for case in cases:
        sides = runs[case.name]
        best = {side: min(wall for wall, _ in sides[side]) for side in sides_run}
        row = {"case": case.name, "peer": case.peer, "peer_s": best["peer"],
               "gridfair_s": best["gridfair"], "gridfair_pure_s": best["gridfair_pure"],
               "ratio": best["peer"] / best["gridfair"],
               "ratio_pure": best["peer"] / best["gridfair_pure"],
               "target": case.target, "met": best["peer"] / best["gridfair"] >= case.target,
               "peak_rss_mb": {side: max(rss for _, rss in sides[side]) for side in sides_run},
               "runs": {side: [wall for wall, _ in sides[side]] for side in sides_run}}
        if "baseline" in best:
            row |= {"baseline_s": best["baseline"],
                    "ratio_baseline": best["peer"] / best["baseline"]}
        rows.append(row)
    load = {"before": list(load_before), "after": list(os.getloadavg())}
    compiled = gridfair_is_compiled()
    if args.json:
        print(json.dumps({"cases": rows, "skipped": skipped, "rounds": args.rounds,
                          "compiled": compiled, "loadavg": load,
                          "baseline": None if args.baseline is None else str(args.baseline)},
                         indent=2))
        return
    print(f"best of {args.rounds}, wall seconds including start-up, sides in turn; gridfair "
          f"{'compiled' if compiled else 'not compiled (both gridfair sides are pure Python)'}")
    print(f"{'case':34} {'peer':20} {'peer s':>7} {'gridfair s':>10} {'ratio':>6}  "
          f"{'pure s':>6} {'ratio':>6}  target")
    for row in rows:
        print(f"{row['case']:34} {row['peer']:20} {row['peer_s']:7.2f} "
              f"{row['gridfair_s']:10.2f} {row['ratio']:5.1f}x  {row['gridfair_pure_s']:6.2f} "
              f"{row['ratio_pure']:5.1f}x  >= {row['target']:g}x "
              f"{'met' if row['met'] else 'NOT met'}"
              + (f"; baseline {row['baseline_s']:.2f} s, {row['ratio_baseline']:.1f}x"
                 if "baseline_s" in row else ""))
    for peer, why in skipped.items():
        print(f"skipped {peer}: {why}")
    print(f"load average (1, 5, 15 min): before {load['before'][0]:.2f} "
          f"{load['before'][1]:.2f} {load['before'][2]:.2f}, after {load['after'][0]:.2f} "
          f"{load['after'][1]:.2f} {load['after'][2]:.2f}")


if __name__ == "__main__":
    main()
