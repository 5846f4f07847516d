"""What a daemon cycle keeps between reads (`reread` and its memo) and the collector
around it."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gridfair.classads import ad_text
from gridfair.classads.reader import (
    STALE_MEMO,
    AdFormat,
    ad_digest,
    parse_ads,
    read_ads,
    reread,
)
from gridfair.classads.views import job_view, machine_view, machines_from_ads, skipped_ad
from gridfair.core.collector import CycleCollector, collector_paused
from gridfair.daemon.backends.files import FilesBackend
from gridfair.daemon.config import validate
from gridfair.daemon.cycle import CycleRunner
from gridfair.daemon.store import Store
from gridfair.errors import InputError
from tests.harness.synthetic import job_ads, machine_ads, write_ads

JOB = 'MyType = "Job"\nClusterId = {cluster}\nProcId = 0\nOwner = "alice"\nJobStatus = 1\n\n'


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the inner block restores the outer's state
        assert gc.isenabled()
        gc.disable()
        with collector_paused():
            pass
        assert not gc.isenabled()  # a collector that was off stays off
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_a_daemon_cycle_leaves_its_pool_to_reference_counting(tmp_path: Path) -> None:
    # Each cycle makes a pool whose stages hold it and which holds them; closed at the end of
    # the cycle, it is freed at once instead of waiting, with all it holds, for the cyclic
    # collector (which at 100k jobs costs a fifth of a steady cycle to walk it).
    directory = tmp_path / "pool"
    directory.mkdir()
    machines = machine_ads(20, 4)
    jobs = job_ads(60, 4, machines, running=10)
    write_ads(directory / "pool.status", machines, AdFormat.OLD)
    write_ads(directory / "pool.queue", jobs, AdFormat.OLD)
    raw = {"daemon": {"store": "state.db"},
           "backend": {"kind": "files", "files": {"directory": "pool", "actions": "a.jsonl"}},
           "safety": {"max_snapshot_age": 1e12, "min_runtime": 0.0}}
    runner = CycleRunner(validate(raw, base=tmp_path),
                         FilesBackend(directory, tmp_path / "a.jsonl"), Store(tmp_path / "s.db"))
    assert runner.run().counts["decisions"] > 0  # the pool had work to decide on
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        runner.run()
        gc.collect()
        left = {type(item).__name__ for item in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not left & {"Pool", "UserState", "Negotiator"}


SLOT = ('MyType = "Machine"\nName = "slot{n}@a"\nGridOwner = "u{owner}@grid"\nMFlops = 1000\n'
        'Cpus = 1\nMemory = 1024\nState = "Unclaimed"\nActivity = "Idle"\n')


def _the_long_way(path: Path) -> tuple[list, list]:
    """Every ad parsed and viewed, as a cold read does (`read_ads`, `machines_from_ads`)."""
    ads, unparsed = read_ads(path, lenient=True)
    machines, refused = machines_from_ads(ads, lenient=True)
    return machines, unparsed + refused


def test_a_memo_keeps_this_reads_ads_only_and_an_unchanged_ad_gives_the_same_view(
        tmp_path: Path) -> None:
    dump = tmp_path / "pool.status"
    dump.write_text("\n".join(SLOT.format(n=n, owner=1) for n in (1, 2, 4)))
    first = reread(dump.read_text(), str(dump), {}, machine_view, skipped_ad)
    dump.write_text("\n".join(SLOT.format(n=n, owner=1) for n in (0, 2, 3)))
    second = reread(dump.read_text(), str(dump), first.memo, machine_view, skipped_ad)
    assert second.values[1] is first.values[1]  # slot 2's ad is unchanged: not built again
    assert second.values[0] is not first.values[0]
    assert [machine.name for machine in second.values] == ["slot0@a", "slot2@a", "slot3@a"]
    # Slots 1 and 4 left the dump; kept, the memo would hold 5 ads for a read of 3 (over
    # STALE_MEMO): it is remade from this read's ads.
    assert {machine.name for machine in second.memo.values()} == {"slot0@a", "slot2@a",
                                                                  "slot3@a"}


def test_a_memo_holds_few_ads_gone_from_the_dump_and_is_remade_past_the_bound(
        tmp_path: Path) -> None:
    dump = tmp_path / "pool.status"
    slots = list(range(20))
    dump.write_text("\n".join(SLOT.format(n=n, owner=1) for n in slots))
    read = reread(dump.read_text(), str(dump), {}, machine_view, skipped_ad)
    sizes = []
    for step in range(12):  # one slot leaves and one comes each read
        slots = [*slots[1:], 20 + step]
        dump.write_text("\n".join(SLOT.format(n=n, owner=1) for n in slots))
        last = read
        read = reread(dump.read_text(), str(dump), read.memo, machine_view, skipped_ad)
        assert [machine.name for machine in read.values] == [f"slot{n}@a" for n in slots]
        assert read.values[0] is last.values[1]  # unchanged ads are not built again
        sizes.append(len(read.memo))
        assert {machine.name for machine in read.memo.values()} >= {
            f"slot{n}@a" for n in slots}
    # Two new ad texts per read: the slot that came, and the one that was last (the last ad
    # of a dump has its newline in its text; once another follows, it reads differently). The
    # memo is kept and added to while it would hold at most STALE_MEMO times the read's ads
    # (25), and remade from the read's 20 past that.
    assert STALE_MEMO * len(slots) == 25
    assert sizes == [22, 24, 20] * 4


def test_an_unchanged_job_is_recognised_without_its_text_held_however_the_memo_is_handed_on(
        tmp_path: Path) -> None:
    # The memo knows an ad by a key of its text (an int, `ad_digest`), not the text: whether it
    # is kept (a few jobs change) or remade (many left), an unchanged job is the view built
    # before, and no text is held but the one the view keeps (`AdText`).
    dump = tmp_path / "pool.queue"
    job = JOB.replace("\n\n", "\nQDate = 1\n\n")
    clusters = list(range(1, 21))
    dump.write_text("".join(job.format(cluster=n) for n in clusters))
    read = reread(dump.read_text(), str(dump), {}, job_view, skipped_ad, keep_text=True)
    for step, kept in enumerate((19, 10), 1):  # a job leaves (memo kept), then ten (remade)
        clusters = clusters[-kept:] + [100 * step + n for n in range(20 - kept)]
        dump.write_text("".join(job.format(cluster=n) for n in clusters))
        last_views = {view.id: view for view in read.values}
        read = reread(dump.read_text(), str(dump), read.memo, job_view, skipped_ad,
                      keep_text=True)
        assert [view.id for view in read.values] == [f"{n}.0" for n in clusters]
        assert all(view is last_views[view.id] for view in read.values[:kept])  # not rebuilt
        assert all(type(key) is int for key in read.memo)
        assert {ad_digest(view.ad.text) for view in read.values} <= read.memo.keys()
    assert len(read.memo) == 20  # remade: this read's ads alone


def test_a_reread_builds_what_the_long_way_does_however_the_ads_move(tmp_path: Path) -> None:
    # Blank text first, a comment, spaces on a blank line, an ad that does not parse, an ad
    # with no owner, and no newline at the end: every line number of a skipped ad must be the
    # one a cold read gives, on the first read and after ads above them come and go.
    broken, ownerless = 'Name = "bad"\nCpus = (((\n', 'Name = "slot9@a"\nCpus = 1\n'
    layouts = [
        ["\n\n", SLOT.format(n=1, owner=1), "# a comment\n", SLOT.format(n=2, owner=2),
         broken, ownerless, SLOT.format(n=3, owner=1).rstrip("\n")],
        [SLOT.format(n=0, owner=3), SLOT.format(n=2, owner=2), " \t", broken,
         SLOT.format(n=4, owner=2), ownerless, SLOT.format(n=3, owner=1)],
        ["\n", SLOT.format(n=2, owner=2), broken, SLOT.format(n=3, owner=2)],
        # Blank lines only between ads, and one each: framed by the fast split.
        [SLOT.format(n=2, owner=2), broken, ownerless, SLOT.format(n=5, owner=1)],
    ]
    dump = tmp_path / "pool.status"
    memo: dict = {}
    reused = 0
    for layout in layouts:
        dump.write_text("\n".join(layout))
        before = memo
        read = reread(dump.read_text(), str(dump), memo, machine_view, skipped_ad)
        memo = read.memo
        machines, skipped = _the_long_way(dump)
        assert read.values == machines
        assert read.unparsed + read.refused == sorted(skipped, key=lambda ad: ad.index)
        assert any("line" in ad.reason for ad in read.unparsed)
        reused += sum(1 for view in read.values if view in before.values())
    assert reused >= 2  # unchanged ads were taken from the memo, not built again


def test_a_name_used_twice_is_skipped_as_the_long_way_skips_it(tmp_path: Path) -> None:
    directory = tmp_path / "pool"
    directory.mkdir()
    status = directory / "pool.status"
    status.write_text("\n".join(SLOT.format(n=n, owner=1) for n in (1, 2, 1)))
    (directory / "pool.queue").write_text(JOB.format(cluster=1).replace("\n\n", "\nQDate = 1\n"))
    backend = FilesBackend(directory, tmp_path / "a.jsonl")
    for _ in range(2):  # cold, then with the memo warm
        snapshot = backend.read_snapshot()
        machines, skipped = _the_long_way(status)
        assert list(snapshot.machines) == machines and len(machines) == 2
        assert list(snapshot.skipped) == skipped
        assert "duplicate machine name (also ad #1" in skipped[0].reason
        status.touch()


def test_a_big_cycles_survivors_are_frozen_and_handed_back_on_the_sweep() -> None:
    collector = CycleCollector(freeze_after=5_000, sweep_every=3)
    kept: list[list[int]] = []
    gc.unfreeze()
    try:
        with collector.cycle():  # a small cycle: left to the collector
            kept.append([1])
        assert gc.get_freeze_count() == 0 and gc.isenabled()
        with collector.cycle():  # a big one: what it made is out of the collector's sight
            kept.extend([n] for n in range(10_000))
        assert gc.get_freeze_count() >= 10_000 and collector.frozen == 1
        with collector.cycle():  # the sweep: everything handed back
            pass
        assert gc.get_freeze_count() == 0 and gc.isenabled()
    finally:
        gc.unfreeze()


# Pieces of old-syntax text: attribute lines, a line that does not parse, and every kind of
# separator the blank-line runs know (longer runs, blanks and carriage returns on them).
TEXT_PIECES = st.sampled_from(["A = 1", 'B = "x"', "C = A + 1", "D = (((", "\n", "\n\n",
                               "\n\n\n", "\n \n", "\n\t\n", "\r\n", "\r\n\r\n", " ", "\t"])
OLD_TEXT = st.lists(TEXT_PIECES, min_size=1, max_size=40).map("".join).filter(str.strip)


def _content(sourced):
    return tuple(sorted((name, str(value)) for name, value in sourced.ad.items()))


def _as_read_cold(text: str) -> tuple[list, list]:
    ads, skipped = parse_ads(text, "dump", AdFormat.OLD, lenient=True)
    return [_content(sourced) for sourced in ads], [(ad.index, ad.reason) for ad in skipped]


@settings(max_examples=1000, deadline=None)
@given(earlier=OLD_TEXT, before=OLD_TEXT, after=OLD_TEXT)
# A blank block between two others, a blank line inside a block, at its start, at its end.
@example(earlier="A = 1", before="B = 2\n\n \n\nD = (((\n", after="")
@example(earlier="A = 1", before="B = 2\n \nC = 3\n\n", after="")
@example(earlier="A = 1", before="B = 2\n\n \nD = 4\n\n", after="")
@example(earlier="A = 1", before="B = 2\n \n\nD = 4\n\n", after="")
def test_a_reread_after_any_earlier_read_frames_as_a_cold_read_does(earlier, before,
                                                                     after) -> None:
    # The cut at "\n\n" and the memo's blocks must give the ads, and the skipped ads' indexes
    # and lines, of the blank-line runs' framing, whatever the earlier read left in the memo
    # and wherever its blocks stand now.
    try:
        memo = reread(earlier, "dump", {}, _content, skipped_ad).memo
    except InputError:
        memo = {}
    text = before + earlier + after
    try:
        read = reread(text, "dump", memo, _content, skipped_ad)
    except InputError:
        assert _as_read_cold(text) == ([], [])
        return
    assert (read.values, [(ad.index, ad.reason) for ad in read.unparsed]) == _as_read_cold(text)


def test_an_ad_is_keyed_by_a_digest_when_the_string_hash_has_a_known_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # PYTHONHASHSEED set: anyone knowing it could write two ads of one string hash, so the
    # memo's keys are digests; unset, the process's random key and the text's length.
    texts = ['MyType = "Job"\nClusterId = 1\n', 'MyType = "Job"\nClusterId = 2\n']
    assert ad_text.ad_digests(texts) == [(len(text) << 64) | (hash(text) & (2 ** 64 - 1))
                                         for text in texts]
    monkeypatch.setattr(ad_text, "KEYED_HASH", False)
    digests = ad_text.ad_digests(texts)
    assert [len(digest) for digest in digests] == [16, 16] and digests[0] != digests[1]
    assert ad_text.ad_digest(texts[0]) == digests[0]
