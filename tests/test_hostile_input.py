"""No file kills the process or makes a reader unbounded: random and adversarial Unicode
(lone surrogates, NUL, bidi controls, overlong UTF-8), nesting and sizes, fed to every reader
of ads and history, give ads whose every string the bindings can hold, or ads skipped with a
reason naming the attribute, or one InputError; never a crash or another exception. The
commands that died with SIGSEGV on a lone surrogate (issue 37) are run as processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import classad2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridfair.ad_views import SkippedAd
from gridfair.classads.bounds import MAX_AD, MAX_ATTRIBUTE
from gridfair.classads.history import read_history
from gridfair.classads.reader import SourcedAd, read_ads, reread
from gridfair.classads.views import AdConfig, job_view
from gridfair.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
POOL = ROOT / "tests" / "data" / "daemon" / "pool"
JOB = {"ClusterId": 1, "ProcId": 0, "QDate": 1000, "JobStatus": 1, "RequestCpus": 1,
       "Owner": "ann", "User": "ann@pool", "CompletionDate": 0}

ADVERSARIAL = ["\ud800", "\udfff", "a\udc80b", "\0", "a\0b", "\u202e\u2066evil\u2069",
               "\ufeff", "\U0010ffff", "\x7f\x1b[2J", '"\\', "/Expr(\ud800)/", "é" * 3]
STRINGS = st.one_of(st.sampled_from(ADVERSARIAL),
                    st.text(st.characters(exclude_categories=()), max_size=12))
#: Integers past a ClassAd's 64 bits too (the bindings failed on them with a SystemError).
INTEGERS = st.one_of(st.integers(), st.sampled_from([1 << 63, -(1 << 63) - 1, 10 ** 400]))
VALUES = st.recursive(st.one_of(STRINGS, INTEGERS, st.booleans(), st.none()),
                      lambda inner: st.one_of(st.lists(inner, max_size=3),
                                              st.dictionaries(STRINGS, inner, max_size=3)),
                      max_leaves=12)


def _usable(value) -> bool:
    """Whether every string in a value read (an ad, a job) is one the bindings hold."""
    if isinstance(value, str):
        return "\0" not in value and value.encode("utf-8", "surrogatepass") == \
            value.encode("utf-8", "replace")
    if isinstance(value, dict):
        return all(_usable(name) and _usable(item) for name, item in value.items())
    if isinstance(value, list | tuple):
        return all(map(_usable, value))
    return True


def _read_all(path: Path) -> list:
    """What every reader makes of the file: ads, jobs and skipped ads; InputError allowed."""
    read: list = []
    for reader in (lambda: read_ads(path, lenient=True)[0],
                   lambda: list(read_history([path])),
                   lambda: reread(path.read_text("utf-8", "replace"), str(path), {},
                                  lambda sourced: sourced, lambda sourced, error: error).values):
        try:
            read.extend(reader())
        except InputError as error:
            assert _usable(str(error).encode("utf-8", "replace").decode())
    return read


def _check(read: list) -> None:
    for item in read:
        if isinstance(item, SkippedAd):
            assert item.reason
            continue
        ad = getattr(item, "ad", item)
        values = dict(ad.items()) if hasattr(ad, "items") else vars(item) if hasattr(
            item, "__dict__") else {name: getattr(item, name) for name in item.__slots__}
        for name, value in values.items():
            assert _usable(name), name
            assert _usable(value if not hasattr(value, "eval") else str(value)), (name, value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(STRINGS, VALUES, max_size=4),
       st.sampled_from(["json", "lines", "raw", "escaped"]))
def test_random_unicode_and_nesting_never_crash_a_reader(extra, layout):
    ads = [{**JOB, **extra}, {**JOB, "ClusterId": 2, **{k: v for k, v in extra.items()
                                                        if k.lower() not in ("clusterid",)}}]
    if layout == "json":
        data = json.dumps(ads).encode()
    elif layout == "lines":  # -jsonl, written raw: surrogates as invalid UTF-8 bytes
        data = "\n".join(json.dumps(ad, ensure_ascii=False) for ad in ads).encode(
            "utf-8", "surrogatepass")
    elif layout == "escaped":  # new syntax, every byte past ASCII a string escape (\\377)
        data = "\n".join("[ " + "; ".join(f"{_name(name)} = {_escaped(value)}"
                                          for name, value in ad.items()) + " ]"
                          for ad in ads).encode()
    else:  # old syntax, each string quoted as is
        data = "\n\n".join("\n".join(f"{name} = {json.dumps(value, ensure_ascii=False)}"
                                     for name, value in ad.items()) for ad in ads).encode(
            "utf-8", "surrogatepass")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ads"
        path.write_bytes(data)
        _check(_read_all(path))


def _name(name: str) -> str:
    return "'" + "".join(c if c.isalnum() and c.isascii() else "_" for c in name) + "x'"


def _escaped(value) -> str:
    """A value as a ClassAd literal whose strings write every byte past ASCII, and the
    quote and backslash, as octal escapes: any byte, valid UTF-8 or not."""
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
        return '"' + "".join(chr(byte) if 32 <= byte < 127 and byte not in b'"\\' else
                             f"\\{byte:03o}" for byte in raw) + '"'
    if isinstance(value, list):
        return "{" + ", ".join(map(_escaped, value)) + "}"
    if isinstance(value, dict):
        return "[" + "; ".join(f"{_name(k)} = {_escaped(v)}" for k, v in value.items()) + "]"
    return "undefined" if value is None else str(value).lower() if isinstance(
        value, bool) else str(value)


def test_a_string_escape_to_bytes_that_are_not_utf8_skips_its_ad(tmp_path):
    """`"\\377"` in a new-syntax file, an expression of a JSON dump, or an ad of the pool
    (a user may write it in any attribute of their job): named, never a traceback."""
    (tmp_path / "q.ads").write_text('[ ClusterId = 1; ProcId = 0; QDate = 5; JobStatus = 1; '
                                    'Owner = "a"; User = "a@x" ]\n[ ClusterId = 2; ProcId = 0; '
                                    'QDate = 5; JobStatus = 1; Owner = "a"; User = "b\\377" ]\n')
    (tmp_path / "q.json").write_text(json.dumps([JOB, {**JOB, "ClusterId": 2,
                                                      "Cmd": '/Expr(strcat("\\377"))/'}]))
    for name, attribute in (("q.ads", "User"), ("q.json", "Cmd")):
        ads, [skip] = read_ads(tmp_path / name, lenient=True)
        assert len(ads) == 1 and skip.index == 2
        assert f"attribute {attribute}: not UTF-8 text" in skip.reason, skip.reason
    pool_ad = classad2.ClassAd('[ ClusterId = 2; ProcId = 0; QDate = 5; JobStatus = 1; '
                               'Owner = "a"; User = "b\\377" ]')
    with pytest.raises(InputError, match="attribute User: not UTF-8 text"):
        job_view(SourcedAd(pool_ad, "schedd s", 1, None))


@pytest.mark.parametrize("bad", ["\ud800", "a\0b"])
@pytest.mark.parametrize("where", ["name", "value", "nested"])
def test_a_string_the_bindings_cannot_hold_skips_its_ad_naming_the_attribute(
        tmp_path, bad, where):
    ad = {**JOB, "ClusterId": 2}
    if where == "name":
        ad[bad] = 1
    elif where == "value":
        ad["Owner"] = bad
    else:
        ad["Nested"] = [{"a": [bad]}]
    path = tmp_path / "q.json"
    path.write_text(json.dumps([JOB, ad]))
    ads, skipped = read_ads(path, lenient=True)
    assert [sourced.ad["ClusterId"] for sourced in ads] == [1]
    [skip] = skipped
    assert skip.index == 2 and ("attribute" in skip.reason), skip.reason
    assert ("surrogate" in skip.reason) if bad == "\ud800" else ("NUL" in skip.reason)


def test_json_nested_past_the_recursion_limit_is_a_clear_error_or_skip(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(json.dumps([JOB])[:-2] + ', "A": ' + "[" * 100_000 + "]" * 100_000
                    + "}, " + json.dumps({**JOB, "ClusterId": 2}) + "]")
    with pytest.raises(InputError, match="ad #1: JSON ad nested deeper than 64 levels"):
        read_ads(path)
    jobs = list(read_history([path]))
    assert isinstance(jobs[0], SkippedAd) and "nested deeper" in jobs[0].reason
    assert all(isinstance(job, SkippedAd) for job in jobs)  # never a RecursionError


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "workload"
    os.mkfifo(fifo)
    for read in (read_ads, lambda path: list(read_history([path]))):
        with pytest.raises(InputError, match="not a regular file .a FIFO."):
            read(fifo)
    for name in ("workload", "tasks.csv", "jobs.swf"):
        named = tmp_path / name
        if not named.exists():
            os.mkfifo(named)
        result = _run("simulate", "--workload", str(named), "--capacity", "4", "--policy",
                      "sdrf", cwd=tmp_path)
        assert result.returncode == 2 and "not a regular file" in result.stderr, result.stderr


def _long_ad(lines: int, width: int) -> str:
    return "".join(f"A{number} = \"{'x' * width}\"\n" for number in range(lines))


@pytest.mark.parametrize("shape", ["attribute", "ad"])
def test_an_ad_past_the_limits_is_skipped_naming_the_limit(tmp_path, shape):
    job = "".join(f"{name} = {json.dumps(value)}\n" for name, value in JOB.items())
    big = (f"Huge = \"{'x' * (MAX_ATTRIBUTE + 10)}\"\n" if shape == "attribute"
           else _long_ad(MAX_AD // (MAX_ATTRIBUTE // 2) + 2, MAX_ATTRIBUTE // 2))
    path = tmp_path / "history.long"
    path.write_text(job + "\n" + job.replace("ClusterId = 1", "ClusterId = 2") + big + "\n"
                    + job.replace("ClusterId = 1", "ClusterId = 3"))
    limit = "1 MiB an attribute" if shape == "attribute" else "16 MiB an ad"
    _, skipped = read_ads(path, lenient=True)
    assert [skip.index for skip in skipped] == [2] and limit in skipped[0].reason
    read = list(read_history([path]))
    assert [getattr(job, "id", None) for job in read] == ["1.0", None, "3.0"]
    if shape == "ad":  # the history reader frames it; the attribute is the ad reader's
        assert limit in read[1].reason, read[1].reason


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridfair", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_the_commands_that_died_on_a_lone_surrogate_name_it_and_go_on(tmp_path):
    bad = json.dumps([JOB, {**JOB, "ClusterId": 2, "Owner": "\ud800", "User": "\ud800"}])
    (tmp_path / "q.json").write_text(bad)
    shares = _run("shares", "--machines", str(POOL / "basic4slot.status"), "--jobs", "q.json",
                  "--format", "json", cwd=tmp_path)
    assert shares.returncode == 0, shares.stderr
    assert "surrogate" in json.dumps(json.loads(shares.stdout)["skipped"])
    done = {"JobStatus": 4, "JobStartDate": 1100, "JobCurrentStartDate": 1100,
            "CompletionDate": 1200, "RemoteWallClockTime": 100, "MachineAttrMips0": 1000}
    (tmp_path / "h.json").write_text(json.dumps(
        [{**JOB, **done}, {**JOB, **done, "ClusterId": 2, "User": "\ud800"}]))
    simulate = _run("simulate", "--workload", "h.json", "--workload-format", "condor-history",
                    "--machines", str(POOL / "basic4slot.status"), "--policy", "sdrf",
                    cwd=tmp_path)
    assert simulate.returncode == 0, simulate.stderr
    assert "surrogate" in simulate.stdout + simulate.stderr
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    (tmp_path / "pool" / "jobs.queue").write_text(bad)
    (tmp_path / "c.toml").write_text(
        '[daemon]\nstore = "state.db"\n[backend]\nkind = "files"\n[backend.files]\n'
        'directory = "pool"\nactions = "a.jsonl"\n[safety]\nmax_snapshot_age = 3600\n')
    daemon = _run("daemon", "--config", "c.toml", "--once", cwd=tmp_path)
    assert daemon.returncode == 0, daemon.stderr
    assert "surrogate" in daemon.stderr + daemon.stdout


@pytest.mark.parametrize("name", ["tasks.csv", "jobs.swf"])
def test_a_task_list_with_a_line_past_the_limit_is_refused_naming_it(tmp_path, name):
    """A task list that never ends its line is refused at the limit, not read whole."""
    path = tmp_path / name
    path.write_text("0,1,2,ann,job-0,1,1\n" + "9" * (MAX_ATTRIBUTE + 1))
    result = _run("simulate", "--workload", str(path), "--capacity", "4", "--policy", "sdrf",
                  cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"{path}:2: a line longer than the limit of 1 MiB a line" in result.stderr


def test_a_json_ad_past_the_limits_is_skipped_naming_the_limit(tmp_path):
    """Attributes each under the limit, together past the ad's; a list past the attribute's."""
    near = "x" * (MAX_ATTRIBUTE - 10)
    wide = {**JOB, "ClusterId": 2, **{f"A{n}": near for n in range(MAX_AD // MAX_ATTRIBUTE + 1)}}
    long = {**JOB, "ClusterId": 3, "L": ["ab"] * (MAX_ATTRIBUTE // 2)}
    path = tmp_path / "q.json"
    path.write_text(json.dumps([JOB, wide, long]))
    ads, skipped = read_ads(path, lenient=True)
    assert [sourced.ad["ClusterId"] for sourced in ads] == [1]
    assert [(skip.index, skip.reason.rpartition("limit of ")[2]) for skip in skipped] == [
        (2, "16 MiB an ad"), (3, "1 MiB an attribute")]


def test_an_expression_of_too_many_operators_is_skipped_not_unparsed(tmp_path):
    """`Requirements = 1+1+...+1` of 40,000 terms parses, then classad2's unparser and copy
    overflow the stack (SIGSEGV): `shares` on such a queue dump died. Refused, named."""
    deep = "1+" * 40_000 + "1"
    queue = (POOL / "jobs.queue").read_text().split("\n\n")
    queue[0] = queue[0].rstrip("\n") + f"\nRequirements = {deep}\n"
    (tmp_path / "jobs.queue").write_text("\n\n".join(queue))
    shares = _run("shares", "--machines", str(POOL / "basic4slot.status"), "--jobs",
                  "jobs.queue", "--format", "json", cwd=tmp_path)
    assert shares.returncode == 0, shares.stderr
    [skip] = json.loads(shares.stdout)["skipped"]
    assert "attribute Requirements: an expression of 40000 operators" in skip["reason"]
    (tmp_path / "q.json").write_text(json.dumps([JOB, {**JOB, "ClusterId": 2,
                                                      "Rank": f"/Expr({deep})/"}]))
    ads, [skip] = read_ads(tmp_path / "q.json", lenient=True)
    assert len(ads) == 1 and "40000 operators" in skip.reason


# ------------------------------------------------ the ad reader (shares --jobs, files backend)
_AD_CONFIG = AdConfig.with_attributes(None, None)
_ENDLESS_AD_READ = """
import resource, sys
from pathlib import Path
from gridfair.classads.reader import read_ads
from gridfair.classads.views import job_view
from gridfair.daemon.backends.files import read_dumps
path = Path(sys.argv[1])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ads, skipped = read_ads(path, lenient=True)
dump = read_dumps([path], job_view, {}, jobs=True)
growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
print(len(ads), len(dump.values), round(growth))
print(skipped[0].index, skipped[0].reason)
print(dump.unparsed[0].index, dump.unparsed[0].reason)
"""


def test_an_endless_ad_is_skipped_naming_the_limit_in_memory_bounded_by_it(tmp_path):
    """A `-long` dump of one ad that never ends (80 MB): `read_ads` and the daemon's dump read
    skip it naming its line and the limit, and keep the ads after it, in memory bounded by
    the per-ad limit (reading the whole file took 2 bytes of RSS a byte of it)."""
    job = "".join(f"{name} = {json.dumps(value)}\n" for name, value in JOB.items())
    path = tmp_path / "jobs.queue"
    with path.open("w") as out:
        out.write(job + "\n" + job.replace("ClusterId = 1", "ClusterId = 2"))
        line = "".join(f"A{number} = {number}\n" for number in range(100_000))
        while out.tell() < 80 << 20:
            out.write(line)
        out.write("\n" + job.replace("ClusterId = 1", "ClusterId = 3"))
    done = subprocess.run([sys.executable, "-c", _ENDLESS_AD_READ, str(path)],
                          capture_output=True, text=True, timeout=300, check=True)
    counts, skipped, unparsed = done.stdout.splitlines()
    ads, jobs, growth = map(int, counts.split())
    assert (ads, jobs) == (2, 2)
    limit = "longer than the limit of 16 MiB an ad"
    second = len(JOB) + 2  # the line the endless ad starts on
    assert skipped.startswith(f"2 line {second}: an ad of ") and skipped.endswith(limit), \
        skipped
    assert unparsed == skipped
    assert growth < 3 * MAX_AD >> 20, growth  # MiB: the limit's, not the input's
    with pytest.raises(InputError, match=f"jobs.queue:{second}, ad #2: an ad of .*{limit}"):
        read_ads(path)


def test_a_fifo_job_dump_is_refused_not_read_as_an_empty_queue(tmp_path):
    """A FIFO has no size, as an empty queue's dump has none: it is refused, named."""
    from gridfair.daemon.backends import PoolUnavailable
    from gridfair.daemon.backends.files import AdDumps

    os.mkfifo(tmp_path / "jobs.queue")
    dumps = AdDumps([POOL / "basic4slot.status"], [tmp_path / "jobs.queue"], _AD_CONFIG)
    with pytest.raises(PoolUnavailable, match=r"jobs.queue: not a regular file \(a FIFO\)"):
        dumps.read()
    shares = _run("shares", "--machines", str(POOL / "basic4slot.status"), "--jobs",
                  "jobs.queue", cwd=tmp_path)
    assert shares.returncode == 2 and "not a regular file (a FIFO)" in shares.stderr, \
        shares.stderr


