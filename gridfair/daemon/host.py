"""Whether a cycle failed for a reason of the daemon's own host, not the pool's: the process
out of file descriptors (EMFILE, ENFILE) or memory. Such a failure renews no lease, and backing
off does not cure it: the log says so loudly, with the descriptors in use against the limit."""

from __future__ import annotations

import errno
import os
import resource

#: Errors of the host itself, by errno.
_LOCAL_ERRNOS = {errno.EMFILE: "too many open files", errno.ENFILE: "too many open files "
                 "on the host", errno.ENOMEM: "out of memory", errno.ENOSPC: "no space left"}
#: Past this share of the limit, the descriptors in use are the likely cause.
_NEARLY_ALL = 0.9


def descriptors() -> tuple[int, int]:
    """(descriptors the process has open, its soft limit)."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    try:
        used = len(os.listdir("/proc/self/fd")) - 1  # less the one listing it
    except OSError:
        used = -1
    return used, limit


def host_shortage(error: BaseException) -> str | None:
    """What the host is short of, if `error` (or the descriptors in use) says it is: a line
    for the log; None if the failure looks like the pool's."""
    found = None
    pending: BaseException | None = error
    while pending is not None and found is None:  # the error, and what it was raised from
        if isinstance(pending, OSError) and pending.errno in _LOCAL_ERRNOS:
            found = _LOCAL_ERRNOS[pending.errno]
        elif isinstance(pending, MemoryError):
            found = "out of memory"
        pending = pending.__cause__ or pending.__context__
    used, limit = descriptors()
    if found is None and ("Too many open files" in str(error)
                          or limit > 0 and used >= _NEARLY_ALL * limit):
        found = "too many open files"
    if found is None:
        return None
    return (f"this host, not the pool: {found} ({used} of {limit} file descriptors open; "
            f"raise LimitNOFILE or find what holds them)")
