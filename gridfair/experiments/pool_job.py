"""One run of a sweep as an HTCondor job: the file that goes with the job, and the result it
sends back.

The submitting side writes each run's parameters to a run file (`write_run_file`), with the
paths of its input files rewritten to where the job finds them in its sandbox; the job runs
`python -m gridfair.experiments.pool_job RUN_FILE RESULT_FILE`, which runs the simulation
(`execute`, as every other backend does) and writes its outcome as JSON. The submitting side
reads it back (`read_result`) and stores it under the run's own parameters, so the results DB
holds what a local run stores.

JSON keeps what the store needs exactly: Python writes floats with the shortest repr that
reads back as the same float, NaN as `NaN`, and keeps int and float apart.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gridfair import __version__
from gridfair.experiments.runs import RunOutcome, RunSpec, execute


def write_run_file(path: Path, params: Mapping[str, Any]) -> None:
    """The run file of a job: the parameters it runs with (input paths as the job sees them)."""
    path.write_text(json.dumps({"params": dict(params), "gridfair_version": __version__},
                               sort_keys=True), encoding="utf-8")


def run_job(run_file: Path, result_file: Path) -> RunOutcome:
    """Run the simulation of `run_file` here, relative paths relative to its directory, and
    write its outcome to `result_file`."""
    document = json.loads(run_file.read_text(encoding="utf-8"))
    spec = RunSpec(document["params"], str(run_file.resolve().parent))
    outcome = execute(spec)
    result = {"gridfair_version": __version__, "ok": outcome.ok, "users": outcome.users,
              "summary": outcome.summary, "stages": outcome.stages,
              "allocation": outcome.allocation, "error": outcome.error,
              "wall_seconds": outcome.wall_seconds}
    # Written whole, then renamed: a job killed half-way leaves no result to misread.
    partial = result_file.with_name(result_file.name + ".partial")
    partial.write_text(json.dumps(result), encoding="utf-8")
    partial.replace(result_file)
    return outcome


def read_result(key: str, result_file: Path) -> RunOutcome:
    """The outcome a job wrote; a failed outcome saying why when there is none to read, or
    when the job ran another gridfair version than this one (its results could differ)."""
    try:
        result = json.loads(result_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return RunOutcome(key, False, error=f"the job left no readable result ({error})")
    if result.get("gridfair_version") != __version__:
        return RunOutcome(key, False, error=f"the job ran gridfair "
                          f"{result.get('gridfair_version')}, this sweep runs {__version__}: "
                          "install the same version where jobs run")
    return RunOutcome(key, bool(result["ok"]), users=result["users"],
                      summary=result["summary"], stages=result["stages"],
                      allocation=result["allocation"], error=result["error"],
                      wall_seconds=result["wall_seconds"])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m gridfair.experiments.pool_job RUN_FILE RESULT_FILE",
              file=sys.stderr)
        return 2
    run_job(Path(argv[0]), Path(argv[1]))
    # A failed simulation is a result too (its error is in the file): the job succeeded.
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