def test_a_lone_surrogate_in_a_json_dump_skips_its_ad_in_every_read(tmp_path):
    """`\\ud800` in a `-json` dump (SIGSEGV in classad2 when it reached it): the ad is
    skipped naming the attribute, by `read_ads` and by the daemon's dump read, first and
    steady (`reread` with the last read's memo)."""
    from gridfair.daemon.backends.files import AdDumps

    path = tmp_path / "jobs.queue"
    path.write_text(json.dumps([JOB, {**JOB, "ClusterId": 2, "Owner": "\ud800"},
                                {**JOB, "ClusterId": 3}]))
    ads, [skip] = read_ads(path, lenient=True)
    assert [sourced.ad["ClusterId"] for sourced in ads] == [1, 3]
    assert skip.index == 2 and skip.reason.startswith("attribute Owner: invalid Unicode: a "
                                                      "lone surrogate U+D800"), skip.reason
    dumps = AdDumps([POOL / "basic4slot.status"], [path], _AD_CONFIG)
    for _ in range(2):
        snapshot = dumps.read()
        queued = [job.id for job in snapshot.jobs if job.user == "ann@pool"]
        assert queued == ["1.0", "3.0"]  # the others run on the dump's slots
        [skipped] = [ad for ad in snapshot.skipped if ad.source == str(path)]
        assert skipped.index == 2 and "attribute Owner: invalid Unicode" in skipped.reason


