"""The pool backend contract (`tests/backend_contract.py`) over the htcondor backend on a live
personal pool: the `live` parameter of the `backend` fixture. One pool for the whole module
(the session's static pool, its queue cleared before and after), so the contract costs a few
seconds a test, not a pool's start each; each test is given a job running, jobs waiting that
no slot matches (they stay idle whatever the contract steers), and free slots."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gridfair.ad_views import JobStatus
from gridfair.classads.submitters import SubmitterMap
from gridfair.daemon.backends.htcondor import HTCondorBackend
from tests.live.harness.personal_pool import UID_DOMAIN, JobSpec, PersonalPool

LONG = 132250 * 600  # ten minutes on the fastest slot: runs for the whole module


@pytest.fixture(scope="module")
def contract_pool(static_pool: PersonalPool) -> Iterator[PersonalPool]:
    pool = static_pool
    pool.clear_queue()
    pool.submit([JobSpec("User2", LONG)], count=2, extra=["requirements = false"])
    yield pool
    pool.clear_queue()


@pytest.fixture(params=["live"])
def backend(contract_pool: PersonalPool) -> HTCondorBackend:
    """The backend as the daemon makes it, once a job runs (the contract's vacate sends the
    one running back to the queue: the next test waits for it, or another, to run)."""
    pool = contract_pool
    if not pool.running():
        pool.submit([JobSpec("User1", LONG)])
    backend = HTCondorBackend.connect(pool.collector_host, submitters=SubmitterMap(UID_DOMAIN))
    # Running as the backend reads it: the slot's ad in the collector, which follows the
    # queue by a startd update (seen missing under load).
    pool.wait_until(lambda: any(job.status == JobStatus.RUNNING
                                for job in backend.read_snapshot().jobs), 60)
    return backend


# The contract's tests (every public name of the module: its test functions and imports).
from tests.backend_contract import *  # noqa: E402, F403
