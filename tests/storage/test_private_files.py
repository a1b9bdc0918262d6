"""Memories are private: the data root and every folder Cairn makes are 0700, every file 0600,
whatever the umask; an older install is tightened when opened; a root owned by someone else is refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import cairn.home
from cairn import Cairn, UnsafeDataRoot
from cairn.adapters.cli import main


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(root: Path) -> dict[str, str]:
    """{relative path: octal mode} of the root and everything under it (symlinks skipped)."""
    out = {".": oct(stat.S_IMODE(os.stat(root).st_mode))}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = os.lstat(path)
            if not stat.S_ISLNK(info.st_mode):
                out[str(path.relative_to(root))] = oct(stat.S_IMODE(info.st_mode))
    return out


def loose(root: Path) -> dict[str, str]:
    return {p: m for p, m in modes(root).items()
            if m != (oct(0o700) if (root / p).is_dir() else oct(0o600))}


def hook(event: str, payload: dict, project: Path, **env: str) -> None:
    subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", event], input=json.dumps(payload), text=True,
                   env={**os.environ, "CLAUDE_PROJECT_DIR": str(project), "CAIRN_NO_WARM": "1", **env},
                   cwd=str(project), capture_output=True, timeout=120, check=True)


def test_everything_cairn_writes_is_private_under_umask_022(umask_022, project, hashing, cairn_home, monkeypatch,
                                                            capsys):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        made = memory.remember("The CI runners are on Hetzner", kind="fact")
        memory.remember("Prefer British English", kind="preference", scope="global")
        memory.forget(made.memory.id)
    hook("SessionStart", {"session_id": "s-1", "source": "startup"}, project)
    hook("UserPromptSubmit", {"session_id": "s-1", "prompt": "where do the CI runners run?"}, project)
    hook("UserPromptSubmit", {"session_id": "s-2", "prompt": "anything"}, project,
         CAIRN_STORE="no-such-store")  # fails open, into logs/hooks.log
    subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", "pause", "s-1"], env=os.environ.copy(),
                   capture_output=True, timeout=120, check=True)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    monkeypatch.chdir(project)
    main(["stores", "create", "client-acme"])
    assert "created store client-acme" in capsys.readouterr().out

    written = modes(cairn_home)
    for expected in ("stores", "logs/hooks.log", "sessions/s-1.json", "paused/s-1", "stores/global.db",
                     "stores/client-acme.db"):
        assert expected in written, sorted(written)
    assert any(p.endswith(".db-wal") for p in written) or any(p.endswith(".db") for p in written)
    assert loose(cairn_home) == {}
    assert written["."] == oct(0o700)


def test_an_older_install_is_tightened_when_opened(project, hashing, cairn_home, umask_022):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        memory.remember("The CI runners are on Hetzner", kind="fact")
    # What an older Cairn left: everything readable by others.
    for folder, dirs, files in os.walk(cairn_home):
        for name in files:
            os.chmod(Path(folder) / name, 0o644)
        for name in dirs:
            os.chmod(Path(folder) / name, 0o755)
    (cairn_home / "logs").mkdir(mode=0o755)
    (cairn_home / "logs" / "hooks.log").write_text("old log\n")
    (cairn_home / "sessions").mkdir(mode=0o755)
    (cairn_home / "sessions" / "old.json").write_text("{}")
    os.chmod(cairn_home, 0o755)
    assert len(loose(cairn_home)) >= 6

    with Cairn.open(cwd=project, embedder=hashing, read_only=True) as memory:
        assert memory.counts()["current"] == 1
    assert loose(cairn_home) == {}


def test_a_data_root_shared_with_the_users_files_leaves_them_as_they_are(project, hashing, cairn_home, umask_022):
    # CAIRN_HOME pointed at a folder of the user's: their files keep their modes (a script its x bit);
    # Cairn's own entries are private all the same.
    cairn_home.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(cairn_home, 0o755)
    (cairn_home / "tools").mkdir(mode=0o755)
    script = cairn_home / "tools" / "deploy.sh"
    script.write_text("#!/bin/sh\n")
    os.chmod(script, 0o755)
    (cairn_home / "notes.txt").write_text("mine\n")
    os.chmod(cairn_home / "notes.txt", 0o644)
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        memory.remember("The CI runners are on Hetzner", kind="fact")
    written = modes(cairn_home)
    assert written["tools/deploy.sh"] == oct(0o755) and written["tools"] == oct(0o755)
    assert written["notes.txt"] == oct(0o644) and written["."] == oct(0o755)
    assert written["stores"] == oct(0o700)
    ours = {p: m for p, m in loose(cairn_home).items() if p.split("/")[0] not in ("tools", "notes.txt", ".")}
    assert ours == {}, ours
    # An older Cairn's entries there, readable by others: tightened when next opened, the user's still not.
    os.chmod(cairn_home / "stores", 0o755)
    for db in (cairn_home / "stores").glob("*.db"):
        os.chmod(db, 0o644)
    with Cairn.open(cwd=project, embedder=hashing, read_only=True) as memory:
        assert memory.counts()["current"] == 1
    written = modes(cairn_home)
    assert written["stores"] == oct(0o700) and written["tools/deploy.sh"] == oct(0o755)
    assert {p: m for p, m in loose(cairn_home).items() if p.startswith("stores")} == {}


def test_a_symlinked_data_root_works(tmp_path, project, hashing, monkeypatch, umask_022):
    real = tmp_path / "elsewhere" / "cairn-data"
    real.mkdir(parents=True)
    link = tmp_path / "cairn-link"
    link.symlink_to(real)
    monkeypatch.setenv("CAIRN_HOME", str(link))
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        made = memory.remember("The CI runners are on Hetzner", kind="fact")
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert memory.get(made.memory.id).text == "The CI runners are on Hetzner"
    assert link.is_symlink() and list((real / "stores").glob("*.db"))
    assert loose(real) == {}


def test_a_data_root_owned_by_another_user_is_refused(project, hashing, cairn_home, monkeypatch, capsys):
    cairn_home.mkdir(mode=0o700)
    monkeypatch.setattr(cairn.home, "_uid", lambda: os.geteuid() + 1)  # as if another user owned it
    with pytest.raises(UnsafeDataRoot, match="belongs to another user"):
        Cairn.open(cwd=project, embedder=hashing)
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    with pytest.raises(SystemExit) as exit_:
        main(["remember", "Anything", "--keyword-only"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("cairn: error: the data root") and "set CAIRN_HOME" in err and err.count("\n") == 1
    assert not (cairn_home / "stores").exists()
