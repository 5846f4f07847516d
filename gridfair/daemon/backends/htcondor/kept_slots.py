"""Slot views kept from one read to the next (issue 49): a slot whose ad the collector has not
replaced since the last read keeps the view made of it, the same object, so that the kept
pool passes over it (`is`) and only the slots updated since are viewed and laid out anew.

The collector replaces a slot's ad with each update its startd sends and stamps the new one
with `LastHeardFrom` (seconds); a startd numbers its updates (`UpdateSequenceNumber`) and a
restarted one has a new `DaemonStartTime`. An ad whose Name and those three, and the
projection it was read with, are the last read's is that ad again. A startd that sends two
updates in one second without numbering them could have the second missed until its next: so
an ad without a whole `LastHeardFrom` is viewed anew every read, and every `full_read_every`
reads all are (the kept idle jobs' full read, `kept_idle`).
"""

from __future__ import annotations

from collections.abc import Sequence

from gridfair.ad_views import Machine, SkippedAd
from gridfair.classads.reader import SourcedAd
from gridfair.classads.views import AdConfig, machine_view, machines_from_ads

#: What says an ad is the one last read (see the module docstring); read with every slot.
SAME_AD = ("Name", "LastHeardFrom", "UpdateSequenceNumber", "DaemonStartTime")


class KeptSlots:
    """The slot views of the last read, by what says their ad is the same (`SAME_AD`)."""

    def __init__(self, config: AdConfig, full_read_every: int) -> None:
        """`full_read_every`: every slot viewed anew every this many reads (0: only when the
        projection changes)."""
        self.config = config
        self.full_read_every = full_read_every
        self._views: dict[tuple, Machine] = {}
        self._projection: tuple[str, ...] = ()
        self._reads = 0  # reads since every slot was viewed anew
        #: Views kept in the last read.
        self.kept = 0

    def machines(self, slots: Sequence[SourcedAd], projection: Sequence[str],
                 ) -> tuple[list[Machine], list[SkippedAd]]:
        """`machines_from_ads` of the slots (lenient), keeping the view of each ad that is
        the last read's."""
        self._reads += 1
        every = self.full_read_every
        if tuple(projection) != self._projection or (every and self._reads >= every):
            self._views, self._projection, self._reads = {}, tuple(projection), 0
        last, now = self._views, {}
        self.kept = 0

        def view(sourced: SourcedAd) -> Machine:
            values = tuple(sourced.ad.get(name) for name in SAME_AD)
            if type(values[1]) is not int:  # no stamp of the collector's: not known the same
                return machine_view(sourced, self.config)
            key = (sourced.source, *values)
            machine = last.get(key)
            if machine is None:
                machine = machine_view(sourced, self.config)
            else:
                self.kept += 1
            now[key] = machine
            return machine

        found = machines_from_ads(slots, self.config, lenient=True, view=view)
        self._views = now
        return found
