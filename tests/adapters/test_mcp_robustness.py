"""The MCP server process against a hostile or careless client: every malformed JSON-RPC line is
answered (and serving goes on), a project that cannot be determined is refused, and the process
keeps its time budgets (first call, stdin EOF, parent death). Driven with raw lines on stdio."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WAIT_S, git_init, wait_for
from tests.adapters.test_mcp_server import INITIALIZE, INITIALIZED, SERVER, _read_until_id, _rpc, server_env

REPO = Path(__file__).resolve().parents[2]


def _keyword_only_env(home: Path, project: Path | None, **extra: str) -> dict[str, str]:
    env = server_env(home, project or home, **extra)
    (home / "keyword-only.yaml").write_text("embedding:\n  enabled: false\n")
    env["CAIRN_CONFIG"] = str(home / "keyword-only.yaml")
    if project is None:
        env.pop("CLAUDE_PROJECT_DIR")
    return env


def _start(env: dict[str, str], cwd: Path, stderr: Path) -> subprocess.Popen:
    with open(stderr, "wb") as err:
        return subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, env=env, cwd=str(cwd))


def _read_one(proc: subprocess.Popen, timeout: float = WAIT_S) -> dict[str, Any]:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no answer within {timeout} s"
    # The raw stream, a byte at a time: a buffered readline may pull several answers into its
    # buffer, where select() cannot see them (a burst of answers then waits out the timeout).
    line = proc.stdout.raw.readline()
    assert line, "the server closed stdout"
    return json.loads(line)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the malformed-line tests: each ends by checking that it still serves."""
    tmp_path = tmp_path_factory.mktemp("mcp-malformed")
    proc = _start(_keyword_only_env(tmp_path / "home", git_init(tmp_path / "project")), tmp_path,
                  tmp_path / "stderr.txt")
    _rpc(proc, INITIALIZE)
    _read_until_id(proc, 1, WAIT_S, [])
    _rpc(proc, INITIALIZED)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _nested(ident: int, depth: int) -> bytes:
    return (b'{"jsonrpc": "2.0", "id": %d, "method": "ping", "params": {"a": ' % ident
            + b"[" * depth + b"]" * depth + b"}}")


MALFORMED = [
    (b"this is not json", None, -32700),
    (b'{"jsonrpc": "2.0", "id": 11, "method": "ping"', None, -32700),
    (b"\xff\xfe\x00garbage", None, -32700),
    (b'{"jsonrpc": "2.0", "id": 12, "method": 7}', 12, -32600),
    (b'{"jsonrpc": "2.0", "id": 13, "method": "tools/list", "params": [1, 2]}', 13, -32600),
    (b'{"jsonrpc": "2.0", "id": 14, "method": "tools/list", "params": "x"}', 14, -32600),
    (b'{"id": 15, "method": "ping"}', 15, -32600),
    (b'{"jsonrpc": "1.0", "id": 16, "method": "ping"}', 16, -32600),
    (b'{"jsonrpc": "2.0", "id": 17, "method": "tools/call", "params": {"name": "memory_recall", '
     b'"arguments": {"query": "\\ud800"}}}', 17, -32600),
    (b'{"jsonrpc": "2.0", "id": "\\udfff", "method": "ping"}', None, -32600),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', None, -32600),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', None, -32600),
    (b"[]", None, -32600),
    (b'[{"jsonrpc": "2.0", "id": 18, "method": "ping"}]', None, -32600),
    (b"42", None, -32600),
    (b'"ping"', None, -32600),
    (b"null", None, -32600),
    (b'{"jsonrpc": "2.0", "id": 19}', 19, -32600),
    (_nested(40, 100), 40, -32600),
    (_nested(41, 100_000), None, -32600),  # too deep for the parser to read the id
]


@pytest.mark.parametrize(("line", "ident", "code"), MALFORMED, ids=[repr(m[0][:40]) for m in MALFORMED])
def test_every_malformed_line_gets_an_error_answer_and_serving_goes_on(server, line, ident, code):
    server.stdin.write(line + b"\n")
    server.stdin.flush()
    answer = _read_one(server)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == ident, answer
    assert answer["error"]["code"] == code, answer
    _rpc(server, {"jsonrpc": "2.0", "id": 99, "method": "ping"})
    assert _read_one(server) == {"jsonrpc": "2.0", "id": 99, "result": {}}


