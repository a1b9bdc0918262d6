"""Claude Code's auto memory beside Cairn's: import with history, never inject twice, export back."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from cairn import Cairn
from cairn.adapters.claude.hooks import handle
from cairn.adapters.claude.transcripts import encoded_project
from cairn.adapters.claude.loaded import already_loaded
from cairn.adapters.claude.auto_memory import INDEX_MAX_BYTES, INDEX_MAX_LINES, export, native_memory
from cairn.adapters.claude.auto_memory_sync import doctor_check, pending, sync

from tests.conftest import BACKENDS, run_cli


def native_file(folder: Path, name: str, description: str, body: str, type_: str = "project") -> Path:
    """A memory file exactly as the pinned CLI writes one (its prompt's template)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(f"---\nname: {name}\ndescription: {description}\nmetadata:\n  type: {type_}\n---\n\n{body}\n",
                    encoding="utf-8")
    return path


def index(folder: Path, names: list[str]) -> None:
    (folder / "MEMORY.md").write_text("".join(f"- [{n.replace('-', ' ').title()}]({n}.md) \u2014 {n}\n"
                                              for n in names), encoding="utf-8")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_DISABLE_AUTO_MEMORY", "CLAUDE_CODE_SIMPLE"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def folder(home, project) -> Path:
    return home / ".claude" / "projects" / encoded_project(project.resolve()) / "memory"


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def memory(project, home, use_backend):
    with Cairn.open(cwd=project, embedder=None) as engine:
        yield engine


def current(memory: Cairn) -> dict[str, tuple[str, str]]:
    return {m.text: (m.kind, m.source) for m in memory.list(limit=10_000, scope="project")}


def test_the_folder_and_switch_follow_the_cli_rules(home, project, monkeypatch):
    native = native_memory(project)
    assert native.enabled and native.folder == home / ".claude" / "projects" / encoded_project(project) / "memory"
    assert native_memory(project / "sub" if (project / "sub").mkdir() is None else project).folder == native.folder
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": "/elsewhere"}))
    assert native_memory(project).folder == native.folder  # ignored in a checked-in settings file
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": "~/notes/mem",
                                                                "autoMemoryEnabled": False}))
    native = native_memory(project)
    assert native.folder == home / "notes" / "mem" and not native.enabled
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "0")
    assert native_memory(project).enabled
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
    assert not native_memory(project).enabled


def test_each_file_becomes_one_memory_and_edits_keep_history(memory, project, folder):
    native_file(folder, "deploy-kamal", "We deploy with Kamal", "Deploys go through `kamal deploy` from main.")
    native_file(folder, "user-role", "The user is a data scientist", "New to the frontend code.", "user")
    native_file(folder, "no-mocks", "Integration tests hit a real database", "**Why:** mocks hid a bug.", "feedback")
    done = sync(memory, native_memory(project))
    assert (done["created"], done["failed"]) == (3, {})
    mems = current(memory)
    assert mems["We deploy with Kamal\n\nDeploys go through `kamal deploy` from main."] == ("fact", "claude-memory")
    assert ("preference", "claude-memory") in mems.values() and ("convention", "claude-memory") in mems.values()
    assert not any(pending(memory, native_memory(project)).values())
    assert sync(memory, native_memory(project))["unchanged"] == 3  # nothing read again

    path = folder / "deploy-kamal.md"
    old_id = next(m.id for m in memory.list(scope="project") if "Kamal" in m.text)
    native_file(folder, "deploy-kamal", "We deploy with Docker Compose", "Kamal was dropped.")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 2_000_000_000))
    assert sync(memory, native_memory(project))["superseded"] == 1
    history = memory.history(old_id)
    assert [m.status for m in history] == ["superseded", "current"] and "Kamal" in history[0].text
    (folder / "user-role.md").unlink()
    assert sync(memory, native_memory(project))["retired"] == 1
    assert not any("data scientist" in t for t in current(memory))
    retired = [m for m in memory.list(scope="project", include_superseded=True) if "data scientist" in m.text]
    assert retired[0].status == "retired"  # kept, with its text


