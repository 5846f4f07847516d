"""Reading ad files: the three formats, detection, and errors that name file, line and ad."""

from __future__ import annotations

from pathlib import Path

import classad2
import pytest

from gridfair.classads.reader import AdFormat, detect_format, parse_ads, read_ads
from gridfair.errors import InputError
from tests.conftest import TEST_DATA
from tests.harness.synthetic import format_ads

REAL = TEST_DATA / "htcondor"


@pytest.mark.parametrize(
    ("name", "count", "names"),
    [
        ("basic4slot", 4, [f"slot{i}@ingwe.cs.wisc.edu" for i in range(1, 5)]),
        ("partionable8core", 5, ["slot1@ingwe.cs.wisc.edu"]
         + [f"slot1_{i}@ingwe.cs.wisc.edu" for i in range(1, 5)]),
        ("small1slot", 1, ["ingwe.cs.wisc.edu"]),
        ("test.old.ad", 1, [None]),
    ],
)
def test_real_ads_are_read_whole(name: str, count: int, names: list[str | None]) -> None:
    ads, skipped = read_ads(REAL / name)
    assert skipped == []
    assert [sourced.ad.get("Name") for sourced in ads] == names
    assert [sourced.index for sourced in ads] == list(range(1, count + 1))
    # Every attribute line became an attribute: nothing was dropped silently.
    lines = (REAL / name).read_text().splitlines()
    assert sum(len(sourced.ad) for sourced in ads) == sum(1 for line in lines if line.strip())


def test_first_lines_of_real_ads() -> None:
    ads, _ = read_ads(REAL / "basic4slot")
    lines = (REAL / "basic4slot").read_text().splitlines()
    for sourced in ads:
        assert lines[sourced.line - 1].strip()
        assert sourced.line == 1 or not lines[sourced.line - 2].strip()


@pytest.mark.parametrize("ad_format", list(AdFormat))
def test_the_three_formats_give_the_same_ads(ad_format: AdFormat, tmp_path: Path) -> None:
    original, _ = read_ads(REAL / "partionable8core")
    path = tmp_path / "ads"
    path.write_text(format_ads([sourced.ad for sourced in original], ad_format))
    assert detect_format(path.read_text()) is ad_format
    again, skipped = read_ads(path)
    assert skipped == []
    assert [sourced.ad for sourced in again] == [sourced.ad for sourced in original]
    # Expressions stay expressions in every format (JSON's "\/Expr(...)\/").
    assert isinstance(again[0].ad.lookup("Requirements"), classad2.ExprTree)
    assert again[0].ad.eval("SlotWeight") == original[0].ad.eval("SlotWeight")


def test_format_override_beats_detection(tmp_path: Path) -> None:
    path = tmp_path / "ads"
    path.write_text("[ A = 1 ]\n")
    with pytest.raises(InputError):
        read_ads(path, "json")
    assert read_ads(path, "new")[0][0].ad["A"] == 1


def test_new_syntax_framing_ignores_brackets_in_strings_and_comments() -> None:
    text = '// a ] comment\n[ A = "x]y["; B = [ C = 1 ]; /* ] */ D = { 1, 2 } ]\n\n[ E = 2 ]\n'
    ads, _ = parse_ads(text, "f")
    assert [dict(sourced.ad).get("A") for sourced in ads] == ["x]y[", None]
    assert [sourced.line for sourced in ads] == [2, 4]


