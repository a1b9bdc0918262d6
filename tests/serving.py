"""Helpers for tests of `cairn serve`: a server subprocess on a free loopback port, and raw HTTP calls.

The server is the real `cairn serve` (python -m cairn), keyword-only (the config disables the
model) so that it starts in a second; it inherits the test's CAIRN_HOME. Readiness is a TCP
connect that succeeds, waited for with conftest.wait_for; the server is stopped by SIGTERM.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import WAIT_S, wait_for

KEYWORD_ONLY_CONFIG = "embedding:\n  enabled: false\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keyword_only_env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "keyword-only.yaml"
    config.write_text(KEYWORD_ONLY_CONFIG)
    return {**os.environ, "CAIRN_CONFIG": str(config), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


class Server:
    """`cairn serve ARGS` on 127.0.0.1:port (or --host), run from `cwd`; stop() ends it."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str], log: Path, port: int | None = None,
                 wait: bool = True):
        self.port = port or free_port()
        self.log = log
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "cairn", "serve", "--port", str(self.port), *args],
                                     cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        if wait:
            wait_for(self._ready, what=lambda: f"the server on port {self.port}; log:\n{self.log.read_text()}")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the server exited with {self.proc.returncode}:\n{self.log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def request(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
                raw: bytes | None = None, token: str | None = None) -> tuple[int, dict[str, str], Any]:
        """(status, headers lower-cased, parsed JSON or text). Host defaults to 127.0.0.1:PORT."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT_S)
        sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
        if token:
            sent["Authorization"] = f"Bearer {token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in sent.items():
            conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        response = conn.getresponse()
        text = response.read().decode()
        out_headers = {k.lower(): v for k, v in response.getheaders()}
        conn.close()
        parsed = json.loads(text) if out_headers.get("content-type", "").startswith("application/json") else text
        return response.status, out_headers, parsed

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(WAIT_S)
        self._log.close()