def test_values_the_cli_quotes_itself_are_read(memory, project, folder):
    native_file(folder, "colon", "Use ruff: not flake8", "Ruff replaced flake8 and isort: one tool.", "feedback")
    (folder / "unclosed.md").write_text("---\nname: unclosed\ndescription: no end\n\nbody\n")
    done = sync(memory, native_memory(project))
    assert done["created"] == 1 and "not closed" in done["failed"]["unclosed.md"]
    assert current(memory) == {"Use ruff: not flake8\n\nRuff replaced flake8 and isort: one tool.":
                               ("convention", "claude-memory")}


def test_secrets_and_private_spans_are_scrubbed(memory, project, folder):
    # A key's body made up at random: a run of one letter to the end is a placeholder (secret_values.PLACEHOLDER).
    key = "sk-ant-api03-" + "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze" * 2 + "Xw4Nc9Rb3Yw6Hd1Jg5Fs0QaLm2-AbCd"
    native_file(folder, "creds", "The staging key", f"Use {key} <private>my home address</private> for staging.")
    sync(memory, native_memory(project))
    text = next(iter(current(memory)))
    assert key not in text and "home address" not in text and "REDACTED" in text


@pytest.mark.parametrize("case", ["unreadable", "frontmatter", "huge", "symlink", "latin1"])
def test_bad_input_gets_a_reason_and_nothing_partial(memory, project, folder, tmp_path, case, caplog):
    native_file(folder, "good", "A good memory", "It imports.")
    bad = folder / "bad.md"
    if case == "unreadable":
        native_file(folder, "bad", "Secret", "x")
        bad.chmod(0)
        if os.access(bad, os.R_OK):  # root reads anything: make it unreadable another way
            bad.unlink()
            bad.mkdir()
    elif case == "frontmatter":
        bad.write_text("---\nname: bad\ndescription: fine\nmetadata:\n    type: user\n  scope: x\n---\nbody\n")
    elif case == "huge":
        bad.write_text("---\nname: bad\ndescription: big\n---\n" + "x" * (5 * 1024 * 1024))
    elif case == "symlink":
        outside = tmp_path / "outside.md"
        outside.write_text("---\nname: out\ndescription: outside\n---\nleaked\n")
        bad.symlink_to(outside)
    else:
        bad.write_bytes("---\nname: bad\ndescription: caf\u00e9\n---\nna\u00efve\n".encode("latin-1"))
    with caplog.at_level(logging.WARNING):
        done = sync(memory, native_memory(project))
    assert done["created"] == 1 and list(done["failed"]) == ["bad.md"]
    reason = done["failed"]["bad.md"]
    expected = {"unreadable": ("cannot be read", "not a regular file"), "frontmatter": ("not valid YAML",),
                "huge": ("5242", "limit"), "symlink": ("outside the memory folder",), "latin1": ("not UTF-8",)}[case]
    assert any(e in reason for e in expected), reason
    assert "bad.md" in caplog.text and reason in caplog.text
    assert list(current(memory)) == ["A good memory\n\nIt imports."]
    # Refused once, it is not read again until it changes; once gone, nothing is left to report.
    assert not any(pending(memory, native_memory(project)).values())
    if bad.is_dir():
        bad.rmdir()
    else:
        bad.chmod(0o600)
        bad.unlink()
    assert pending(memory, native_memory(project))["deleted"] == ["bad.md"]
    sync(memory, native_memory(project))
    assert doctor_check(memory, project, None).status == "ok"


