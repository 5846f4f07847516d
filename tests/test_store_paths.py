"""The journal, its lock and the log are opened without following links, in a directory of
the daemon's own: a link put in their place, a file of another account, or a directory other
accounts can write is refused with a clear error, and nothing is written through it."""

from __future__ import annotations

import os

import pytest

from gridfair.daemon.config import validate
from gridfair.daemon.service import setup_logging
from gridfair.daemon.store import Store, StoreError
from gridfair.errors import ConfigError

NOBODY = 65534


def test_a_user_owned_directory_is_the_daemons_own(tmp_path):
    tmp_path.chmod(0o755)  # as a repository checkout is (`make run`)
    Store(tmp_path / "state.db").close()


@pytest.mark.parametrize("linked", ["state.db", "state.db.lock"])
def test_a_link_in_place_of_the_store_or_its_lock_is_refused(tmp_path, linked):
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    (tmp_path / linked).symlink_to(target)
    with pytest.raises(StoreError, match="is a symbolic link: refused"):
        Store(tmp_path / "state.db")
    assert target.read_text() == "precious"


def test_a_link_in_place_of_the_log_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    (tmp_path / "daemon.log").symlink_to(target)
    config = validate({"daemon": {"store": "state.db", "log_file": "daemon.log"},
                       "backend": {"kind": "sim"}}, base=tmp_path)
    with pytest.raises(ConfigError, match="daemon.log is a symbolic link: refused"):
        setup_logging(config)
    assert target.read_text() == "precious"


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o775])
def test_a_directory_others_can_write_is_refused(tmp_path, mode):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(StoreError, match=r"writable by others \(mode "):
        Store(shared / "state.db")
    assert list(shared.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another account needs root")
def test_a_file_or_directory_of_another_account_is_refused(tmp_path):
    (tmp_path / "state.db").touch()
    os.chown(tmp_path / "state.db", NOBODY, NOBODY)
    with pytest.raises(StoreError, match=f"belongs to uid {NOBODY}"):
        Store(tmp_path / "state.db")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(StoreError, match=f"directory {theirs} belongs to uid {NOBODY}"):
        Store(theirs / "state.db")
