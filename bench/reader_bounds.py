"""The readers' time and peak memory against their input's size, for inputs shaped to hurt
(issue 37): are they linear, and is one endless ad bounded by the per-ad limit?

Shapes, each written to a file of the size asked (streamed out, so the writer stays small):
- `normal`: `condor_history -long` of ordinary job ads (~330 bytes each), read by
  `read_history`;
- `endless`: a `-long` history of one ad that never ends (`A<n> = <n>` lines): skipped as
  longer than `MAX_AD`, read past;
- `no-newline`: a `-long` history whose second line never ends;
- `deep-json`: a `-json` history of one object nested without end (`{"a":{"a":...`);
- `users`: the `normal` shape, every job a different user (a million at ~330 MB);
- `ads-normal`, `ads-endless`, `ads-no-newline`: the same shapes read by the ad reader's
  `read_ads` (`shares --jobs`), which returns every ad it parsed: its memory is theirs;
- `ads-json`: a `-json` list of the same jobs, read by `read_ads`;
- `ads-deep-json`: the `deep-json` object as a `-json` dump, read by `read_ads`;
- `dump-users`: the `users` shape read as the daemon's `files` backend reads a job dump
  (`read_dumps`: `reread`, each job's view kept with its text), a million users at ~330 MB.

Each input is read in a subprocess of its own (so its peak RSS is its own): the seconds the
read took (wall and CPU), its peak RSS, and, as a baseline in the same run, the same process's
RSS before the read and the seconds to read the file's bytes alone. The growth exponent of CPU
time (wall time moves with the load of a shared machine) and of RSS over the baseline is the
slope of a least-squares fit of log(figure) on log(size); for the
shapes of one endless ad (`BOUNDED`), over the sizes of twice the per-ad limit and more (below
it the ad is a legitimate one, parsed whole). The shapes that parse every ad (`FULL`) take
`--full-sizes` (about a second per MB on a loaded machine), the others `--sizes`.

    .venv/bin/python bench/reader_bounds.py [--sizes 8,32,128] [--full-sizes 4,16,64]
        [--shapes ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

SHAPES = ("normal", "endless", "no-newline", "deep-json", "users", "ads-normal", "ads-json",
          "ads-endless", "ads-no-newline", "ads-deep-json", "dump-users")
FULL = ("normal", "users", "ads-normal", "ads-json", "dump-users")
BOUNDED = ("endless", "no-newline", "deep-json", "ads-endless", "ads-no-newline",
           "ads-deep-json")
MB = 1 << 20


def _job(number: int, user: str) -> str:
    return (f"ClusterId = {number}\nProcId = 0\nOwner = \"{user}\"\nUser = \"{user}@pool\"\n"
            f"QDate = {1000 + number}\nJobStatus = 4\nJobStartDate = {1100 + number}\n"
            f"JobCurrentStartDate = {1100 + number}\nCompletionDate = {1200 + number}\n"
            f"RemoteWallClockTime = 100.0\nRequestCpus = 1\nRequestMemory = 1024\n"
            f"LastRemoteHost = \"slot1@node{number % 50}\"\nMachineAttrMips0 = 1000\n")


def _json_job(number: int, user: str) -> str:
    values = dict(line.split(" = ", 1) for line in _job(number, user).splitlines())
    return "{" + ", ".join(f'"{name}": {value}' for name, value in values.items()) + "}"


def _pieces(shape: str) -> Iterator[str]:
    """The shape's text, without end."""
    if shape in ("normal", "users", "ads-normal", "dump-users", "ads-json"):
        number = 0
        job, separator = (_json_job, ",\n") if shape == "ads-json" else (_job, "\n")
        if shape == "ads-json":
            yield "[\n"
        while True:
            block = []
            for _ in range(1000):
                number += 1
                user = f"u{number}" if shape.endswith("users") else f"u{number % 20}"
                block.append(job(number, user))
            yield separator.join(block) + separator
    elif shape in ("endless", "ads-endless"):
        yield _job(1, "ann")
        number = 0
        while True:
            yield "".join(f"A{number + line} = {number + line}\n" for line in range(10000))
            number += 10000
    elif shape in ("no-newline", "ads-no-newline"):
        yield "ClusterId = 1\nQDate = 1000\nJunk = \""
        while True:
            yield "x" * MB
    elif shape in ("deep-json", "ads-deep-json"):
        yield '[{"ClusterId": 1, "QDate": 1000, "A": '
        while True:
            yield '{"a": ' * (MB // 6)
    else:
        raise ValueError(shape)


def write_input(shape: str, size: int, path: Path) -> None:
    """The shape's text cut at `size` characters (a JSON list: at its last whole object,
    then closed)."""
    written = 0
    with path.open("w", encoding="utf-8") as out:
        for piece in _pieces(shape):
            piece = piece[:size - written]
            if shape == "ads-json" and written + len(piece) >= size:
                piece = piece[:piece.rfind("},\n") + 1] + "\n]\n"
            out.write(piece)
            written += len(piece)
            if written >= size:
                return


def _read(shape: str, path: Path) -> int:
    """The items the shape's reader makes of the file (jobs and skipped ads)."""
    if shape.startswith("ads-"):
        from gridfair.classads.reader import read_ads

        ads, skipped = read_ads(path, lenient=True)
        return len(ads) + len(skipped)
    if shape == "dump-users":
        from gridfair.classads.views import job_view
        from gridfair.daemon.backends.files import read_dumps

        read = read_dumps([path], job_view, {}, jobs=True)
        return len(read.values) + len(read.unparsed) + len(read.refused)
    from gridfair.classads.history import read_history

    return sum(1 for _ in read_history([path]))


def _raw_read(path: Path) -> None:
    with path.open("rb") as stream:
        while stream.read(MB):
            pass


def measure_one(shape: str, path: Path) -> dict:
    """In the subprocess: the baseline, then the read."""
    import gridfair.classads.history
    import gridfair.classads.reader
    import gridfair.daemon.backends.files  # noqa: F401 - loaded before the baseline RSS

    start = time.perf_counter()
    _raw_read(path)
    raw_seconds = time.perf_counter() - start
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    from gridfair.errors import InputError

    start, cpu_start = time.perf_counter(), time.process_time()
    error = None
    try:
        items = _read(shape, path)
    except InputError as refused:  # a file refused (one cut short) is an outcome too
        items, error = 0, str(refused).replace(str(path), "FILE")
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"items": items, "error": error, "seconds": seconds, "cpu_seconds": cpu_seconds,
            "raw_read_seconds": raw_seconds, "base_rss_mb": base / 1024,
            "peak_rss_mb": peak / 1024, "growth_mb": (peak - base) / 1024}


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) on log(x) (None with fewer than two usable points)."""
    usable = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(usable) < 2:
        return None
    mean_x = sum(x for x, _ in usable) / len(usable)
    mean_y = sum(y for _, y in usable) / len(usable)
    spread = sum((x - mean_x) ** 2 for x, _ in usable)
    return sum((x - mean_x) * (y - mean_y) for x, y in usable) / spread


def run(shapes: list[str], sizes: list[int], full_sizes: list[int], scratch: Path,
        report: Callable[[str], None]) -> dict:
    from gridfair.classads.bounds import MAX_AD

    results: dict = {"load_average_before": os.getloadavg(), "ad_limit_mb": MAX_AD / MB,
                     "shapes": {}}
    for shape in shapes:
        rows = []
        for size in full_sizes if shape in FULL else sizes:
            path = scratch / f"{shape}.{size}"
            write_input(shape, size * MB, path)
            done = subprocess.run([sys.executable, __file__, "--one", shape, str(path)],
                                  capture_output=True, text=True, check=True)
            path.unlink()
            row = {"size_mb": size, **json.loads(done.stdout),
                   "load_average": os.getloadavg()[0]}
            rows.append(row)
            report(f"{shape:14} {size:5d} MB  {row['seconds']:7.2f} s ({row['cpu_seconds']:6.2f} "
                   f"CPU s) "
                   f"(raw read {row['raw_read_seconds']:5.2f} s)  peak RSS "
                   f"{row['peak_rss_mb']:7.1f} MB (+{row['growth_mb']:6.1f} over "
                   f"{row['base_rss_mb']:.0f})  items {row['items']}  load "
                   f"{row['load_average']:.1f}" + (f"  error: {row['error']}" if row["error"]
                                                  else ""))
        fitted = [row for row in rows
                  if shape not in BOUNDED or row["size_mb"] >= 2 * MAX_AD / MB]
        # CPU seconds: on a shared machine, wall seconds move with the other processes' load.
        time_exponent = slope([(row["size_mb"], row["cpu_seconds"]) for row in fitted])
        # Memory: the growth over the baseline, floored at 1 MB (a bounded read grows ~0).
        memory_exponent = slope([(row["size_mb"], max(row["growth_mb"], 1.0))
                                 for row in fitted])
        results["shapes"][shape] = {
            "rows": rows, "fitted_sizes_mb": [row["size_mb"] for row in fitted],
            "time_exponent": time_exponent, "memory_exponent": memory_exponent,
            "largest_growth_mb": max(row["growth_mb"] for row in rows)}
        report(f"{shape:14} exponent over {[row['size_mb'] for row in fitted]} MB: CPU time "
               f"{_fmt(time_exponent)}, memory growth {_fmt(memory_exponent)}")
    results["load_average_after"] = os.getloadavg()
    return results


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,32,128", help="input sizes in MB, commas")
    parser.add_argument("--full-sizes", default="4,16,64",
                        help=f"input sizes in MB of the shapes {', '.join(FULL)}")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="shapes, commas")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--one", nargs=2, metavar=("SHAPE", "FILE"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.one:
        print(json.dumps(measure_one(options.one[0], Path(options.one[1]))))
        return
    shapes = options.shapes.split(",")
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shapes {sorted(unknown)} (known: {', '.join(SHAPES)})")
    sizes = [int(size) for size in options.sizes.split(",")]
    full_sizes = [int(size) for size in options.full_sizes.split(",")]
    say = (lambda line: print(line, file=sys.stderr)) if options.json else print
    say(f"load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="reader_bounds.") as scratch:
        results = run(shapes, sizes, full_sizes, Path(scratch), say)
    say(f"load average {results['load_average_after']}")
    if options.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
