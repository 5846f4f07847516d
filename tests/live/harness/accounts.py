"""The Unix accounts of a personal pool, and what they can reach.

HTCondor's daemons act as HTCondor's own account (`CONDOR_IDS`), not as root: a pool whose
install or directory lies under a directory closed to that account (a 0700 home, what
`mktemp -d` makes) never shows a slot. `runnable_install` gives an install that account can
run, copying it once (it is relocatable) to /var/tmp when it cannot run it where it lies;
`require_reach` stops a pool at once, naming the directory in the way and what to change.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

#: Where an install is copied when HTCondor's account cannot run it where it lies: kept there
#: (one copy per install, named by its path and build) for the next runs.
COPIES_PARENT = Path("/var/tmp")


class Unreachable(RuntimeError):
    """HTCondor's account cannot reach a pool's install or directory: the message names the
    directory in the way and what to change."""


def ensure_account(name: str) -> None:
    """A Unix account `name` (with a group of its name): created if missing, as a system
    account with no home and no login shell (`useradd --badname`: grid owners are named
    `User1`, ...)."""
    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        return
    try:
        grp.getgrnam(name)
        group = ["-g", name]
    except KeyError:
        group = ["-U"]
    done = subprocess.run(["useradd", "--badname", "-r", "-M", "-s", "/usr/sbin/nologin",
                           *group, name], capture_output=True, text=True, check=False)
    if done.returncode != 0 and done.returncode != 9:  # 9: created meanwhile by another run
        raise RuntimeError(f"useradd {name}: exit {done.returncode}: {done.stderr.strip()}")


def as_account(name: str, command: Sequence[str]) -> list[str]:
    """`command` run as the account `name` (its own group and supplementary groups)."""
    return ["setpriv", f"--reuid={name}", f"--regid={pwd.getpwnam(name).pw_gid}",
            "--init-groups", *command]


def _succeeds(account: str, command: Sequence[str]) -> bool:
    return subprocess.run(as_account(account, command), capture_output=True, timeout=20,
                          check=False).returncode == 0


def _runs_install(account: str, install: Path) -> bool:
    """Whether `account` runs the install's programs: condor_version needs its own folder
    and the libraries in lib/ (found through its RPATH) all reachable. Started by a shell as
    the master starts its daemons: setpriv's own exec of the path succeeded where the
    account could not search a parent (a 0700 mktemp -d), so it proved nothing."""
    return _succeeds(account, ["/bin/sh", "-c", 'exec "$0" >/dev/null',
                               str(install / "bin" / "condor_version")])


def _in_the_way(account: str, path: Path) -> Path:
    """The first directory on the way to `path` that `account` cannot search (or `path`)."""
    for directory in (*reversed(path.parents), path):
        if not _succeeds(account, ["test", "-x", str(directory)]):
            return directory
    return path


def _closed(account: str, path: Path, what: str, change: str) -> Unreachable:
    blocker = _in_the_way(account, path)
    mode = oct(blocker.stat().st_mode & 0o777) if blocker.exists() else "missing"
    return Unreachable(f"HTCondor's account {account} cannot reach {what} {path}: {blocker} "
                       f"(mode {mode}) is closed to it; {change}")


def runnable_install(install: Path, account: str) -> Path:
    """`install`, if `account` can run it; else its copy in COPIES_PARENT, made if missing
    (atomically: runs in parallel share one). Unreachable when neither can be run."""
    if _runs_install(account, install):
        return install
    built = (install / "sbin" / "condor_master").stat()
    name = hashlib.sha256(f"{install.resolve()}|{built.st_mtime_ns}|{built.st_size}".encode())
    copy = COPIES_PARENT / f"gridfair-htcondor-{name.hexdigest()[:16]}"
    if not copy.exists():
        with contextlib.suppress(OSError):
            staging = Path(tempfile.mkdtemp(prefix="gridfair-htcondor-copying-",
                                            dir=COPIES_PARENT))
            try:
                shutil.copytree(install, staging / "htcondor", symlinks=True)
                subprocess.run(["chmod", "-R", "a+rX", str(staging / "htcondor")], check=False)
                (staging / "htcondor").rename(copy)  # fails if another run made it first
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    if _runs_install(account, copy):
        return copy
    raise _closed(account, install / "bin", "the HTCondor install", (
        f"nor could it run a copy in {copy} (made there when {COPIES_PARENT} is writable and "
        "open to it). Open the way (chmod o+x), or set GRIDFAIR_HTCONDOR to an install it can "
        "run"))


def require_reach(account: str, directory: Path) -> None:
    """Unreachable, at once, unless `account` can write in `directory` (a pool's local
    directory, whose daemons would otherwise wait in vain for their slots)."""
    if not _succeeds(account, ["test", "-w", str(directory), "-a", "-x", str(directory)]):
        raise _closed(account, directory, "the pool's directory", (
            "make the pool's directory elsewhere (the default, under /var/tmp) or open the "
            "way (chmod o+x)"))
