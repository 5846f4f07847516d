"""Start-up cost of the CLI: `import gridfair.cli` and `gridfair --help`, each in a fresh
interpreter (target: both under 0.3 s, issue 14).

- import: the time `import gridfair.cli` takes inside the interpreter (perf_counter around it);
- help: the wall time of the whole `gridfair --help` process, interpreter start-up included.

Prints the best and the median of --runs runs, and the load average (the machine is shared).

    python bench/startup.py [--runs 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

TARGET_SECONDS = 0.3
IMPORT_CODE = ("import time; start = time.perf_counter(); import gridfair.cli; "
               "print(time.perf_counter() - start)")


def import_seconds() -> float:
    output = subprocess.run([sys.executable, "-c", IMPORT_CODE], check=True,
                            capture_output=True, text=True).stdout
    return float(output)


def help_seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([*command, "--help"], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    script = shutil.which("gridfair", path=os.path.dirname(sys.executable))
    command = [script] if script else [sys.executable, "-m", "gridfair"]
    load_before = os.getloadavg()
    figures = {}
    for name, measure in (("import gridfair.cli", import_seconds),
                          ("gridfair --help", lambda: help_seconds(command))):
        measure()  # warm the file cache
        samples = [measure() for _ in range(args.runs)]
        figures[name] = {"best_s": min(samples), "median_s": statistics.median(samples),
                         "runs": args.runs, "target_s": TARGET_SECONDS,
                         "met": min(samples) < TARGET_SECONDS}
    load = {"before": load_before[0], "after": os.getloadavg()[0]}
    if args.json:
        print(json.dumps({"figures": figures, "loadavg_1min": load}, indent=2))
        return
    for name, figure in figures.items():
        print(f"{name:22} best {figure['best_s']:.3f} s  median {figure['median_s']:.3f} s  "
              f"({figure['runs']} runs; target < {TARGET_SECONDS} s: "
              f"{'met' if figure['met'] else 'NOT met'})")
    print(f"load average (1 min): {load['before']:.1f} before, {load['after']:.1f} after")


if __name__ == "__main__":
    main()
