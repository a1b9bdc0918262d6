"""The hook process's warm path is lean: it finds the warm process's socket without platformdirs or
tempfile, and talks to it without json or socket (their C halves only). Each replica is checked
against the library it replaces, so the two can never diverge silently; and a real hook process,
asking a stand-in warm process, imports nothing beyond the listed modules before it prints."""

from __future__ import annotations

import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import platformdirs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn import data_root
from cairn.home import unusable_data_root
from cairn.adapters.warm import client as warm
from cairn.locations import data_root_dir, user_config_dir, user_data_dir

from tests.test_architecture import HOOK_WARM_PATH_MODULES as WARM_PATH_MODULES

ENGINE = Path(__file__).resolve().parents[2] / "engine"


@pytest.mark.parametrize("xdg", [None, "", "relative/data", "/srv/data", "/srv/data/", "/srv/data with space"])
@pytest.mark.parametrize("home", ["real", "/home/someone", "/home/someone/", None, "relative-home"])
def test_the_user_data_folder_is_platformdirs_answer(monkeypatch, xdg, home):
    monkeypatch.delenv("CAIRN_HOME")
    for name, value in (("XDG_DATA_HOME", xdg), ("HOME", home)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        elif value != "real":
            monkeypatch.setenv(name, value)
    expected = platformdirs.user_data_dir("cairn")
    assert user_data_dir() == expected
    assert data_root_dir() == expected
    assert data_root() == Path(expected)


@pytest.mark.parametrize("xdg", [None, "", "relative/config", "/srv/config", "/srv/config/"])
@pytest.mark.parametrize("home", ["real", "/home/someone", None, "relative-home"])
def test_the_user_config_folder_is_platformdirs_answer(monkeypatch, xdg, home):
    for name, value in (("XDG_CONFIG_HOME", xdg), ("HOME", home)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        elif value != "real":
            monkeypatch.setenv(name, value)
    assert user_config_dir() == platformdirs.user_config_dir("cairn")


@settings(max_examples=60, deadline=None)
@given(xdg=st.one_of(st.none(), st.text(st.characters(blacklist_characters="\0", codec="utf-8"), max_size=20),
                     st.text(st.characters(blacklist_characters="\0", codec="utf-8"), max_size=20).map("/{}".format)))
def test_any_xdg_data_home_gives_platformdirs_answer(xdg):
    saved = {k: os.environ.get(k) for k in ("XDG_DATA_HOME", "CAIRN_HOME")}
    try:
        os.environ.pop("CAIRN_HOME", None)
        os.environ.pop("XDG_DATA_HOME", None)
        if xdg is not None:
            os.environ["XDG_DATA_HOME"] = xdg
        assert user_data_dir() == platformdirs.user_data_dir("cairn")
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None)
            if value is not None:
                os.environ[key] = value


@pytest.mark.parametrize("cairn_home", [None, "~/memories", "/srv/cairn", ""])
@pytest.mark.parametrize("xdg", [None, "/srv/data", "relative/data"])
# (a relative HOME is left to platformdirs, which has no env of its own: locations.py says so)
@pytest.mark.parametrize("home", [None, "/home/someone", "/"])
def test_a_given_env_is_read_and_the_process_environment_is_not(monkeypatch, cairn_home, xdg, home):
    # A composition root passes its env: the answer is what the process environment would give
    # if it were that env, whatever the process environment holds meanwhile.
    env = {k: v for k, v in (("CAIRN_HOME", cairn_home), ("XDG_DATA_HOME", xdg), ("XDG_CONFIG_HOME", xdg),
                             ("HOME", home)) if v is not None}
    for name in ("CAIRN_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    expected = (data_root_dir(), user_data_dir(), user_config_dir(), unusable_data_root())
    for name, value in {"CAIRN_HOME": "/elsewhere", "XDG_DATA_HOME": "/other", "XDG_CONFIG_HOME": "/other",
                        "HOME": "/nobody"}.items():
        monkeypatch.setenv(name, value)
    assert (data_root_dir(env), user_data_dir(env), user_config_dir(env), unusable_data_root(env)) == expected


def test_cairn_home_wins_and_is_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("CAIRN_HOME", "~/memories")
    assert data_root_dir() == os.path.expanduser("~/memories")
    assert data_root() == Path("~/memories").expanduser()


@pytest.mark.parametrize("tmpdir", [None, "here", "missing", "relative"])
def test_the_temp_folder_is_tempfiles_answer(monkeypatch, tmp_path, tmpdir):
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()
    if tmpdir is not None:
        value = {"here": str(tmp_path), "missing": str(tmp_path / "absent"), "relative": "rel"}[tmpdir]
        monkeypatch.setenv("TMPDIR", value)
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches its answer
    assert warm.temp_dir() == tempfile.gettempdir()


def test_the_socket_path_is_the_one_the_pathlib_version_gave(monkeypatch):
    # The socket's folder and name, computed as they were with tempfile, pathlib and platformdirs.
    import hashlib

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)
    key = hashlib.sha256(str(data_root().expanduser().resolve()).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"cairn-{os.getuid()}"
    assert warm.socket_path() == folder / f"{key}.sock"
    assert warm.lock_path() == folder / f"{key}.lock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/4242")
    assert warm.socket_file() == f"/run/user/4242/cairn-{os.getuid()}/{key}.sock"


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(value=JSON)
def test_the_lean_json_reader_agrees_with_json(value):
    text = json.dumps(value)
    assert warm.loads(text) == json.loads(text)
    assert warm.loads(f" {text}\n") == value


@pytest.mark.parametrize("bad", ["", "{", '{"a": 1} x', "nul", "[1,]"])
def test_the_lean_json_reader_refuses_what_json_refuses(bad):
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        warm.loads(bad)


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_json_strings_are_written_as_json_writes_them(text):
    assert warm.json_string(text) == json.dumps(text)


class StandIn:
    """A stand-in warm process on warm.socket_file(): records each request line and answers with
    `reply`."""

    def __init__(self, reply: dict):
        self.reply, self.lines = reply, []
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                outer.lines.append(self.rfile.readline())
                self.wfile.write(json.dumps(outer.reply).encode() + b"\n")

        path = Path(warm.socket_file())
        path.parent.mkdir(parents=True, exist_ok=True)
        self.server = socketserver.UnixStreamServer(str(path), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in(monkeypatch):
    runtime = tempfile.mkdtemp(prefix="cw", dir="/tmp")  # short: Unix socket paths are limited to ~104 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    output = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "é \"m1\"\nline"}}
    server = StandIn({"ok": True, "output": output, "stdout": json.dumps(output)})
    yield server
    server.close()
    shutil.rmtree(runtime, ignore_errors=True)


PAYLOADS = st.fixed_dictionaries({"session_id": st.text(max_size=10), "prompt": st.text(max_size=200),
                                  "cwd": st.text(max_size=30)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=PAYLOADS, pretty=st.booleans())
def test_the_hook_forwards_its_stdin_and_env_intact(stand_in, payload, pretty):
    stand_in.lines.clear()
    raw = json.dumps(payload, indent=2 if pretty else None, ensure_ascii=False)
    env = {"CLAUDE_PROJECT_DIR": "/p/é", "CAIRN_STORE": 'a"b', "OTHER": "not forwarded"}
    reply = warm.hook_request("UserPromptSubmit", raw, env)
    assert reply == stand_in.reply
    (line,) = stand_in.lines
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    sent = json.loads(line)
    assert sent == {"op": "hook", "event": "UserPromptSubmit", "payload": payload, "package": warm.PACKAGE_DIR,
                    "env": {"CLAUDE_PROJECT_DIR": "/p/é", "CAIRN_STORE": 'a"b'}}


def test_the_hook_process_warm_path_imports_only_the_listed_modules(stand_in, tmp_path):
    # A real hook process: what it imports between the interpreter's start and its answer.
    code = ("import sys\n"
            "before = set(sys.modules)\n"
            "from cairn.adapters.claude.hook_process import run_raw\n"
            "line = run_raw('UserPromptSubmit', sys.stdin.read())\n"
            "print(line)\n"
            "print(' '.join(sorted(set(sys.modules) - before)))\n")
    payload = {"session_id": "s", "prompt": "how do we deploy?", "cwd": str(tmp_path)}
    env = {**os.environ, "PYTHONPATH": str(ENGINE), "CLAUDE_PROJECT_DIR": str(tmp_path)}
    # -S as hooks/cairn-hook runs it: the warm path needs no site-packages.
    out = subprocess.run([sys.executable, "-P", "-S", "-c", code], input=json.dumps(payload), capture_output=True,
                         text=True, env=env, check=True, timeout=60)
    printed, imported = out.stdout.splitlines()
    assert printed == stand_in.reply["stdout"]
    # What a normal start imports anyway (site imports os, stat ...): with -S the hook imports them.
    normal = subprocess.run([sys.executable, "-P", "-c", "import sys; print(' '.join(sys.modules))"],
                            capture_output=True, text=True, check=True, timeout=60).stdout.split()
    extra = set(imported.split()) - set(normal)
    assert extra <= WARM_PATH_MODULES, sorted(extra - WARM_PATH_MODULES)
    assert json.loads(stand_in.lines[0])["payload"] == payload


def test_cairn_hook_prints_the_warm_process_answer(stand_in, tmp_path):
    payload = {"session_id": "s", "prompt": "how do we deploy?", "cwd": str(tmp_path)}
    env = {**os.environ, "PYTHONPATH": str(ENGINE), "CLAUDE_PROJECT_DIR": str(tmp_path), "CAIRN_NO_WARM": "1"}
    out = subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", "UserPromptSubmit"], input=json.dumps(payload),
                         capture_output=True, text=True, env=env, check=True, timeout=60)
    assert out.returncode == 0
    assert json.loads(out.stdout) == stand_in.reply["output"]


def test_sqlite_vec_is_found_where_the_package_says_without_importing_it():
    import sqlite_vec

    from cairn.storage.db import sqlite_vec_path

    assert sqlite_vec_path() == sqlite_vec.loadable_path()


def test_the_keyword_only_hook_answers_without_numpy(project, tmp_path):
    # The cold path (no warm process): BM25 and the lexical gate need neither numpy nor a model.
    from cairn import Cairn
    from cairn.adapters.claude.hooks import handle

    with Cairn.open(cwd=project, embedder=None) as memory:
        made = memory.remember("The billing service deploys with Kamal to our own servers", kind="decision").memory
    payload = {"session_id": "cold", "prompt": "how does the billing service deploy with Kamal?", "cwd": str(project)}
    code = ("import sys\n"
            "from cairn.adapters.claude.hook_process import run_raw\n"
            "print(run_raw('UserPromptSubmit', sys.stdin.read()))\n"
            "print(' '.join(m for m in ('numpy', 'sqlite_vec', 'platformdirs') if m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": str(ENGINE), "CLAUDE_PROJECT_DIR": str(project), "CAIRN_NO_WARM": "1",
           "XDG_RUNTIME_DIR": str(tmp_path / "no-warm-process")}
    # -S as hooks/cairn-hook runs it: the cold path adds site-packages itself (hook.with_site_packages).
    out = subprocess.run([sys.executable, "-P", "-S", "-c", code], input=json.dumps(payload), capture_output=True,
                         text=True, env=env, check=True, timeout=120)
    printed, heavy = (out.stdout.splitlines() + [""])[:2]
    assert made.id in printed
    expected = handle("UserPromptSubmit", {**payload, "session_id": "cold-in-process"},
                      {"CLAUDE_PROJECT_DIR": str(project)})
    assert json.loads(printed)["hookSpecificOutput"]["additionalContext"] == (
        expected["hookSpecificOutput"]["additionalContext"])
    assert heavy == ""
