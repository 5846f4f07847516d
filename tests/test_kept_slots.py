"""The htcondor backend's slot views kept between reads (`backends/htcondor/kept_slots.py`):
a slot whose ad the collector did not replace keeps its view, the very object; one it
replaced (a new `LastHeardFrom`) is viewed anew, as is every slot once the projection
changes."""

from __future__ import annotations

from gridfair.daemon.backends.htcondor import HTCondorBackend
from tests.test_backends import FakeCollector, FakeSchedd, _queues


def _read(backend: HTCondorBackend) -> dict[str, object]:
    return {machine.name: machine for machine in backend.read_snapshot().machines}


def test_a_slot_the_collector_did_not_hear_from_again_keeps_its_view() -> None:
    FakeSchedd.queues = _queues()
    collector = FakeCollector()
    backend = HTCondorBackend(collector, schedd_factory=FakeSchedd, lease_knob="")
    first = _read(backend)
    updated = next(ad for ad in collector.slots if ad.get("State") == "Unclaimed")
    updated["LastHeardFrom"] += 60
    updated["State"] = "Owner"
    again = _read(backend)
    name = updated["Name"]
    assert again[name].state == "Owner" and first[name].state == "Unclaimed"
    assert all(again[other] is view for other, view in first.items() if other != name)
    assert backend.reader.kept_slots.kept == len(first) - 1
    backend.reader.slot_projection["extra"] = "Extra"  # what the next read asks grew
    assert not any(view is first[name] for name, view in _read(backend).items())


def test_a_slot_ad_without_the_collectors_stamp_is_viewed_anew_every_read() -> None:
    FakeSchedd.queues = _queues()
    collector = FakeCollector()
    for ad in collector.slots:
        del ad["LastHeardFrom"]
    backend = HTCondorBackend(collector, schedd_factory=FakeSchedd, lease_knob="")
    first = _read(backend)
    assert not any(view is first[name] for name, view in _read(backend).items())