def test_a_burst_of_malformed_lines_is_answered_line_by_line(server):
    for line, _, _ in MALFORMED:
        server.stdin.write(line + b"\n")
    _rpc(server, {"jsonrpc": "2.0", "id": 99, "method": "ping"})
    answers = [_read_one(server) for _ in range(len(MALFORMED) + 1)]
    assert [a.get("error", {}).get("code") for a in answers[:-1]] == [code for _, _, code in MALFORMED]
    assert answers[-1] == {"jsonrpc": "2.0", "id": 99, "result": {}}


def _call(proc: subprocess.Popen, ident: int, tool: str, arguments: dict[str, Any], timeout: float = WAIT_S) -> dict:
    _rpc(proc, {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}})
    return _read_until_id(proc, ident, timeout, [])["result"]


def test_started_in_the_plugin_folder_without_a_project_it_refuses_and_creates_no_store(tmp_path):
    home = tmp_path / "home"
    proc = _start(_keyword_only_env(home, None), REPO / "mcp", tmp_path / "stderr.txt")
    try:
        _rpc(proc, INITIALIZE)
        _read_until_id(proc, 1, WAIT_S, [])
        _rpc(proc, INITIALIZED)
        for ident, (tool, arguments) in enumerate([("memory_remember", {"text": "We deploy with Kamal"}),
                                                   ("memory_recall", {"query": "deploy"}),
                                                   ("memory_list", {})], start=2):
            result = _call(proc, ident, tool, arguments)
            assert result["isError"], result
            assert "cannot tell which project this is" in result["content"][0]["text"]
            assert "CLAUDE_PROJECT_DIR" in result["content"][0]["text"]
        status = json.loads(_call(proc, 9, "memory_status", {})["content"][0]["text"])
        assert status["ok"] is False and status["project_dir"] is None
        assert "cannot tell which project" in status["error"]
    finally:
        proc.kill()
        proc.wait()
    assert not list(home.glob("stores/*.db"))


def test_reads_create_no_store_and_the_first_write_does(tmp_path):
    home, project = tmp_path / "home", git_init(tmp_path / "project")
    env = _keyword_only_env(home, project)
    proc = _start(env, project, tmp_path / "stderr.txt")
    try:
        _rpc(proc, INITIALIZE)
        _read_until_id(proc, 1, WAIT_S, [])
        _rpc(proc, INITIALIZED)
        reads = [("memory_recall", {"query": "deploy"}), ("memory_list", {}), ("memory_review", {"action": "queue"}),
                 ("memory_search_sessions", {"query": "deploy"}), ("memory_sessions", {}),
                 ("memory_review", {"action": "maintain"}), ("memory_review", {"action": "maintenance_status"}),
                 ("memory_status", {})]
        for ident, (tool, arguments) in enumerate(reads, start=2):
            result = _call(proc, ident, tool, arguments)
            assert not result.get("isError"), result
        empty = json.loads(_call(proc, 20, "memory_recall", {"query": "deploy"})["content"][0]["text"])
        store = json.loads(_call(proc, 18, "memory_status", {})["content"][0]["text"])["store"]
        assert empty == {"hits": [], "store": store} and store.startswith("project")  # names the store it read
        assert not list(home.glob("stores/*.db"))
        glob = _call(proc, 19, "memory_remember", {"text": "The user wants short answers", "kind": "preference",
                                                   "scope": "global"})
        assert not glob.get("isError"), glob
        assert [p.name for p in home.glob("stores/*.db")] == ["global.db"]  # a global write: no project store
        # Another process creates the store: the next read sees what it wrote.
        subprocess.run([sys.executable, "-m", "cairn", "remember", "Deploys go through blue-green on Fly",
                        "--keyword-only"], cwd=project, env=env, check=True, capture_output=True)
        hits = json.loads(_call(proc, 21, "memory_recall", {"query": "deploy"})["content"][0]["text"])["hits"]
        assert [h["text"] for h in hits] == ["Deploys go through blue-green on Fly"]
        written = _call(proc, 22, "memory_remember", {"text": "The API is versioned in the URL"})
        assert not written.get("isError"), written
    finally:
        proc.kill()
        proc.wait()
    assert len(list(home.glob("stores/*.db"))) == 2  # the global store and the project's


