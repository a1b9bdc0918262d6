"""Nothing leaves the machine: every Cairn process, on real work, under `strace -f`.

tests/network_scenario.py runs a session's hooks (and the capture and warm process they start), the
CLI, the MCP server (20 calls) and `cairn serve` (10 requests) with the default model. strace logs
every connect, sendto and sendmsg of every process; the test fails on any that is not to a Unix
socket, a netlink socket or a loopback address, and on any DNS query (port 53, even to a loopback
resolver: a lookup is the first step of phoning home). The environment the test passes has none of
the telemetry switches set, so the test holds only because Cairn sets them itself.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cairn import NO_TELEMETRY

from tests.conftest import git_init
from tests.engine.test_sessions import conversation

SCENARIO = Path(__file__).with_name("network_scenario.py")
# strace's rendering of a socket address: {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("...")}
_CALL = re.compile(r"^\s*(?:\[pid\s+)?\d*\]?\s*(connect|sendto|sendmsg)\((.*)$")
_FAMILY = re.compile(r"sa_family=(AF_\w+)")
_PORT = re.compile(r"sin6?_port=htons\((\d+)\)")
_ADDR = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')
LOCAL_FAMILIES = {"AF_UNIX", "AF_LOCAL", "AF_NETLINK", "AF_UNSPEC"}


def outside_connections(trace: str) -> list[str]:
    """The strace lines that reach beyond the machine: a non-loopback address, or port 53."""
    bad = []
    for line in trace.splitlines():
        call = _CALL.match(line)
        if call is None:
            continue
        family = _FAMILY.search(line)
        if family is None:  # sendto/sendmsg on a connected socket: its connect was checked
            continue
        if family.group(1) in LOCAL_FAMILIES:
            continue
        port = _PORT.search(line)
        addr = _ADDR.search(line)
        if port is None or addr is None:
            bad.append(line)  # an address family strace cannot spell out: not provably local
            continue
        ip = ipaddress.ip_address(addr.group(1) or addr.group(2))
        mapped = getattr(ip, "ipv4_mapped", None)
        loopback = (mapped or ip).is_loopback
        if not loopback or int(port.group(1)) == 53:
            bad.append(line)
    return bad


def test_outside_connections_are_told_from_local_ones():
    v6 = "sin6_flowinfo=htonl(0), inet_pton(AF_INET6, {!r}, &sin6_addr), sin6_scope_id=0"
    trace = "\n".join([
        '101 connect(3, {sa_family=AF_UNIX, sun_path="/tmp/cairn-0/ab.sock"}, 110) = 0',
        '101 connect(5, {sa_family=AF_INET, sin_port=htons(8765), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
        '101 connect(6, {sa_family=AF_INET6, sin6_port=htons(80), ' + v6.format("::1").replace("'", '"') + "}, 28) = 0",
        '101 sendto(7, "x", 1, 0, NULL, 0) = 1',
        '102 connect(4, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0',
        '102 sendto(4, "\\x12", 30, MSG_NOSIGNAL, {sa_family=AF_INET, sin_port=htons(53), '
        'sin_addr=inet_addr("127.0.0.53")}, 16) = 30',
        '103 connect(9, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("13.69.109.130")}, 16) = -1',
        '104 connect(9, {sa_family=AF_INET6, sin6_port=htons(443), '
        + v6.format("::ffff:13.69.109.130").replace("'", '"') + "}, 28) = -1",
    ])
    assert [line.split()[0] for line in outside_connections(trace)] == ["102", "102", "103", "104"]


@pytest.mark.strace
def test_a_library_phoning_home_is_caught(tmp_path):
    """The check itself, on a process that does what onnxruntime's telemetry does: a DNS lookup."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (.ci/run installs it)")
    log = tmp_path / "trace.log"
    lookup = ("import socket\ntry:\n    socket.getaddrinfo('mobile.events.data.microsoft.com', 443)\n"
              "except OSError:\n    pass\n")
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-e", "signal=none", "-o", str(log),
                    sys.executable, "-c", lookup], check=True, timeout=60)
    assert outside_connections(log.read_text())


@pytest.mark.strace
def test_every_cairn_process_on_real_work_stays_on_the_machine(tmp_path):
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (.ci/run installs it)")
    home, project, transcript = tmp_path / "home", git_init(tmp_path / "project"), tmp_path / "s1.jsonl"
    home.mkdir()
    transcript.write_text("".join(conversation()))
    # The user's environment as it might be: no telemetry switch, no offline switch, no Cairn
    # settings; the default model.
    env = {k: v for k, v in os.environ.items()
           if k not in NO_TELEMETRY and not k.startswith(("CAIRN_", "HF_")) and k != "TRANSFORMERS_OFFLINE"}
    env["CAIRN_SERVICE_IDLE_SECONDS"] = "120"
    log = tmp_path / "trace.log"
    out = subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-e", "signal=none",
                          "-o", str(log), sys.executable, str(SCENARIO), str(home), str(project), str(transcript)],
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    trace = log.read_text()
    assert "AF_UNIX" in trace  # the trace saw the processes talk (hooks to the warm process)
    assert outside_connections(trace) == []