def test_nothing_is_written_into_the_folder(memory, project, folder):
    native_file(folder, "one", "One", "Body.")
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    sync(memory, native_memory(project))
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_what_claude_code_loaded_is_not_injected(memory, project, folder, home):
    (project / "CLAUDE.md").write_text("# Rules\n\n- Run the linter before pushing.\n")
    (project / ".claude" / "rules").mkdir(parents=True)
    (project / ".claude" / "rules" / "db.md").write_text("---\npaths: ['db/**']\n---\nMigrations are reversible.\n")
    in_claude_md = memory.remember("run the linter before pushing", kind="convention", detect=False).memory
    in_rules = memory.remember("Migrations are reversible.", kind="convention", detect=False).memory
    other = memory.remember("The linter is ruff, run before pushing to main", kind="convention", detect=False).memory
    native_file(folder, "deploy", "Deploys use Kamal and run from main", "Kamal deploys run from main.")
    index(folder, ["deploy"])
    sync(memory, native_memory(project))
    imported = next(m for m in memory.list(scope="project") if m.source == "claude-memory")
    loaded = already_loaded(memory, project)
    assert loaded == {in_claude_md.id, in_rules.id, imported.id}

    payload = {"session_id": "s1", "cwd": str(project), "source": "startup"}
    env = {"CLAUDE_PROJECT_DIR": str(project), "HOME": str(home),
           **{k: os.environ[k] for k in ("CAIRN_POSTGRES_URL", "CAIRN_CONFIG") if k in os.environ}}
    out = handle("SessionStart", payload, env)
    brief = out["hookSpecificOutput"]["additionalContext"]
    assert other.id in brief and in_claude_md.id not in brief and imported.id not in brief
    out = handle("UserPromptSubmit", {**payload, "prompt": "how do deploys with kamal run from main?"}, env)
    assert out is None or imported.id not in json.dumps(out)
    code, text, _ = run_cli_in(project, ["status"])
    assert "3 memories are not injected" in text


