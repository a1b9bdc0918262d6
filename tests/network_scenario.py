"""Real work in every Cairn process, for tests/test_no_network.py to run under strace.

    python tests/network_scenario.py HOME PROJECT TRANSCRIPT

Runs, as subprocesses of this one (so `strace -f` follows them all): a session's hooks
(SessionStart, UserPromptSubmit, Stop, whose detached capture stores the transcript's turns), the
warm process those start, the CLI (remember, recall, status), the MCP server over stdio with 20 tool
calls, and `cairn serve` with 10 HTTP requests. The default embedding model is used, so onnxruntime
and the tokenizer load for real. The warm process is shut down at the end, so every traced process
has exited when this one does. Exits non-zero, saying what failed, if any step does not do its work.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "engine"
SERVER = ENGINE.parent / "mcp" / "server.py"
WAIT_S = 180


def run(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    """`cairn ARGS` in the project's folder, as a user at a terminal in it would run it."""
    out = subprocess.run([sys.executable, "-P", "-m", "cairn", *args], input=stdin, text=True,
                         capture_output=True, env=env, timeout=WAIT_S, cwd=env["CLAUDE_PROJECT_DIR"])
    if out.returncode != 0:
        raise SystemExit(f"cairn {' '.join(args)} exited {out.returncode}: {out.stderr}")
    return out


def wait(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def hooks(env: dict[str, str], project: Path, transcript: Path) -> None:
    base = {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project)}
    run(["hook", "SessionStart"], env, json.dumps({**base, "hook_event_name": "SessionStart", "source": "startup"}))
    run(["hook", "UserPromptSubmit"], env,
        json.dumps({**base, "hook_event_name": "UserPromptSubmit", "prompt": "how do we deploy the app?"}))
    run(["hook", "Stop"], env, json.dumps({**base, "hook_event_name": "Stop"}))

    def captured() -> bool:
        status = json.loads(run(["status", "--json"], env).stdout)
        return status.get("sessions", {}).get("turns", 0) > 0

    wait(captured, "the Stop hook's capture to store the transcript's turns")


def cli(env: dict[str, str]) -> None:
    run(["remember", "We deploy with Kamal to the Hetzner box"], env)
    out = run(["recall", "how do we deploy?"], env)
    if "Kamal" not in out.stdout:
        raise SystemExit(f"cairn recall did not find the memory: {out.stdout}")
    run(["status"], env)


def mcp(env: dict[str, str]) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def go() -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=env)
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                calls = [("memory_remember", {"text": f"MCP fact {i}: the queue runs on Redis {i}"}) for i in range(5)]
                calls += [("memory_recall", {"query": f"which queue backend {i}?"}) for i in range(8)]
                calls += [("memory_status", {}), ("memory_list", {}), ("memory_search_sessions", {"query": "deploy"}),
                          ("memory_sessions", {}), ("memory_review", {"action": "maintenance_status"}),
                          ("memory_review", {"action": "queue"}), ("memory_status", {})]
                assert len(calls) == 20
                for tool, arguments in calls:
                    result = await session.call_tool(tool, arguments, read_timeout_seconds=WAIT_S)
                    if result.is_error:
                        raise SystemExit(f"{tool} failed: {result.content[0].text}")

    asyncio.run(go())


def serve(env: dict[str, str], project: Path, log: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(log, "w") as out:
        args = ["serve", "--transport", "http", "--port", str(port)]
        proc = subprocess.Popen([sys.executable, "-P", "-m", "cairn", *args], cwd=project, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        def up() -> bool:
            if proc.poll() is not None:
                raise SystemExit(f"cairn serve exited {proc.returncode}: {log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        wait(up, "cairn serve to listen")
        requests = [("GET", "/v1/status", None), ("POST", "/v1/memories", {"text": "HTTP fact: backups run at 2am"})]
        requests += [("POST", "/v1/recall", {"query": f"when do backups run {i}?"}) for i in range(6)]
        requests += [("GET", "/v1/memories", None), ("GET", "/v1/sessions", None)]
        for method, path, body in requests:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            response = conn.getresponse()
            response.read()
            conn.close()
            if response.status >= 400:
                raise SystemExit(f"{method} {path} answered {response.status}")
    finally:
        proc.terminate()
        proc.wait(WAIT_S)


def stop_warm(env: dict[str, str]) -> None:
    stop = ("from cairn.adapters.warm import client as warm\n"
            "if warm.is_running():\n    warm.wait_until_ready(90)\n    warm.request({'op': 'shutdown'})\n")
    subprocess.run([sys.executable, "-P", "-c", stop], env=env, timeout=WAIT_S, check=True)


def main() -> None:
    home, project, transcript = (Path(a) for a in sys.argv[1:4])
    env = {**os.environ, "CAIRN_HOME": str(home), "CLAUDE_PROJECT_DIR": str(project),
           "PYTHONPATH": str(ENGINE), "PYTHONUNBUFFERED": "1"}
    try:
        hooks(env, project, transcript)
        cli(env)
        mcp(env)
        serve(env, project, home / "serve.log")
    finally:
        stop_warm(env)


if __name__ == "__main__":
    main()
