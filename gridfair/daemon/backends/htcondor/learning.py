"""The projections of the `htcondor` backend's queries: what the ads' Requirements and Rank
read, learnt from the ads and kept (`reading.PoolReader._query_learning`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

import classad2

#: How many query rounds may be spent learning the attributes match expressions read.
LEARNING_ROUNDS = 4
#: New names for a projection learnt as they are; more at once (a flood of jobs each reading
#: an attribute of its own, `TARGET.Flood$(Process)` or `MY.Flood$(Process)`) are first looked
#: for in that side's whole ads (the slots'; the jobs' with `demand = "jobs"`, whose query
#: carries the job projection for every job), and only those some ad has are learnt: the
#: others would make every query carry them, every cycle (ads times names).
DIRECT_LEARNING = 64
#: Names found on no ad are not looked for again for this many reads (an attribute that
#: appears meanwhile is learnt once they are forgotten), nor past this many names.
ABSENT_READS = 10
ABSENT_LIMIT = 100_000


def learn(projection: dict[str, str], names: set[str]) -> bool:
    """Add `names` to a projection; True if it grew."""
    new = _new_names(projection, names)
    projection.update(new)
    return bool(new)


def learn_present(projection: dict[str, str], names: set[str], absent: set[str],
                  whole_ads: Callable[[], Iterable[classad2.ClassAd]]) -> bool:
    """Add `names` to a projection, past `DIRECT_LEARNING` new ones only those some ad of
    `whole_ads()` has (the others go to `absent`, not looked for again); True if it grew."""
    new = _new_names(projection, names, absent)
    if len(new) > DIRECT_LEARNING:
        present = {name.lower() for ad in whole_ads() for name in ad}
        absent.update(name for name in new if name not in present)
        new = {lower: name for lower, name in new.items() if lower in present}
    projection.update(new)
    return bool(new)


def _new_names(projection: dict[str, str], names: set[str],
               absent: Collection[str] = ()) -> dict[str, str]:
    """lower-case name -> name of `names` neither in `projection` nor in `absent`."""
    return {name.lower(): name for name in names
            if name and name.lower() not in projection and name.lower() not in absent}

