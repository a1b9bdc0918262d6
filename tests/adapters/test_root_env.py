"""The composition roots' environment reaches the data root (issue 32): a hook answered with a
runtime whose environment names CAIRN_HOME=X, and CLI commands whose root (`_common.environ`)
names X, create and read nothing under Y, the CAIRN_HOME of this process's own os.environ."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cairn import Cairn, load_config
from cairn.adapters.claude.hooks import InProcessRuntime, handle
from cairn.adapters.claude.session_state import set_paused
from cairn.adapters.cli import _common, serve
from cairn.adapters.warm.runtime import WarmRuntime
from tests.conftest import run_cli


@pytest.fixture
def homes(tmp_path, monkeypatch, cairn_home) -> tuple[dict[str, str], Path, Path]:
    """(the root's environment, naming X; X; Y, this process's CAIRN_HOME, which must stay untouched)."""
    given, process = tmp_path / "given-home", tmp_path / "process-home"
    env = {**os.environ, "CAIRN_HOME": str(given), "CAIRN_NO_WARM": "1"}
    monkeypatch.setenv("CAIRN_HOME", str(process))
    return env, given, process


def _untouched(process: Path) -> None:
    assert not process.exists(), f"created under the process's CAIRN_HOME: {sorted(process.rglob('*'))}"


@pytest.mark.parametrize("kind", ["in-process", "warm"])
def test_a_hook_is_answered_from_the_data_root_of_its_runtime(homes, project, kind, hashing):
    env, given, process = homes
    with Cairn.open(cwd=project, env=env, embedder=None) as memory:
        fact = memory.remember("We deploy with Kamal to the Hetzner boxes", kind="decision").memory
        memory.remember("I prefer short answers", kind="preference", scope="global")
    runtime = (InProcessRuntime(environ=env) if kind == "in-process"
               else WarmRuntime(load_config(env=env), hashing, environ=env))
    hook = {"CLAUDE_PROJECT_DIR": str(project)}
    start = handle("SessionStart", {"session_id": "s-1", "source": "startup"}, hook, runtime)
    assert start is not None and fact.id in start["hookSpecificOutput"]["additionalContext"]
    prompt = handle("UserPromptSubmit", {"session_id": "s-1", "prompt": "how do we deploy with Kamal?"}, hook,
                    runtime)
    assert prompt is None or "Kamal" not in json.dumps(prompt)  # already in the context: not injected again
    assert (given / "sessions").is_dir()  # the session's state is kept in the runtime's data root
    set_paused("s-2", True, env)
    assert handle("SessionStart", {"session_id": "s-2", "source": "startup"}, hook, runtime) is None
    if kind == "warm":
        runtime.close()
    _untouched(process)


def test_cli_commands_use_their_roots_environment(homes, project, capsys, monkeypatch):
    env, given, process = homes
    monkeypatch.setattr(_common, "environ", lambda: env)
    monkeypatch.setattr(serve, "environ", lambda: env)  # imported by name there
    monkeypatch.chdir(project)
    assert run_cli(capsys, ["remember", "We deploy with Kamal", "--kind", "decision"])[0] == 0
    assert run_cli(capsys, ["stores", "create", "notes"])[0] == 0
    code, out, _ = run_cli(capsys, ["stores", "--json"])
    assert code == 0 and json.loads(out)["data_root"] == str(given)
    assert {s["name"] for s in json.loads(out)["stores"]} >= {"notes"}
    code, out, _ = run_cli(capsys, ["backup", "--all", "--json"])
    assert code == 0 and all(Path(b["path"]).parent == given / "backups" for b in json.loads(out)["backups"])
    assert run_cli(capsys, ["stores", "rename", "notes", "jottings"])[0] == 0
    assert run_cli(capsys, ["stores", "delete", "jottings", "--yes"])[0] == 0
    assert run_cli(capsys, ["token", "create", "laptop"])[0] == 0
    assert (given / "tokens.json").is_file()
    assert run_cli(capsys, ["token", "revoke", "laptop"])[0] == 0
    code, out, _ = run_cli(capsys, ["status", "--json"])
    assert code == 0
    _untouched(process)
