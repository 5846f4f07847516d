"""ClassAds in, pool views out: reading ad files with classad2, the machine and job views,
matching through autoclusters, and the conversion of a snapshot to the core's pool."""

from gridfair.classads.matching import AutoclusterMatcher, symmetric_match
from gridfair.classads.reader import AdFormat, SourcedAd, detect_format, parse_ads, read_ads
from gridfair.classads.to_pool import LoadedPool, pool_from_snapshot
from gridfair.classads.views import (
    AdConfig,
    job_view,
    jobs_from_ads,
    machine_view,
    machines_from_ads,
    read_jobs,
    read_machines,
    read_snapshot,
)

__all__ = [
    "AdConfig",
    "AdFormat",
    "AutoclusterMatcher",
    "LoadedPool",
    "SourcedAd",
    "detect_format",
    "job_view",
    "jobs_from_ads",
    "machine_view",
    "machines_from_ads",
    "parse_ads",
    "pool_from_snapshot",
    "read_ads",
    "read_jobs",
    "read_machines",
    "read_snapshot",
    "symmetric_match",
]
