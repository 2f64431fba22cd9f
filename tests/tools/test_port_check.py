import os
import socket

import pytest

from tools import port_check
from tools.base import ProbeContext, Status


@pytest.fixture
def listener():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def no_resolve(host, port, timeout):
    raise AssertionError("MASTER_ADDR must not be resolved when unset")


def test_port_held_by_this_test_names_our_pid(listener):
    result = port_check.probe(ProbeContext(ports=(listener,), environ={}), resolver=no_resolve)
    assert result.status == Status.PROBLEM
    finding = result.findings[0]
    assert finding.code == "PORT_IN_USE"
    assert f"pid {os.getpid()}" in finding.evidence
    assert f"kill -TERM {os.getpid()}" in finding.fix
    assert result.evidence["ports"][str(listener)]["owners"][0]["pid"] == os.getpid()


def test_free_port_is_ok():
    port = free_port()
    result = port_check.probe(ProbeContext(environ={"MASTER_PORT": str(port)}), resolver=no_resolve)
    assert result.status == Status.OK
    assert result.evidence["ports"][str(port)]["free"] is True


def test_master_addr_reachable_on_loopback(listener):
    ctx = ProbeContext(ports=(listener,), environ={"MASTER_ADDR": "127.0.0.1"})
    result = port_check.probe(ctx)
    assert result.evidence["master_addr"]["connect_error"] == ""
    assert [f.code for f in result.findings] == ["PORT_IN_USE"]


@pytest.mark.parametrize(
    ("resolver", "connector", "expected"),
    [
        (lambda h, p, t: (_ for _ in ()).throw(socket.gaierror(-2, "Name or service not known")), None,
         "MASTER_ADDR_UNRESOLVABLE"),
        (lambda h, p, t: (_ for _ in ()).throw(TimeoutError("getaddrinfo did not answer")), None,
         "MASTER_ADDR_UNRESOLVABLE"),
        (lambda h, p, t: ["10.0.0.2"], lambda a, p, t: "TimeoutError: timed out", "MASTER_ADDR_UNREACHABLE"),
        (lambda h, p, t: ["10.0.0.2"], lambda a, p, t: "ConnectionRefusedError: [Errno 111] Connection refused",
         "MASTER_NOT_LISTENING"),
    ],
)
def test_master_addr_rows(resolver, connector, expected):
    ctx = ProbeContext(ports=(free_port(),), environ={"MASTER_ADDR": "node-0.cluster"})
    kwargs = {"resolver": resolver}
    if connector is not None:
        kwargs["connector"] = connector
    result = port_check.probe(ctx, **kwargs)
    assert [f.code for f in result.findings] == [expected]


def test_port_sources():
    assert port_check.ports_to_check(ProbeContext(environ={})) == (29500,)
    assert port_check.ports_to_check(ProbeContext(environ={"MASTER_PORT": "29600"})) == (29600,)
    assert port_check.ports_to_check(ProbeContext(ports=(1234,), environ={"MASTER_PORT": "29600"})) == (1234,)