@pytest.mark.parametrize(
    ("text", "ad_format", "expected"),
    [
        ('A = 1\n\nB = 2\nC = = 3\n', None, "f:4, ad #2: malformed ad: cannot parse 'C = = 3'"),
        ('[ A = 1 ]\n[ B = = 2 ]\n', None, "f:2, ad #2: malformed ad: classad2 cannot parse it"),
        ('[ A = 1 ]\n[ B = 2\n', None, "f:2, ad #2: malformed ad: '[' is never closed"),
        ('[ A = 1 ]\njunk\n', None, "f:2, ad #2: text outside any [ ... ] ad: 'junk'"),
        ('[ A = 1 ]\n/* x\n */\n\n] [ B = 1 ]', None, "f:5, ad #2: text outside any [ ... ] ad: "
         "']'"),
        ('[{"A": 1}, 7]', None, "f, ad #2: not a JSON object but int"),
        ('[{"A": "\\/Expr(1 +)\\/"}]', None, "f, ad #1, attribute A: unusable value"),
        ('[{"A": 1},', "json", "f, ad #2: not valid JSON: truncated JSON: the list of ads "
         "is never closed"),
        ('A = 1', "xml", "unknown ad format 'xml'"),
    ],
)
def test_malformed_input_is_one_line_naming_where(text: str, ad_format: str | None,
                                                  expected: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_ads(text, "f", ad_format)
    message = str(caught.value)
    assert message.startswith(expected)
    assert "\n" not in message


def test_lenient_reading_skips_the_bad_ad_and_keeps_the_rest() -> None:
    ads, skipped = parse_ads("A = 1\n\nB = = 2\n\nC = 3\n", "f", lenient=True)
    assert [dict(sourced.ad) for sourced in ads] == [{"A": 1}, {"C": 3}]
    assert [(item.source, item.index) for item in skipped] == [("f", 2)]
    assert skipped[0].reason == "line 3: malformed ad: cannot parse 'B = = 2'"


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "no such file"), ("", "empty: no ads in it"), ("\n  \n", "empty: no ads in it"),
     (b"\xff\xfe A = 1\n\x00", "not text (a NUL byte at character 9)")],
)
def test_unreadable_or_empty_files(tmp_path: Path, content: str | bytes | None,
                                   expected: str) -> None:
    path = tmp_path / "ads"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(InputError) as caught:
        read_ads(path, lenient=True)
    assert str(caught.value).startswith(f"{path}: {expected}")


def test_bytes_that_are_not_utf8_skip_their_ad_naming_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "ads"
    path.write_bytes(b"A = 1\n\nB = 2\nC = \"caf\xe9\"\n\n\xff\xfe D = 1\n\nE = 3\n")
    ads, skipped = read_ads(path, lenient=True)
    assert [dict(sourced.ad) for sourced in ads] == [{"A": 1}, {"E": 3}]
    assert [(skip.index, skip.reason) for skip in skipped] == [
        (2, "line 4, attribute C: not UTF-8 text (byte 0xE9)"),
        (3, "line 6: not UTF-8 text (byte 0xFF)")]


