"""Which store a directory maps to: git toplevel, worktrees, submodules, CAIRN_STORE, slugs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cairn import Cairn, InvalidStoreName, StoreNotFound
from cairn.stores.paths import choose_store, project_store_name

from tests.conftest import git_init


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "protocol.file.allow=always",
                    *args], cwd=cwd, check=True, capture_output=True)


def test_subfolders_of_a_repository_share_its_store(project):
    (project / "src" / "deep").mkdir(parents=True)
    assert choose_store(cwd=project / "src" / "deep").name == choose_store(cwd=project).name
    assert choose_store(cwd=project).reason == f"git toplevel {project.resolve()}"


def test_a_folder_inside_the_git_folder_is_the_repositorys(project):
    # A git hook or an editor on COMMIT_EDITMSG runs in .git/ or below it: still this project.
    assert choose_store(cwd=project / ".git").name == choose_store(cwd=project).name
    assert choose_store(cwd=project / ".git" / "hooks").name == choose_store(cwd=project).name


def test_two_repositories_with_the_same_name_get_different_stores(tmp_path):
    a = git_init(tmp_path / "work" / "api")
    b = git_init(tmp_path / "personal" / "api")
    name_a, name_b = choose_store(cwd=a).name, choose_store(cwd=b).name
    assert name_a != name_b
    assert name_a.startswith("api-") and name_b.startswith("api-")


def test_symlinked_path_maps_to_the_real_repository(project, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(project)
    assert choose_store(cwd=link).name == choose_store(cwd=project).name


def test_linked_worktree_maps_to_its_main_repository(project, tmp_path):
    (project / "f").write_text("x")
    git(project, "add", "f")
    git(project, "commit", "-qm", "init")
    git(project, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature")
    choice = choose_store(cwd=tmp_path / "wt")
    assert choice.name == choose_store(cwd=project).name
    assert "worktree" in choice.reason


def test_submodule_is_its_own_project(project, tmp_path):
    lib = git_init(tmp_path / "lib")
    (lib / "f").write_text("x")
    git(lib, "add", "f")
    git(lib, "commit", "-qm", "init")
    (project / "f").write_text("x")
    git(project, "add", "f")
    git(project, "commit", "-qm", "init")
    git(project, "submodule", "add", "-q", str(lib), "vendor/lib")
    sub = choose_store(cwd=project / "vendor" / "lib")
    assert sub.name != choose_store(cwd=project).name
    assert sub.project_root == (project / "vendor" / "lib").resolve()


def test_plain_directory_uses_its_own_path(tmp_path):
    plain = tmp_path / "notes"
    plain.mkdir()
    choice = choose_store(cwd=plain)
    assert choice.reason == f"directory {plain.resolve()}"
    assert choice.name == project_store_name(plain)


def test_cairn_store_points_two_folders_at_one_store(tmp_path, monkeypatch):
    a = git_init(tmp_path / "a")
    b = git_init(tmp_path / "b")
    env = {**os.environ, "CAIRN_STORE": "shared-client"}
    assert choose_store(cwd=a, env=env).name == choose_store(cwd=b, env=env).name == "shared-client"
    with pytest.raises(StoreNotFound, match="cairn stores create shared-client"):
        Cairn.open(cwd=a, env=env, embedder=None)
    with Cairn.open(cwd=a, env=env, embedder=None, create=True) as memory:
        memory.remember("Client prefers weekly reports", kind="preference")
    with Cairn.open(cwd=b, env=env, embedder=None) as memory:
        assert memory.recall("weekly reports")[0].memory.text == "Client prefers weekly reports"


def test_explicit_store_beats_environment(project):
    assert choose_store("mine", cwd=project, env={"CAIRN_STORE": "theirs"}).name == "mine"


@pytest.mark.parametrize("name", ["../x", "a/b", "a\\b", "..", ".hidden", "", "x" * 200, "a..b"])
def test_store_names_cannot_escape_the_data_root(name):
    with pytest.raises(InvalidStoreName):
        choose_store(name)