# -- time budgets: first call, stdin EOF, parent death --------------------------------------------------------
FIRST_CALL_S = 5.0
EXIT_AFTER_EOF_S = 2.0
UNLOADABLE = "embedding:\n  model: cairn-tests/no-such-model-anywhere\n"


def _unloadable_model_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    env = server_env(home, git_init(tmp_path / "project"))
    env["CAIRN_SERVICE_IDLE_SECONDS"] = "5"
    (home / "unloadable.yaml").write_text(UNLOADABLE)
    env["CAIRN_CONFIG"] = str(home / "unloadable.yaml")
    return env


def _handshake(proc: subprocess.Popen) -> None:
    _rpc(proc, INITIALIZE)
    _read_until_id(proc, 1, WAIT_S, [])
    _rpc(proc, INITIALIZED)


@pytest.mark.model  # sentence-transformers (PyTorch) is what finds the model missing
def test_first_call_is_answered_within_5_s_keyword_only_and_the_server_exits_within_2_s_of_eof(tmp_path):
    proc = _start(_unloadable_model_env(tmp_path), tmp_path, tmp_path / "stderr.txt")
    try:
        _handshake(proc)
        started = time.monotonic()
        remembered = _call(proc, 2, "memory_remember", {"text": "We deploy with Kamal on Fridays"},
                           timeout=FIRST_CALL_S)
        first = time.monotonic() - started
        assert not remembered["isError"], remembered
        recalled = _call(proc, 3, "memory_recall", {"query": "Kamal deploys"}, timeout=FIRST_CALL_S)
        assert "Kamal" in recalled["content"][0]["text"]
        print(f"first call answered in {first:.2f} s with a model that cannot load")
        status = json.loads(_call(proc, 4, "memory_status", {}, timeout=FIRST_CALL_S)["content"][0]["text"])
        assert status["keyword_only"] is True
        started = time.monotonic()
        proc.stdin.close()  # the model is still "loading" (waiting for a warm process that fails)
        proc.wait(timeout=30)
        exited = time.monotonic() - started
        print(f"exited {exited:.2f} s after stdin EOF")
        assert exited < EXIT_AFTER_EOF_S
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, sys.argv[1]], stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr)
child.wait()
"""


def test_the_server_exits_when_its_parent_dies_even_with_stdin_still_open(tmp_path):
    env = _keyword_only_env(tmp_path / "home", git_init(tmp_path / "project"))
    with open(tmp_path / "stderr.txt", "wb") as err:
        parent = subprocess.Popen([sys.executable, "-c", PARENT, str(SERVER)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=err, env=env, cwd=str(tmp_path))
    try:
        _handshake(parent)  # the server answers through the parent's inherited pipes
        server_pid = int(subprocess.run(["ps", "-o", "pid=", "--ppid", str(parent.pid)], capture_output=True,
                                        text=True).stdout.split()[0])
        parent.kill()  # SIGKILL: the server's stdin (our pipe) stays open
        parent.wait()
        started = time.monotonic()
        wait_for(lambda: not _alive(server_pid), 30, "the server to exit after its parent died")
        print(f"exited {time.monotonic() - started:.2f} s after its parent was killed")
        assert time.monotonic() - started < EXIT_AFTER_EOF_S
    finally:
        parent.stdin.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_with_cairn_no_warm_the_server_loads_the_model_itself_and_starts_no_warm_process(tmp_path):
    home, project = tmp_path / "home", git_init(tmp_path / "project")
    env = server_env(home, project, CAIRN_NO_WARM="1")
    proc = _start(env, project, tmp_path / "stderr.txt")
    try:
        _handshake(proc)
        written = _call(proc, 2, "memory_remember", {"text": "Deploys go through blue-green on Fly"})
        assert not written.get("isError"), written

        def model_state() -> str:
            return json.loads(_call(proc, 3, "memory_status", {})["content"][0]["text"])["model_warmup"]

        wait_for(lambda: model_state() in ("ready", "failed", "keyword-only"), 120, "the model's warm-up to end")
        assert model_state() == "ready"
        hits = json.loads(_call(proc, 4, "memory_recall", {"query": "how do we deploy?"})["content"][0]["text"])["hits"]
        assert hits and "blue-green" in hits[0]["text"]
    finally:
        proc.kill()
        proc.wait()
    # The warm process logs to service.log from its first line: it never started.
    assert not (home / "logs" / "service.log").exists()