def test_a_directory_is_not_a_file_of_ads(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        read_ads(tmp_path)


# ------------------------------------------------ an attribute set twice in one ad
def test_an_attribute_set_twice_is_a_warning_naming_both_lines_and_the_last_wins() -> None:
    warnings: list = []
    ads, skipped = parse_ads('Name = "s1"\nMFlops = 100\nCpus = 1\nMFlops = 200\n', "f",
                             warnings=warnings)
    # HTCondor's own parser keeps the last value (`condor_status -ads FILE` of HTCondor 25
    # prints `MFlops = 200` for this ad); gridfair reads it the same and says so.
    assert ads[0].ad["MFlops"] == 200 and skipped == []
    assert [(w.source, w.index, w.name) for w in warnings] == [("f", 1, "s1")]
    assert warnings[0].reason == ("line 4, attribute MFlops: also set on line 2; the last "
                                  "value is used, as HTCondor's own parser does")
    # Names are case-insensitive, as in ClassAds.
    warnings.clear()
    parse_ads("A = 1\na = 2\n", "f", warnings=warnings)
    assert "line 2, attribute a: also set on line 1" in warnings[0].reason


def test_two_ads_with_no_blank_line_between_them_are_one_ad_and_a_warning() -> None:
    # The case: two real slot ads concatenated without a blank line read as one ad
    # (the second's values win), so the pool loses a slot; the warning names where the
    # second ad starts and how many attributes repeat.
    blocks = (REAL / "basic4slot").read_text().strip().split("\n\n")
    text = blocks[0] + "\n" + blocks[1] + "\n\n" + "\n\n".join(blocks[2:]) + "\n"
    warnings: list = []
    ads, skipped = parse_ads(text, "pool", warnings=warnings)
    assert len(ads) == 3 and skipped == []
    second = len(blocks[0].splitlines()) + 1
    assert ads[0].ad["Name"] == "slot2@ingwe.cs.wisc.edu"
    [warning] = warnings
    assert warning.index == 1 and warning.name == "slot2@ingwe.cs.wisc.edu"
    repeated = len(blocks[1].splitlines()) - 1  # the first of them is named
    assert warning.reason.startswith(f"line {second}, attribute Activity: also set on line 1, "
                                     f"and {repeated} more attribute(s) set twice (two ads "
                                     "with no blank line between them?)")


def test_new_syntax_and_json_repeats_are_warned_and_nested_ads_are_not() -> None:
    warnings: list = []
    ads, _ = parse_ads('[ A = 1; B = [ A = 2; C = 3 ]; D = A == 1 ]\n'
                       '[ A = "x=y"; B = 2;\n  a = 3 ]\n', "f", warnings=warnings)
    assert [w.index for w in warnings] == [2]
    assert warnings[0].reason.startswith("line 3, attribute a: also set on line 2;")
    assert ads[1].ad["A"] == 3
    warnings.clear()
    ads, _ = parse_ads('[{"Name": "s", "MFlops": 1, "MFlops": 2}, {"Name": "t", "B": {"C": 1}}]',
                       "j", warnings=warnings)
    assert ads[0].ad["MFlops"] == 2
    assert [(w.index, w.name) for w in warnings] == [(1, "s")]
    assert warnings[0].reason.startswith("attribute MFlops: set twice;")  # JSON has no lines


def test_an_ad_warned_about_is_warned_about_on_every_read() -> None:
    # The memo of a steady re-read keeps no ad it warned about: each read warns again.
    from gridfair.classads.reader import reread

    text = "A = 1\nA = 2\n\nB = 1\n"
    first = reread(text, "f", {}, lambda sourced: sourced.index, None)
    assert len(first.warned) == 1
    second = reread(text + "\nC = 1\n", "f", first.memo, lambda sourced: sourced.index, None)
    assert [w.index for w in second.warned] == [1] and second.values == [1, 2, 3]


def test_a_view_error_names_the_attributes_own_line(tmp_path: Path) -> None:
    # The case: an attribute on line 158 was reported at line 1, where its ad starts.
    from gridfair.classads.views import read_machines
    from tests.test_classads_views import with_lines

    path = with_lines("basic4slot", tmp_path, 'MFlops = 1\nGridOwner = "a"',
                      'MFlops = "fast"\nGridOwner = "a"', 'MFlops = 1\nGridOwner = "a"',
                      "MFlops = 1")
    lines = path.read_text().splitlines()
    machines, skipped = read_machines(path, lenient=True)
    assert [s.index for s in skipped] == [2, 4]
    fast = lines.index('MFlops = "fast"') + 1
    assert skipped[0].reason == f"line {fast}, attribute MFlops: not a number: 'fast'"
    # An attribute the ad lacks has no line of its own: the ad's first line is named.
    fourth = [number for number, line in enumerate(lines, 1) if not line.strip()][2] + 1
    assert skipped[1].reason == f"line {fourth}, attribute GridOwner: missing"


def test_a_binary_file_that_happens_to_be_utf8_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "ads"
    path.write_bytes(b"A = 1\n\x00\x00\x01\x02")
    with pytest.raises(InputError) as caught:
        read_ads(path)
    assert str(caught.value) == f"{path}: not text (a NUL byte at character 6)"
