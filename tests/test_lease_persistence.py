"""gridfair/daemon/backends/lease.py offline: which condor_config_val sets the lease (HTCondor's
BIN, else PATH), how it is called, and a negotiator that stopped told apart from one that
refused (the live test of the persistence itself: tests/live/test_failopen_live.py)."""

from __future__ import annotations

from pathlib import Path

import classad2
import pytest

from gridfair.daemon.backends import ActionFailed
from gridfair.daemon.backends.htcondor import HTCondorBackend
from gridfair.daemon.backends.htcondor import lease as backend_module
from gridfair.daemon.backends.lease import config_tool, not_answering, persist
from tests.test_backends import FakeCollector, FakeSchedd

NEGOTIATOR = classad2.ClassAd({"Name": "cm", "MyAddress": "<127.0.0.1:9>"})


def fake_tool(directory: Path, answer: str, code: int) -> Path:
    """A condor_config_val that records its arguments and answers `answer`, exit `code`."""
    tool = directory / "condor_config_val"
    tool.write_text(f'#!/bin/sh\necho "$@" > {directory / "called"}\necho "{answer}" >&2\n'
                    f"exit {code}\n")
    tool.chmod(0o755)
    return tool


def test_the_tool_is_htcondor_s_own_else_on_path(tmp_path: Path, monkeypatch) -> None:
    tool = fake_tool(tmp_path, "", 0)
    assert config_tool({"BIN": str(tmp_path)}) == str(tool)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert config_tool({"BIN": "/nowhere"}) == str(tool)
    monkeypatch.setenv("PATH", "/nowhere")
    assert config_tool({}) is None


def test_the_lease_is_set_as_persistent_configuration_at_the_negotiator(tmp_path) -> None:
    tool = fake_tool(tmp_path, "", 0)
    assert persist(str(tool), NEGOTIATOR, "GRIDFAIR_LEASE_UNTIL", "1800000000") is None
    assert (tmp_path / "called").read_text() == (
        "-addr <127.0.0.1:9> -set GRIDFAIR_LEASE_UNTIL = 1800000000\n")


@pytest.mark.parametrize(("answer", "said"), [
    ("Can't connect to master on  <127.0.0.1:9>", "does not answer"),
    ('Attempt to set configuration "GRIDFAIR_LEASE_UNTIL = 0" on negotiator cm failed.',
     "refused GRIDFAIR_LEASE_UNTIL = 0"),
])
def test_a_stopped_negotiator_is_not_blamed_on_permissions(tmp_path, monkeypatch, answer,
                                                           said) -> None:
    """At a pool's shutdown the negotiator simply stopped: the lease's release says so,
    without asking whether the account may set the knob."""
    tool = fake_tool(tmp_path, answer, 1)
    monkeypatch.setattr(backend_module, "config_tool", lambda param: str(tool))
    backend = HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd)
    monkeypatch.setattr(backend.state, "negotiators", lambda: [(NEGOTIATOR, None)])
    monkeypatch.setattr(backend.state, "schedds", list)
    with pytest.raises(ActionFailed, match=said) as failure:
        backend.release_starts()
    assert ("ALLOW_CONFIG" in str(failure.value)) == (not not_answering(answer))


def test_the_lease_is_set_on_every_schedd_as_on_the_negotiator(tmp_path, monkeypatch) -> None:
    """Issue 43: a schedd starts jobs on claims it keeps, without a negotiation; its
    START_VANILLA_UNIVERSE reads the lease (configs/htcondor-pool.config), so the lease is
    set on each schedd the collector lists, after the negotiator, each then reconfigured."""
    tool = tmp_path / "condor_config_val"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "called"}\n')
    tool.chmod(0o755)
    monkeypatch.setattr(backend_module, "config_tool", lambda param: str(tool))
    reconfigured = []
    monkeypatch.setattr(backend_module.htcondor2, "send_command",
                        lambda ad, command: reconfigured.append(ad["Name"]))
    backend = HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd)
    schedds = [classad2.ClassAd({"Name": f"submit{n}", "MyAddress": f"<127.0.0.{n}:9>"})
               for n in (2, 3)]
    monkeypatch.setattr(backend.state, "negotiators", lambda: [(NEGOTIATOR, None)])
    monkeypatch.setattr(backend.state, "schedds", lambda: [(ad, None) for ad in schedds])
    backend.hold_starts(1_800_000_000)
    assert (tmp_path / "called").read_text().splitlines() == [
        f"-addr {address} -set GRIDFAIR_LEASE_UNTIL = 1800000000"
        for address in ("<127.0.0.1:9>", "<127.0.0.2:9>", "<127.0.0.3:9>")]
    assert reconfigured == ["cm", "submit2", "submit3"]
