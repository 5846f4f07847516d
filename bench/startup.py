"""Start-up cost of the CLI, each figure in a fresh interpreter (targets: `import gridfair.cli`
and `gridfair --help` under 0.3 s, issue 14; `gridfair --version` under a quarter of what it
cost before lazy loading, issue 27):

- import: the time `import gridfair.cli` takes inside the interpreter (perf_counter around it);
- help, version: the wall time of the whole `python -m gridfair --help` / `--version` process,
  interpreter start-up included;
- bare interpreter: `python -c pass`, the floor under every other figure.

`--against REV` times the same commands on the code of git revision REV (exported to a
temporary folder and put first on PYTHONPATH), interleaved run by run with this checkout's, so
before and after share the machine's load; `--version` then reports the ratio.
Prints the best and the median of --runs runs, and the load average (the machine is shared).

    python bench/startup.py [--runs 9] [--against REV] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 0.3
VERSION_TARGET_RATIO = 0.25
IMPORT_CODE = ("import time; start = time.perf_counter(); import gridfair.cli; "
               "print(time.perf_counter() - start)")


def from_source(source: Path) -> dict:
    """subprocess.run's arguments that import gridfair from SOURCE: run there (`-m` looks in
    the working folder first) with SOURCE on PYTHONPATH (before the development venv's
    editable install)."""
    return {"cwd": source, "env": {**os.environ, "PYTHONPATH": str(source)}}


def import_seconds(source: Path) -> float:
    output = subprocess.run([sys.executable, "-c", IMPORT_CODE], check=True,
                            capture_output=True, text=True, **from_source(source)).stdout
    return float(output)


def process_seconds(arguments: list[str], source: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *arguments], check=True, capture_output=True,
                   **from_source(source))
    return time.perf_counter() - start


def export_revision(revision: str, into: Path) -> Path:
    """The `gridfair` package of git REVISION, unpacked in INTO."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", revision,
                              "gridfair"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def measures(source: Path) -> dict[str, Callable[[], float]]:
    return {
        "import gridfair.cli": lambda: import_seconds(source),
        "gridfair --help": lambda: process_seconds(["-m", "gridfair", "--help"], source),
        "gridfair --version": lambda: process_seconds(["-m", "gridfair", "--version"], source),
        "bare interpreter": lambda: process_seconds(["-c", "pass"], source),
    }


def summary(samples: list[float]) -> dict[str, float | int]:
    return {"best_s": min(samples), "median_s": statistics.median(samples),
            "runs": len(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--against", metavar="REV", default=None,
                        help="also time git revision REV, interleaved (e.g. a commit id)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        sources = {"this checkout": ROOT}
        if args.against:
            sources[args.against] = export_revision(args.against, Path(folder))
        samples: dict[str, dict[str, list[float]]] = {label: {} for label in sources}
        for name in measures(ROOT):
            for source in sources.values():
                measures(source)[name]()  # warm the file cache
            for _ in range(args.runs):  # interleaved: one run of each source in turn
                for label, source in sources.items():
                    samples[label].setdefault(name, []).append(measures(source)[name]())
    figures = {label: {name: summary(runs) for name, runs in by_name.items()}
               for label, by_name in samples.items()}
    ours = figures["this checkout"]
    for name in ("import gridfair.cli", "gridfair --help"):
        ours[name] |= {"target_s": TARGET_SECONDS, "met": ours[name]["best_s"] < TARGET_SECONDS}
    result: dict = {"figures": figures}
    if args.against:
        ratio = ours["gridfair --version"]["best_s"] / \
            figures[args.against]["gridfair --version"]["best_s"]
        result["version_ratio"] = {"against": args.against, "ratio": ratio,
                                   "target": VERSION_TARGET_RATIO,
                                   "met": ratio < VERSION_TARGET_RATIO}
    result["loadavg_1min"] = {"before": load_before[0], "after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for label, by_name in figures.items():
        print(f"{label}:")
        for name, figure in by_name.items():
            target = (f"; target < {TARGET_SECONDS} s: {'met' if figure['met'] else 'NOT met'}"
                      if "target_s" in figure else "")
            print(f"  {name:22} best {figure['best_s']:.3f} s  median "
                  f"{figure['median_s']:.3f} s  ({figure['runs']} runs{target})")
    if args.against:
        ratio = result["version_ratio"]
        print(f"gridfair --version: this checkout / {args.against} = {ratio['ratio']:.2f} "
              f"(target < {VERSION_TARGET_RATIO}: {'met' if ratio['met'] else 'NOT met'})")
    load = result["loadavg_1min"]
    print(f"load average (1 min): {load['before']:.1f} before, {load['after']:.1f} after")


if __name__ == "__main__":
    main()
