"""The SWF reader: fields, header, gzip or plain, malformed lines skipped and reported."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from gridfair.errors import InputError
from gridfair.sim.workloads.swf import FIELDS, REPORTED_SKIPS, read_swf
from tests.conftest import TEST_DATA, shared_file

SLICE = TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf"
GOOD = "  15   599850 192180   3477    4     -1    -1    4  53940    -1  1  12  12  -1 -1 -1 -1 -1"


def write(tmp_path: Path, text: str, name: str = "t.swf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_slice_fields_and_header():
    trace = read_swf(SLICE)
    assert len(trace.jobs) == 300
    assert trace.skipped == []
    assert trace.header_int("MaxProcs") == 100
    assert trace.header["Installation"] == "Swedish Royal Institute of Technology (KTH)"
    first = trace.jobs[0]
    assert (first.job_id, first.submit_time, first.wait_time, first.run_time) == (
        15, 599850.0, 192180.0, 3477.0)
    assert (first.allocated_procs, first.requested_procs, first.requested_time) == (4, 4, 53940.0)
    assert (first.status, first.user_id, first.group_id, first.think_time) == (1, 12, 12, -1.0)
    assert first.line == 25  # 24 header lines come first
    assert [job.job_id for job in trace.jobs] == list(range(15, 315))


def test_processors_prefers_requested_then_allocated(tmp_path):
    fields = GOOD.split()
    fields[7] = "-1"  # requested procs unknown: allocated (4) is used
    no_request = " ".join(fields)
    fields[4] = "-1"  # neither known
    neither = " ".join(fields)
    trace = read_swf(write(tmp_path, "\n".join([GOOD, no_request, neither]) + "\n"))
    assert [job.processors for job in trace.jobs] == [4, 4, -1]


def test_gzip_is_recognised_by_content_not_name(tmp_path):
    plain = SLICE.read_bytes()
    disguised = tmp_path / "trace.swf"  # gzip content under a plain name
    disguised.write_bytes(gzip.compress(plain))
    named = tmp_path / "trace.swf.gz"
    named.write_bytes(gzip.compress(plain))
    assert read_swf(disguised).jobs == read_swf(SLICE).jobs == read_swf(named).jobs


def test_malformed_lines_are_skipped_with_their_numbers(tmp_path):
    text = "\n".join([
        "; MaxProcs: 8",
        GOOD,
        "1 2 3",                                  # line 3: too few fields
        GOOD.replace("3477", "abc"),             # line 4: not a number
        GOOD.replace(" 4  53940", " 4.5  53940"),  # line 5: requested procs not an integer
        "",
        GOOD.replace("3477", "nan"),             # line 7: not finite
        GOOD,
    ]) + "\n"
    trace = read_swf(write(tmp_path, text))
    assert len(trace.jobs) == 2
    assert [skip.line for skip in trace.skipped] == [3, 4, 5, 7]
    assert "3 fields, expected 18" in trace.skipped[0].reason
    assert "field 4 (run_time)" in trace.skipped[1].reason
    assert "field 8 (requested_procs) is not an integer" in trace.skipped[2].reason
    report = trace.skip_report()
    assert report is not None and "4 malformed lines" in report and "line 3:" in report


def test_report_names_only_the_first_few(tmp_path):
    bad_count = REPORTED_SKIPS + 3
    trace = read_swf(write(tmp_path, "x\n" * bad_count + GOOD + "\n"))
    report = trace.skip_report()
    assert f"line {REPORTED_SKIPS}:" in report and f"line {REPORTED_SKIPS + 1}:" not in report
    assert "and 3 more" in report
    assert read_swf(SLICE).skip_report() is None


def test_nothing_usable_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match=r"no usable job line.*2 malformed lines.*line 2"):
        read_swf(write(tmp_path, "; only a header\nfoo bar\n1 2\n"))
    with pytest.raises(InputError, match="no usable job line"):
        read_swf(write(tmp_path, "", "empty.swf"))
    with pytest.raises(InputError, match="cannot read SWF file"):
        read_swf(tmp_path / "missing.swf")
    broken = tmp_path / "broken.swf.gz"
    broken.write_bytes(gzip.compress(SLICE.read_bytes())[:200])
    with pytest.raises(InputError, match="cannot read SWF file"):
        read_swf(broken)


def test_full_kth_trace():
    trace = read_swf(shared_file("swf/KTH-SP2-1996-2.1-cln.swf.gz"))
    assert len(trace.jobs) == trace.header_int("MaxRecords") == 28476
    assert trace.skipped == []
    assert len(FIELDS) == 18
