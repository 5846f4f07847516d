"""The daemon's own ad in the pool: sent to, and taken out of, every collector that answered
the last read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import classad2

from gridfair.daemon.backends import ActionFailed
from gridfair.daemon.backends.htcondor.state import POOL_ERRORS, PoolState, probe_collector


class CollectorAdvert:
    """The daemon's ad on the collectors `PoolState` lists."""

    def __init__(self, state: PoolState) -> None:
        self.state = state

    def advertise(self, ad: Mapping[str, Any]) -> None:
        """The daemon's ad to the collector, as a generic ad (UPDATE_AD_GENERIC): the
        collector takes those from DAEMON-authorised accounts only
        (configs/htcondor-pool.config grants it to the daemon's account there alone)."""
        self._to_collector(classad2.ClassAd(dict(ad)), "UPDATE_AD_GENERIC")

    def withdraw_ad(self, ad: Mapping[str, Any]) -> None:
        query = classad2.ClassAd({"MyType": "Query", "TargetType": ad["MyType"],
                                  "Name": ad["Name"]})
        query["Requirements"] = classad2.ExprTree(f"Name == {classad2.quote(ad['Name'])}")
        self._to_collector(query, "INVALIDATE_ADS_GENERIC")

    def _to_collector(self, ad: classad2.ClassAd, command: str) -> None:
        """`command` with `ad` to every collector that answered the last read (a daemon
        updates every collector of its pool; each of an HA pair must list gridfair); an
        ActionFailed naming those that refused, once all were sent to."""
        refusals, silent = [], []
        for name, collector in self.state.for_actions():
            try:
                collector.advertise([ad], command)
            except POOL_ERRORS as error:
                who = name if len(self.state.collectors) > 1 else "the collector"
                # At a pool's shutdown the collector simply stopped (the bindings say only
                # "Failed to advertise"): one that answers no query either is said to be
                # gone, without asking whether the account may advertise.
                if self._answers(collector):
                    refusals.append(f"{who} refused {command} ({error})")
                else:
                    silent.append(f"{who} does not answer {command} ({error})")
        if refusals:
            raise ActionFailed(f"advert: {'; '.join(refusals + silent)}: is the daemon's "
                               "account allowed DAEMON there?")
        if silent:
            raise ActionFailed(f"advert: {'; '.join(silent)}")

    @staticmethod
    def _answers(collector: Any) -> bool:
        try:
            probe_collector(collector)
        except POOL_ERRORS:
            return False
        return True

