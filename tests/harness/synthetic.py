"""Synthetic pools of ClassAds, built and written with classad2, for tests and benchmarks.

Slots are static one-CPU slots on machines of a few architectures and speeds; jobs ask for
one CPU and some memory, with one of a handful of Requirements, as a real pool's jobs mostly
do. Everything comes from a seeded `random.Random`, so a seed gives the same files.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import classad2

from gridfair.ad_views import JobStatus
from gridfair.classads.reader import AdFormat

ARCHITECTURES = (("X86_64", "LINUX"), ("X86_64", "LINUX"), ("aarch64", "LINUX"))
MEMORY_CHOICES = (2048, 4096, 8192, 16384)
# A handful of distinct job Requirements, as HTCondor's autoclusters expect.
REQUIREMENTS = (
    '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Memory >= RequestMemory)',
    '(TARGET.OpSys == "LINUX") && (TARGET.Memory >= RequestMemory)',
    '(TARGET.Arch == "aarch64") && (TARGET.Memory >= RequestMemory)',
    '(TARGET.Memory >= RequestMemory) && (TARGET.MFlops >= 2000)',
    '(TARGET.HasDocker =?= true) && (TARGET.Memory >= RequestMemory)',
)
SLOT_START = "(TARGET.RequestMemory <= MY.Memory)"
BASE_TIME = 1_700_000_000


def machine_ads(count: int, owners: int, seed: int = 1) -> list[classad2.ClassAd]:
    """`count` slots shared round-robin by `owners` owners, of varied power. Owners are named as
    `job_ads` names users (`user0@grid`...), so the first `owners` users provide the pool."""
    rng = random.Random(seed)
    ads = []
    for index in range(count):
        arch, opsys = rng.choice(ARCHITECTURES)
        ad = classad2.ClassAd({
            "MyType": "Machine",
            "Name": f"slot1@node{index:05d}.grid",
            "GridOwner": f"user{index % owners}@grid",
            "MFlops": rng.choice((1000, 1500, 2000, 3000, 4000)),
            "Cpus": 1,
            "Memory": rng.choice(MEMORY_CHOICES),
            "Arch": arch,
            "OpSys": opsys,
            "HasDocker": rng.random() < 0.5,
            "State": "Unclaimed",
            "Activity": "Idle",
        })
        ad["Requirements"] = classad2.ExprTree(SLOT_START)
        ads.append(ad)
    return ads


def job_ads(
    count: int, users: int, machines: Sequence[classad2.ClassAd], running: int,
    seed: int = 2,
) -> list[classad2.ClassAd]:
    """`count` jobs of `users` users (`user0@grid`...), the first `running` of them running
    on the first slots of `machines` (which are marked Claimed by them)."""
    rng = random.Random(seed)
    ads = []
    for index in range(count):
        user = f"user{rng.randrange(users)}@grid"
        ad = classad2.ClassAd({
            "MyType": "Job",
            "ClusterId": index // 10 + 1,
            "ProcId": index % 10,
            "Owner": user.partition("@")[0],
            "User": user,
            "JobStatus": int(JobStatus.IDLE),
            "QDate": BASE_TIME + index,
            "RequestCpus": 1,
            "ImageSize": rng.choice((100_000, 1_000_000, 2_000_000)),
            "JobUniverse": 5,
        })
        # Memory as condor_submit writes it by default: an expression of the image size.
        ad["RequestMemory"] = classad2.ExprTree("(ImageSize + 1023) / 1024")
        ad["Requirements"] = classad2.ExprTree(rng.choice(REQUIREMENTS))
        if index < running and index < len(machines):
            slot = machines[index]
            job_id = f"{ad['ClusterId']}.{ad['ProcId']}"
            ad["JobStatus"] = int(JobStatus.RUNNING)
            ad["RemoteHost"] = slot["Name"]
            ad["JobCurrentStartDate"] = BASE_TIME + count + index
            slot.update({"State": "Claimed", "Activity": "Busy", "JobId": job_id,
                         "RemoteUser": user, "RemoteOwner": user})
        ads.append(ad)
    return ads


def format_ads(ads: Sequence[classad2.ClassAd], ad_format: AdFormat) -> str:
    """The ads as `condor_status -long` (old), `-long:new` (new) or `-json` would print them."""
    if ad_format is AdFormat.OLD:
        return "\n".join(ad.printOld() for ad in ads)
    if ad_format is AdFormat.NEW:
        return "\n".join(str(ad) for ad in ads)
    return "[\n" + ",\n".join(ad.printJson() for ad in ads) + "\n]\n"


def write_ads(path: str | Path, ads: Sequence[classad2.ClassAd], ad_format: AdFormat) -> Path:
    path = Path(path)
    path.write_text(format_ads(ads, ad_format), encoding="utf-8")
    return path
