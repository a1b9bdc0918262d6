"""Capture from Claude Code's Stop and PreCompact hooks: the hook hands the work off and returns at once
(to the warm process, or to a detached process), honours stop_hook_active, the per-session pause and
the project opt-out, and SessionEnd does nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn import Cairn
from cairn.adapters.claude import hook_process as hook
from cairn.adapters.warm import client as warm
from cairn.adapters.claude.capture import capture
from cairn.adapters.claude.session_state import DISABLE_MARKER, set_paused

from tests.conftest import WAIT_S, wait_for
from tests.engine.test_sessions import conversation

ENGINE = Path(__file__).resolve().parents[2] / "engine"


@pytest.fixture
def transcript(tmp_path) -> Path:
    path = tmp_path / "s1.jsonl"
    path.write_text("".join(conversation()))
    return path


def payload(transcript: Path, project: Path, **extra) -> dict:
    return {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project),
            "hook_event_name": "Stop", **extra}


def captured(project: Path) -> int:
    with Cairn.open(cwd=project, embedder=None, read_only=True) as memory:
        return memory.status().sessions.get("turns", 0)


def run_hook(event: str, data: dict, project: Path, **env) -> tuple[subprocess.CompletedProcess, float]:
    environ = {**os.environ, "CLAUDE_PROJECT_DIR": str(project), "PYTHONPATH": str(ENGINE),
               "CAIRN_HOOK_TIMING": "1", **env}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", event], input=json.dumps(data), text=True,
                         capture_output=True, env=environ, timeout=60)
    return out, time.monotonic() - started


def test_the_stop_hook_returns_at_once_and_a_detached_process_captures(transcript, project):
    out, _ = run_hook("Stop", payload(transcript, project), project, CAIRN_NO_WARM="1")
    assert out.returncode == 0 and out.stdout == ""
    own_ms = float(out.stderr.rsplit("Stop:", 1)[1].split("ms")[0])
    assert own_ms < 1000  # its own work is a hand-off (figures in docs/benchmarks.md)
    wait_for(lambda: captured(project) == 5, WAIT_S, "the detached capture to store the five turns")
    # A second Stop (the next turn) adds only what is new: here nothing.
    run_hook("PreCompact", payload(transcript, project), project, CAIRN_NO_WARM="1")
    with Cairn.open(cwd=project, embedder=None) as memory:
        assert memory.sessions.ingest(transcript, session_id="s1")["turns_added"] == 0
        assert memory.sessions.read("s1")[0].turn_count == 5


def test_without_fork_the_hook_process_hands_the_capture_off_itself(transcript, project):
    out, _ = run_hook("Stop", payload(transcript, project), project, CAIRN_NO_WARM="1", CAIRN_HOOK_NO_FORK="1")
    assert out.returncode == 0 and out.stdout == ""
    wait_for(lambda: captured(project) == 5, WAIT_S, "the capture process to store the five turns")


def test_stop_hook_active_and_session_end_hand_nothing_off(transcript, project, monkeypatch):
    calls = []
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    monkeypatch.setattr(hook, "spawn_capture", lambda data, environ: calls.append(data))
    assert hook.run("Stop", payload(transcript, project, stop_hook_active=True)) is None
    assert hook.run("SessionEnd", payload(transcript, project, reason="other")) is None
    assert calls == []
    assert hook.run("Stop", payload(transcript, project, stop_hook_active=False)) is None
    assert hook.run("PreCompact", payload(transcript, project, trigger="auto")) is None
    assert [c["session_id"] for c in calls] == ["s1", "s1"]


def test_a_hook_with_a_bad_payload_still_exits_0(project):
    environ = {**os.environ, "PYTHONPATH": str(ENGINE), "CAIRN_NO_WARM": "1"}
    for raw in ("not json", "[]", '{"transcript_path": 7, "session_id": "x"}'):
        out = subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", "Stop"], input=raw, text=True,
                             capture_output=True, env=environ, timeout=60)
        assert out.returncode == 0 and out.stdout == ""


def test_pause_and_opt_out_stop_capture(transcript, project, monkeypatch):
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(project)}  # capture runs in its root's whole environment
    set_paused("s1", True)
    assert capture(payload(transcript, project), env) is None
    set_paused("s1", False)
    assert capture(payload(transcript, project), {**env, "CAIRN_PAUSE": "1"}) is None
    (project / DISABLE_MARKER).touch()
    assert capture(payload(transcript, project), env) is None
    (project / DISABLE_MARKER).unlink()
    (project / ".cairn.yaml").write_text("sessions:\n  capture: false\n")
    assert capture(payload(transcript, project), env) is None
    assert captured(project) == 0
    (project / ".cairn.yaml").unlink()
    assert capture(payload(transcript, project), env)["turns_added"] == 5
    assert captured(project) == 5


def test_the_warm_process_queues_the_capture_and_embeds_the_turns(transcript, project, monkeypatch, cairn_home):
    monkeypatch.setenv("CAIRN_SERVICE_IDLE_SECONDS", "60")
    assert warm.spawn(sys.executable)
    try:
        assert warm.wait_until_ready(120), (cairn_home / "logs" / "service.log").read_text()
        reply = warm.request({"op": "capture", "event": "Stop", "payload": payload(transcript, project),
                              "env": {"CLAUDE_PROJECT_DIR": str(project)}}, timeout=5)
        assert reply == {"ok": True, "queued": True}

        def done() -> bool:
            with Cairn.open(cwd=project, embedder=None, read_only=True) as memory:
                s = memory.status().sessions
                return s.get("turns") == 5 and s.get("awaiting_embedding") == 0

        wait_for(done, WAIT_S, "the warm process to capture and embed the five turns")
    finally:
        warm.request({"op": "shutdown"})
        wait_for(lambda: not warm.is_running(), WAIT_S, "the warm process to stop when asked")
