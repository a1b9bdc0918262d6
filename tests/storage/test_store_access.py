"""A store this user cannot open (another user's file, such as one `sudo cairn ...` created): one
`cairn: error:` line naming the file and its owner, exit 2; a hook fails open with one line in
hooks.log. Run as root without the capabilities that let root read any file (setpriv), which is
what another user's 0600 file is to an ordinary user."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys

import pytest

from cairn import Cairn, StoreUnreadable
from cairn.storage.db import unreadable

NOBODY = 65534


def as_ordinary_user(args: list[str], **kw) -> subprocess.CompletedProcess:
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    return subprocess.run([*drop, sys.executable, "-m", "cairn", *args], capture_output=True, text=True,
                          timeout=120, **kw)


@pytest.fixture
def foreign_store(cairn_home, project) -> str:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to stand for a file of another user")
    with Cairn.open(cwd=project, embedder=None) as memory:
        memory.remember("We deploy with Kamal")
        path = memory.status().path
    for name in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.exists(name):
            os.chown(name, NOBODY, NOBODY)
    return path


@pytest.mark.parametrize("command", [["recall", "deploy"], ["status"], ["remember", "x", "--keyword-only"]])
def test_the_cli_names_the_file_and_its_owner_in_one_line(foreign_store, project, command):
    env = {**os.environ, "CAIRN_NO_WARM": "1"}
    out = as_ordinary_user(command, cwd=project, env=env)
    owner = pwd.getpwuid(NOBODY).pw_name
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("cairn: error: ") and out.stderr.count("\n") == 1, out.stderr
    assert foreign_store in out.stderr and f"belongs to {owner}" in out.stderr


def test_a_hook_fails_open_with_one_line_in_hooks_log(foreign_store, project, cairn_home):
    env = {**os.environ, "CAIRN_NO_WARM": "1", "CLAUDE_PROJECT_DIR": str(project)}
    payload = json.dumps({"prompt": "how do we deploy the app?", "session_id": "s1", "cwd": str(project)})
    out = as_ordinary_user(["hook", "UserPromptSubmit"], cwd=project, env=env, input=payload)
    assert out.returncode == 0 and out.stdout == ""
    log = (cairn_home / "logs" / "hooks.log").read_text().strip().splitlines()
    assert len(log) == 1 and foreign_store in log[0] and "Traceback" not in log[0]


def test_a_readable_file_is_not_reported(tmp_path):
    path = tmp_path / "ok.db"
    path.write_bytes(b"")
    assert unreadable(str(path)) is None
    assert issubclass(StoreUnreadable, Exception)
