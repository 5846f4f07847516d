"""Size on disk of a base install of gridfair (what `pip install gridfair` gives a central
manager that runs only the daemon), side by side with the `experiments` extra.

Each variant is a fresh virtual environment in a temporary directory, outside the repository,
into which pip installs the wheel (built here with `python -m build`, or given with --wheel)
and its dependencies from PyPI, the htcondor wheel included. The size is every file of the
venv (pip, setuptools and the interpreter links too: what the directory takes on disk). It also
checks that the base install has none of dask, distributed or matplotlib.

    python bench/install_size.py [--wheel dist/gridfair-*.whl] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT_TOOLS = ("dask", "distributed", "matplotlib")


def tree_bytes(path: Path) -> int:
    """Bytes on disk of every file under `path` (allocated blocks, as `du` counts them)."""
    total = 0
    for directory, _, names in os.walk(path):
        for name in names:
            stat = os.lstat(os.path.join(directory, name))
            total += stat.st_blocks * 512
    return total


def build_wheel(out_dir: Path) -> Path:
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out_dir),
                    str(ROOT)], check=True, capture_output=True)
    return next(out_dir.glob("gridfair-*.whl"))


def measure(wheel: Path, extra: str | None, work: Path) -> dict:
    env_dir = work / f"venv-{extra or 'base'}"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    requirement = f"{wheel}[{extra}]" if extra else str(wheel)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-cache-dir",
                    requirement], check=True)
    listed = json.loads(subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"], check=True,
        capture_output=True, text=True).stdout)
    names = {item["name"].lower() for item in listed}
    site = next((env_dir / "lib").glob("python*/site-packages"))
    htcondor_bytes = sum(tree_bytes(path) for path in site.glob("htcondor*"))
    htcondor_bytes += sum(tree_bytes(path) for path in site.glob("classad*"))
    return {"extra": extra or "(base)", "bytes": tree_bytes(env_dir),
            "htcondor_bytes": htcondor_bytes, "distributions": len(names),
            "experiment_tools": sorted(names & set(EXPERIMENT_TOOLS))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="a built gridfair wheel (default: build one)")
    parser.add_argument("--base-only", action="store_true", help="skip the experiments variant")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gridfair-size-") as tmp:
        work = Path(tmp)
        wheel = args.wheel.resolve() if args.wheel else build_wheel(work / "dist")
        variants = [None] if args.base_only else [None, "experiments"]
        rows = [measure(wheel, extra, work) for extra in variants]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if args.json:
        print(json.dumps({"python": python, "wheel": wheel.name, "installs": rows}, indent=2))
    else:
        print(f"gridfair installs ({wheel.name}, Python {python}, fresh venvs):")
        for row in rows:
            print(f"  {row['extra']:12} {row['bytes'] / 2**20:7.1f} MiB on disk, "
                  f"{row['distributions']} distributions (htcondor + classad "
                  f"{row['htcondor_bytes'] / 2**20:.1f} MiB); experiment tools: "
                  f"{', '.join(row['experiment_tools']) or 'none'}")
    if rows[0]["experiment_tools"]:
        sys.exit(f"the base install has {', '.join(rows[0]['experiment_tools'])}")


if __name__ == "__main__":
    main()
