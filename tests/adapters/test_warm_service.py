"""The warm process: started on demand, serves hooks with hybrid recall, never serves a forgotten or
replaced memory, steps down for new code, and exits when idle."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from cairn import Cairn, create_store
from cairn.adapters.warm import client as warm
from cairn.adapters.warm.embedders import session_embedder

from tests.conftest import WAIT_S, wait_for


@pytest.fixture
def service(monkeypatch, cairn_home):
    monkeypatch.setenv("CAIRN_SERVICE_IDLE_SECONDS", "60")
    assert warm.spawn(sys.executable)
    assert warm.wait_until_ready(120), (cairn_home / "logs" / "service.log").read_text()
    yield warm
    warm.request({"op": "shutdown"})
    wait_for(lambda: not warm.is_running(), WAIT_S, "the warm process to stop when asked")


def ask(project, prompt: str) -> str:
    reply = warm.request({"op": "hook", "event": "UserPromptSubmit", "env": {"CLAUDE_PROJECT_DIR": str(project)},
                          "payload": {"prompt": prompt, "session_id": "s"}}, timeout=30)
    assert reply is not None
    output = reply["output"]
    return output["hookSpecificOutput"]["additionalContext"] if output else ""


def test_one_instance_serves_hooks_with_vectors_and_never_a_forgotten_or_replaced_memory(service, project, minilm):
    assert not warm.spawn(sys.executable)  # already running: a second start does nothing
    with Cairn.open(cwd=project, embedder=minilm) as memory:
        old = memory.remember("Production deploys go through blue-green on Fly.io", kind="decision").memory
        assert old.id in ask(project, "How do production deploys work here?")
        new = memory.replace(old.id, "Production deploys go through Kamal on our own servers").memory
        context = ask(project, "How do production deploys work here?")
        assert new.id in context and old.id not in context and "Fly.io" not in context
        memory.forget(new.id)
        assert ask(project, "How do production deploys work here?") == ""
    vectors = warm.decode_vectors(warm.request({"op": "embed", "texts": ["a", "b"]}, timeout=30))
    assert [len(v) for v in vectors] == [384 * 4, 384 * 4]


def _engine_copy(dest):
    """A copy of the engine's package with its files' modification times (as a plugin install
    copies it: tests/e2e/harness.py, pristine_copy)."""
    shutil.copytree(warm.PACKAGE_DIR, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return str(dest)


def test_a_request_from_the_same_code_elsewhere_is_served_and_one_from_edited_code_makes_it_step_down(
        service, monkeypatch, tmp_path):
    copy = _engine_copy(tmp_path / "cairn")
    monkeypatch.setattr(warm, "PACKAGE_DIR", copy)
    assert warm.request({"op": "ping"}) is not None  # same files, same sizes and times: the same code
    edited = os.path.join(copy, "context.py")
    with open(edited, "a") as handle:  # rewritten in place: its folder's mtime does not change
        handle.write("\n")
    assert warm.request({"op": "ping"}) is None
    wait_for(lambda: not warm.is_running() and not warm.socket_path().exists(), WAIT_S,
             "the warm process to step down and remove its socket")


def test_code_versions_sees_every_change_of_the_package_and_walks_it_only_then(tmp_path, monkeypatch):
    package = _engine_copy(tmp_path / "cairn")
    versions = warm.CodeVersions()
    first = versions.version(package)
    assert first == warm.code_version(package) == warm.code_version()  # a copy with its times is the same code
    walks = []
    real_walk = os.walk
    monkeypatch.setattr(warm.os, "walk", lambda *a, **k: walks.append(a) or real_walk(*a, **k))
    assert versions.version(package) == first and walks == []  # unchanged: a stat per file, no walk

    def changed() -> str:
        version = versions.version(package)
        assert version == warm.code_version(package)
        return version

    target = os.path.join(package, "adapters", "warm/client.py")
    stat = os.stat(target)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # touched: another mtime
    seen = {first, changed()}
    with open(target, "a") as handle:  # appended in place
        handle.write("# x\n")
    seen.add(changed())
    with open(os.path.join(package, "adapters", "new_module.py"), "w") as handle:  # a file added
        handle.write("")
    seen.add(changed())
    os.rename(os.path.join(package, "adapters", "new_module.py"), os.path.join(package, "adapters", "renamed.py"))
    seen.add(changed())
    os.remove(os.path.join(package, "adapters", "renamed.py"))  # and removed: the earlier fingerprint again
    assert changed() in seen
    os.makedirs(os.path.join(package, "newpkg"))
    with open(os.path.join(package, "newpkg", "__init__.py"), "w") as handle:  # a new subpackage
        handle.write("")
    seen.add(changed())
    assert len(seen) == 6
    assert versions.version(str(tmp_path / "missing")) is None


def test_it_exits_when_idle(monkeypatch, cairn_home):
    monkeypatch.setenv("CAIRN_SERVICE_IDLE_SECONDS", "2")
    assert warm.spawn(sys.executable)
    assert warm.wait_until_ready(120)
    log = cairn_home / "logs" / "service.log"
    wait_for(lambda: not warm.is_running() and not warm.socket_path().exists(), WAIT_S,
             lambda: f"the warm process to exit when idle\n{log.read_text()[-3000:]}")
    assert "idle for 2 s" in log.read_text()


def test_a_store_deleted_or_replaced_under_it_is_reopened_not_served_from_the_old_file(service, project, minilm):
    from cairn import delete_store

    with Cairn.open(cwd=project, embedder=minilm) as memory:
        memory.remember("Production deploys go through blue-green on Fly.io", kind="decision")
        name, path = memory.name, memory.status().path
    assert "Fly.io" in ask(project, "How do production deploys work here?")
    delete_store(name)
    assert ask(project, "How do production deploys work here?") == ""  # gone, not served from the open handle
    with Cairn.open(cwd=project, embedder=minilm) as memory:  # a new store at the same path
        memory.remember("Production deploys go through Kamal on our own servers", kind="decision")
    context = ask(project, "How do production deploys work here?")
    assert "Kamal" in context and "Fly.io" not in context
    # Replaced by another file (as a restore does): the other file's memories are served.
    with Cairn.open(store="restored", create=True, embedder=minilm) as other:
        other.remember("Production deploys go through Heroku pipelines", kind="decision")
        restored = other.status().path
    delete_store(name)
    os.replace(restored, path)
    context = ask(project, "How do production deploys work here?")
    assert "Heroku" in context and "Kamal" not in context


def test_a_changed_config_or_cairn_store_counts_at_the_next_prompt(service, project, minilm, monkeypatch):
    # The warm process keeps each project's store and config resolved (ResolveCache): an edit to
    # .cairn.yaml or another CAIRN_STORE must still take effect on the very next prompt.
    def ask_as(session: str, **env) -> str:
        reply = warm.request({"op": "hook", "event": "UserPromptSubmit", "env": {"CLAUDE_PROJECT_DIR": str(project),
                                                                                 **env},
                              "payload": {"prompt": "How do production deploys work here?", "session_id": session}},
                             timeout=30)
        assert reply is not None and reply["timings"]["total"] > 0
        output = reply["output"]
        assert reply["stdout"] == (json.dumps(output) if output else "")
        return output["hookSpecificOutput"]["additionalContext"] if output else ""

    with Cairn.open(cwd=project, embedder=minilm) as memory:
        ours = memory.remember("Production deploys go through Kamal on our own servers", kind="decision").memory
    assert ours.id in ask_as("a")
    config = project / ".cairn.yaml"
    config.write_text("hooks:\n  enabled: false\n")
    assert ask_as("b") == ""
    config.write_text("hooks:\n  enabled: true\n")
    assert ours.id in ask_as("c")
    create_store("other")
    with Cairn.open("other", embedder=minilm) as other:
        theirs = other.remember("Production deploys go through Heroku pipelines", kind="decision").memory
    context = ask_as("d", CAIRN_STORE="other")
    assert theirs.id in context and ours.id not in context
    assert ours.id in ask_as("e")


def test_waiting_stops_as_soon_as_the_warm_process_dies():
    """A warm process that cannot load its model exits after a few seconds: the wait for it ends
    then, not after the whole wait."""
    import subprocess
    import time

    dying = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); raise SystemExit(1)"])
    started = time.monotonic()
    assert not warm.wait_until_ready(60, process=dying)
    assert time.monotonic() - started < 30  # returns within ~0.2 s of the exit; the bound allows a loaded machine


def test_the_wait_ends_when_the_status_file_says_the_process_failed_before_it_has_exited():
    """A process that cannot load its model says so in its status file before its (slow) exit: the
    wait ends within a few polls of that, not when the process is gone."""
    import subprocess
    import time

    code = ("import sys, time; from cairn.adapters.warm import client as warm; time.sleep(0.5); "
            "warm.write_status('failed', model=['m', 'auto', 'cpu', 32], error='cannot load m'); time.sleep(120)")
    warm.private_runtime_dir()
    failing = subprocess.Popen([sys.executable, "-c", code])
    try:
        assert not warm.wait_until_ready(100, process=failing)
        returned = time.time()
        assert failing.poll() is None  # still running: the status file ended the wait
        status = warm.read_status()
        assert status["pid"] == failing.pid and status["state"] == "failed"
        assert returned - status["at"] < 10 * warm.POLL_SECONDS, "the wait outlived the failure by > 10 polls"
        assert warm.load_failure(["m", "auto", "cpu", 32], pid=failing.pid) == "cannot load m"
        assert warm.load_failure(["other", "auto", "cpu", 32], pid=failing.pid) is None
    finally:
        failing.kill()
        failing.wait()


@pytest.mark.model  # sentence-transformers (PyTorch) is what finds the model missing
def test_the_cli_takes_the_warm_processs_failure_to_load_its_model_and_says_why_once(tmp_path, project):
    """A model that cannot load (not cached, offline): the warm process's failed attempt is the CLI's
    too. It goes keyword-only within a few polls of the failure, rather than loading the model a
    second time, and says why once. The in-process run is timed beside it, for the report."""
    import subprocess
    import time

    config = tmp_path / "uncached-model.yaml"
    config.write_text("embedding:\n  model: some-org/not-cached-model\n")
    env = {**os.environ, "CAIRN_CONFIG": str(config), "HF_HUB_OFFLINE": "1"}
    env.pop("CAIRN_NO_WARM", None)

    def remember(text: str, **extra: str) -> tuple[subprocess.CompletedProcess, float]:
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "cairn", "remember", "--no-ask", text], cwd=project,
                             env={**env, **extra}, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("remembered "), out.stdout
        return out, time.monotonic() - started

    in_process, in_process_s = remember("We deploy with Kamal", CAIRN_NO_WARM="1")
    out, warm_s = remember("Staging deploys on every merge")
    ended = time.time()
    status = warm.read_status()
    assert status and status["state"] == "failed", status
    assert status["model"][0] == "some-org/not-cached-model"
    # The CLI stopped waiting at the failure, not at the process's exit, and did not load again.
    assert ended - status["at"] < 2.0, f"the CLI ended {ended - status['at']:.1f} s after the failure"
    assert out.stderr.count("cannot load embedding model 'some-org/not-cached-model'") == 1, out.stderr
    assert "The warm process tried; not tried again in this process." in out.stderr
    assert "loading the model in this process" not in out.stderr
    print(f"in-process {in_process_s:.1f} s, through the failing warm process {warm_s:.1f} s")
    assert in_process.stderr.count("keyword-only: cannot load embedding model") == 1, in_process.stderr


@pytest.mark.model  # sentence-transformers (PyTorch) is what finds the model missing
def test_a_running_warm_process_that_cannot_load_a_projects_model_is_not_followed_by_a_second_attempt(
        monkeypatch, cairn_home):
    """The warm process is up with the default model; a project names one that cannot load. Its
    answer says so, and the client raises that reason instead of loading the model itself."""
    from cairn import EmbedderUnavailable, load_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # inherited by the warm process: the load fails at once
    monkeypatch.setenv("CAIRN_SERVICE_IDLE_SECONDS", "60")
    assert warm.spawn(sys.executable)
    try:
        assert warm.wait_until_ready(120), (cairn_home / "logs" / "service.log").read_text()
        config = load_config(None)
        config["embedding"]["model"] = "some-org/not-cached-model"
        client = session_embedder(config, short_lived=True)
        with pytest.raises(EmbedderUnavailable, match="The warm process tried; not tried again"):
            client.embed_queries(["where do we deploy"])
        assert not client.local.loaded and client.local.error is None  # no attempt in this process
        assert "cannot load embedding model 'some-org/not-cached-model'" in client.error
        with pytest.raises(EmbedderUnavailable):  # and none on the next call either
            client.embed(["we deploy with Kamal"])
    finally:
        warm.request({"op": "shutdown"})
        wait_for(lambda: not warm.is_running(), WAIT_S, "the warm process to stop when asked")
