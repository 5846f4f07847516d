"""Running many independent simulations: in this process, or on Dask distributed.

Each run is one Dask task (`execute` on a `RunSpec`), submitted under a name derived from the
run's key; outcomes are handed to a sink as they complete (`as_completed`), which is where the
sweep stores them. A run that fails inside the simulator comes back as a failed outcome; a run
whose worker is lost comes back as a Dask error, which is turned into a failed outcome too:
either way the other runs go on.

A `LocalCluster` of worker processes (one thread each: the simulator is pure Python, so
threads would share one interpreter lock) is started by default; given a scheduler address,
the runs go to that cluster instead, whose workers must have gridfair installed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from gridfair.errors import InputError
from gridfair.experiments.runs import RunOutcome, RunSpec, execute

if TYPE_CHECKING:  # distributed takes a second to import: only the sweep command needs it
    from distributed import Client

#: Receives each run's outcome as soon as it is known.
OutcomeSink = Callable[[RunSpec, RunOutcome], None]

DEFAULT_CONNECT_TIMEOUT = 10.0


def run_in_process(specs: Sequence[RunSpec], sink: OutcomeSink) -> None:
    """Run one after another here (no Dask): for small comparisons, debugging and reference."""
    for spec in specs:
        sink(spec, execute(spec))


@contextmanager
def dask_client(
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> Iterator[Client]:
    """A Dask client: on a running scheduler at `scheduler`, or on a new `LocalCluster`
    of `workers` processes (closed on exit)."""
    from distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=connect_timeout)
        except (OSError, TimeoutError, ValueError) as error:
            raise InputError(f"cannot reach the Dask scheduler at {scheduler!r} within "
                             f"{connect_timeout:g} s ({error})") from None
        with client:
            yield client
        return
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    # No dashboard; the scheduler's health/metrics HTTP server still starts, so put it on a
    # free local port rather than the default 8787 (which another cluster may hold).
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, scheduler_kwargs={"dashboard_address":
                                                                "127.0.0.1:0"},
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        yield client


def run_on_dask(client: Client, specs: Sequence[RunSpec], sink: OutcomeSink) -> None:
    """Submit every run, and hand each outcome to `sink` as it completes."""
    from distributed import as_completed

    futures = {client.submit(execute, spec, key=f"gridfair-run-{spec.key}", pure=False): spec
               for spec in specs}
    for future in as_completed(futures):
        spec = futures.pop(future)
        try:
            outcome = future.result()
        except Exception as error:  # the worker died or the task could not run there
            outcome = RunOutcome(spec.key, False, error=f"{type(error).__name__}: {error}")
        future.release()
        sink(spec, outcome)