def run_cli_in(project: Path, args: list[str]):
    import subprocess
    import sys

    engine = Path(__file__).resolve().parents[2] / "engine"
    env = {**os.environ, "PYTHONPATH": str(engine), "CAIRN_NO_WARM": "1"}
    out = subprocess.run([sys.executable, "-m", "cairn", *args], cwd=project, env=env, capture_output=True,
                         text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_export_then_import_gives_the_same_memories(memory, project, tmp_path, home):
    kinds = ["decision", "convention", "preference", "fact", "task", "insight"]
    for i in range(500):
        text = f"Memory number {i} says the service {i} listens on port {8000 + i}"
        if i % 10 == 0:  # several lines, and a first line longer than an index line
            text = f"{text}, behind the gateway{' and the proxy' * 12}.\n\n- **Why:** ports are planned.\n- [[ports]]"
        memory.remember(text, kind=kinds[i % 6], tags=[f"t{i % 7}"], importance=1 + i % 5, detect=False)
    out = tmp_path / "exported"
    done = export(memory.list(limit=1000, scope="project"), out)
    assert done["files"] == 500
    index_bytes = (out / "MEMORY.md").read_bytes()
    assert len(index_bytes) <= INDEX_MAX_BYTES and len(index_bytes.decode().splitlines()) <= INDEX_MAX_LINES
    assert all(len(line) <= 150 for line in index_bytes.decode().splitlines())

    with Cairn.open("fresh", create=True, embedder=None) as fresh:
        native = native_memory(project)
        from dataclasses import replace

        assert sync(fresh, replace(native, folder=out))["created"] == 500

        def key(m):
            return (m.text, m.kind, tuple(t for t in m.tags if t != "claude-memory"), m.importance)

        assert sorted(map(key, fresh.list(limit=1000, scope="project"))) == \
            sorted(map(key, memory.list(limit=1000, scope="project")))


def test_export_refuses_the_live_folder_unless_asked(memory, project, folder, capsys, monkeypatch):
    memory.remember("We use Postgres 16", kind="decision")
    monkeypatch.chdir(project)
    code, _, err = run_cli(capsys, ["export", "--format", "claude-memory", str(folder)])
    assert code == 2 and "--into-claude-memory" in err and not folder.exists()
    native_file(folder, "own", "Claude's own memory", "Written by the CLI.")
    index(folder, ["own"])
    sync(memory, native_memory(project))
    code, out, _ = run_cli(capsys, ["export", "--format", "claude-memory", "--into-claude-memory"])
    assert code == 0 and "exported 1" in out  # not the memory that came from the folder
    lines = (folder / "MEMORY.md").read_text().splitlines()
    assert lines[0].startswith("- [Own](own.md)") and "We use Postgres 16" in lines[1] and len(lines) == 2
    assert (folder / "own.md").read_text().endswith("Written by the CLI.\n")


def test_doctor_reports_the_folder_and_whether_sync_is_current(memory, project, folder):
    native_file(folder, "one", "One", "Body.")
    check = doctor_check(memory, project, None)
    assert check.status == "warn" and str(folder) in check.detail and "1 new" in check.detail
    sync(memory, native_memory(project))
    check = doctor_check(memory, project, None)
    assert check.status == "ok" and "sync current" in check.detail


def test_session_start_syncs_in_a_detached_process(project, folder, home):
    from tests.conftest import wait_for

    for i in range(3):
        native_file(folder, f"m{i}", f"Native memory {i}", f"Body {i}.")
    env = {"CLAUDE_PROJECT_DIR": str(project), "HOME": str(home), "CAIRN_HOME": os.environ["CAIRN_HOME"],
           "CAIRN_CONFIG": os.environ["CAIRN_CONFIG"]}
    handle("SessionStart", {"session_id": "s2", "cwd": str(project), "source": "startup"}, env)

    def imported() -> int:
        try:
            with Cairn.open(cwd=project, embedder=None, read_only=True) as engine:
                return len(engine.list(scope="project"))
        except Exception:  # noqa: BLE001 - the store may not exist yet
            return 0

    wait_for(lambda: imported() == 3, what="the background sync")
    log = Path(os.environ["CAIRN_HOME"]) / "logs" / "claude-memory.log"
    wait_for(lambda: log.exists() and "3 created" in log.read_text(), what="the background sync's log")


def test_the_loaded_text_matches_are_cached_until_a_file_changes(memory, project, home):
    (project / "CLAUDE.md").write_text("- Use uv for every Python command.\n")
    first = memory.remember("Use uv for every Python command.", kind="convention", detect=False).memory
    second = memory.remember("Tabs are never used in YAML files.", kind="convention", detect=False).memory
    cache: dict = {}
    assert already_loaded(memory, project, cache=cache) == {first.id}
    assert cache["ids"] == [first.id]
    assert already_loaded(memory, project, cache=cache) == {first.id}
    (project / "CLAUDE.md").write_text("- Use uv for every Python command.\n- Tabs are never used in YAML files\n")
    assert already_loaded(memory, project, cache=cache) == {first.id, second.id}


def test_the_cli_import_lists_what_it_refused(memory, project, folder, capsys, monkeypatch):
    native_file(folder, "good", "A good memory", "It imports.")
    (folder / "bad.md").write_bytes(b"---\nname: bad\n---\n\xff\n")
    monkeypatch.chdir(project)
    code, out, _ = run_cli(capsys, ["import-claude-memory"])
    assert code == 0 and "1 imported" in out and "bad.md: it is not UTF-8" in out
    code, out, _ = run_cli(capsys, ["import-claude-memory", "--json"])
    again = json.loads(out)
    assert code == 0 and again["unchanged"] == 1 and list(again["failed"]) == ["bad.md"]


def test_with_sync_off_a_session_start_imports_nothing(project, folder, home, monkeypatch, tmp_path):
    native_file(folder, "one", "One", "Body.")
    config = tmp_path / "off.yaml"
    config.write_text("claude_memory:\n  sync: false\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    started = []
    monkeypatch.setattr("cairn.adapters.claude.auto_memory_sync.start_background_sync",
                        lambda *a, **k: started.append(a))
    env = {"CLAUDE_PROJECT_DIR": str(project), "HOME": str(home), "CAIRN_CONFIG": str(config)}
    handle("SessionStart", {"session_id": "s3", "cwd": str(project), "source": "startup"}, env)
    assert started == []
    config.write_text("")
    handle("SessionStart", {"session_id": "s4", "cwd": str(project), "source": "startup"}, env)
    assert len(started) == 1
