"""Finding HTCondor for the personal-pool harness (the live tests themselves: tests/live/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.harness.personal_pool import HTCondorMissing, find_htcondor


def _install(root: Path) -> Path:
    (root / "sbin").mkdir(parents=True)
    (root / "sbin" / "condor_master").write_text("")
    return root


def test_the_variable_wins_then_the_path_then_shared(tmp_path: Path, monkeypatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shared = _install(tmp_path / "shared" / "htcondor")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("GRIDFAIR_HTCONDOR", raising=False)
    assert find_htcondor(repo) == shared
    on_path = _install(tmp_path / "system")
    (on_path / "sbin" / "condor_master").chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path / "sbin"))
    assert find_htcondor(repo) == on_path
    chosen = _install(tmp_path / "chosen")
    monkeypatch.setenv("GRIDFAIR_HTCONDOR", str(chosen))
    assert find_htcondor(repo) == chosen


def test_absent_htcondor_says_where_it_looked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("GRIDFAIR_HTCONDOR", str(tmp_path / "nowhere"))
    with pytest.raises(HTCondorMissing, match="nowhere.*condor_master on PATH.*shared"):
        find_htcondor(tmp_path / "repo")
