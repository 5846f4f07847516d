"""The submitter-to-owner mapping (accounting-group jobs of one Unix account, UID domains)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridfair.classads.submitters import SubmitterMap
from gridfair.errors import InputError

OWNERS = {"User1", "User2", "carol", "dave@lab.org"}


def test_the_uid_domain_is_dropped_when_it_is_the_pools() -> None:
    assert SubmitterMap().owner_of("User1@gridfair.test", OWNERS) == "User1"
    pool = SubmitterMap(uid_domain="gridfair.test")
    assert pool.owner_of("User1@gridfair.test", OWNERS) == "User1"
    assert pool.owner_of("User1@elsewhere.org", OWNERS) == "User1@elsewhere.org"
    kept = SubmitterMap(uid_domain="")
    assert kept.owner_of("User1@gridfair.test", OWNERS) == "User1@gridfair.test"


def test_owners_named_with_a_domain_and_unknown_names_are_kept() -> None:
    assert SubmitterMap().owner_of("dave@lab.org", OWNERS) == "dave@lab.org"
    assert SubmitterMap().owner_of("erin@gridfair.test", OWNERS) == "erin@gridfair.test"


def test_a_map_file_comes_first_whole_name_then_bare_name(tmp_path: Path) -> None:
    path = tmp_path / "owners.map"
    path.write_text("# submitter owner\nalice@lab.org User1\nbob User2  # any domain\n")
    mapping = SubmitterMap.from_file(path, uid_domain="gridfair.test")
    assert mapping.owner_of("alice@lab.org", OWNERS) == "User1"
    assert mapping.owner_of("bob@anywhere", OWNERS) == "User2"
    assert mapping.owner_of("carol@gridfair.test", OWNERS) == "carol"
    assert mapping.owner_of("carol@lab.org", OWNERS) == "carol@lab.org"  # unmapped: kept


@pytest.mark.parametrize(("text", "message"), [
    ("alice\n", r"owners.map:1: expected 'submitter owner'"),
    ("a U1\n\na U2\n", r"owners.map:3: submitter 'a' mapped twice"),
])
def test_a_bad_map_file_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "owners.map"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        SubmitterMap.from_file(path)


def test_a_missing_map_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing.map: cannot read"):
        SubmitterMap.from_file(tmp_path / "missing.map")