def test_a_surrogate_written_as_utf8_bytes_skips_its_ad_naming_the_attribute(tmp_path):
    """A lone surrogate encoded as bytes (b"\\xed\\xa0\\x80", as CESU-8 or a careless writer
    makes it) is not UTF-8: its ad is skipped naming the attribute's line, by `read_ads` and
    by the daemon's dump read, the others read (the whole dump was refused)."""
    job = "".join(f"{name} = {json.dumps(value)}\n" for name, value in JOB.items())
    bad = job.replace("ClusterId = 1", "ClusterId = 2").replace('Owner = "ann"',
                                                                'Owner = "a\udb00n"')
    path = tmp_path / "jobs.queue"
    path.write_bytes((job + "\n" + bad + "\n" + job.replace("ClusterId = 1", "ClusterId = 3"))
                     .encode("utf-8", "surrogatepass"))
    ads, [skip] = read_ads(path, lenient=True)
    assert [sourced.ad["ClusterId"] for sourced in ads] == [1, 3]
    owner = len(job.splitlines()) + 2 + bad.splitlines().index('Owner = "a\udb00n"')
    assert skip.index == 2 and skip.reason.startswith(
        f"line {owner}, attribute Owner: not UTF-8 text"), skip.reason
    from gridfair.daemon.backends.files import AdDumps

    snapshot = AdDumps([POOL / "basic4slot.status"], [path], _AD_CONFIG).read()
    assert [job.id for job in snapshot.jobs if job.user == "ann@pool"] == ["1.0", "3.0"]
    assert [(ad.index, ad.reason) for ad in snapshot.skipped] == [(2, skip.reason)]
