"""ResolveCache: the warm process resolves a project's store and config once, and again as soon as
anything it was derived from changes (config files, $CAIRN_CONFIG, $CAIRN_STORE, git)."""

from __future__ import annotations

import os
import subprocess

import pytest

import cairn.stores.paths
from cairn import ConfigError, ResolveCache, resolve

from tests.conftest import git_init


@pytest.fixture
def git_calls(monkeypatch):
    """How many times the store choice asked git."""
    calls = []
    original = cairn.stores.paths.project_root

    def counting(cwd):
        calls.append(cwd)
        return original(cwd)

    monkeypatch.setattr(cairn.stores.paths, "project_root", counting)
    return calls


def env_of(**extra) -> dict[str, str]:
    return {k: os.environ[k] for k in ("CAIRN_CONFIG",)} | extra


def test_the_answer_is_resolves_and_git_is_asked_once(project, git_calls):
    cache = ResolveCache()
    first = cache.resolve(None, cwd=project, env=env_of())
    assert first == resolve(None, cwd=project, env=env_of())
    calls = len(git_calls)
    for _ in range(5):
        assert cache.resolve(None, cwd=project, env=env_of()) == first
    assert len(git_calls) == calls


def test_an_edited_project_config_counts_at_the_next_call(project):
    cache = ResolveCache()
    assert cache.resolve(None, cwd=project, env=env_of()).config["hooks"]["prompt_k"] == 5  # the default
    config = project / ".cairn.yaml"
    config.write_text("hooks:\n  prompt_k: 3\n")
    assert cache.resolve(None, cwd=project, env=env_of()).config["hooks"]["prompt_k"] == 3
    config.write_text("hooks:\n  prompt_k: 4\n")  # same size, same second: content decides
    assert cache.resolve(None, cwd=project, env=env_of()).config["hooks"]["prompt_k"] == 4
    config.write_text("hooks:\n  enabled: false\n")
    assert cache.resolve(None, cwd=project, env=env_of()).config["hooks"]["enabled"] is False
    config.unlink()
    assert cache.resolve(None, cwd=project, env=env_of()).config["hooks"] == resolve(
        None, cwd=project, env=env_of()).config["hooks"]


def test_the_user_config_and_cairn_config_count_at_the_next_call(project, tmp_path):
    cache = ResolveCache()
    user = tmp_path / "user.yaml"
    user.write_text("recall:\n  k: 7\n")
    assert cache.resolve(None, cwd=project, env={"CAIRN_CONFIG": str(user)}).config["recall"]["k"] == 7
    user.write_text("recall:\n  k: 8\n")
    assert cache.resolve(None, cwd=project, env={"CAIRN_CONFIG": str(user)}).config["recall"]["k"] == 8
    other = tmp_path / "other.yaml"
    other.write_text("recall:\n  k: 9\n")
    assert cache.resolve(None, cwd=project, env={"CAIRN_CONFIG": str(other)}).config["recall"]["k"] == 9
    user.unlink()
    with pytest.raises(ConfigError, match="does not exist"):
        cache.resolve(None, cwd=project, env={"CAIRN_CONFIG": str(user)})
    user.write_text("recall:\n  k: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        cache.resolve(None, cwd=project, env={"CAIRN_CONFIG": str(user)})


def test_cairn_store_and_an_explicit_store_count(project):
    cache = ResolveCache()
    assert cache.resolve(None, cwd=project, env=env_of()).choice.project_root == project.resolve()
    assert cache.resolve(None, cwd=project, env=env_of(CAIRN_STORE="work")).choice.name == "work"
    assert cache.resolve(None, cwd=project, env=env_of(CAIRN_STORE="play")).choice.name == "play"
    assert cache.resolve("named", cwd=project, env=env_of(CAIRN_STORE="play")).choice.name == "named"
    assert not cache.resolve(None, cwd=project, env=env_of()).choice.explicit


def test_git_init_and_a_nested_repository_count_at_the_next_call(tmp_path):
    cache = ResolveCache()
    folder = tmp_path / "plain" / "sub"
    folder.mkdir(parents=True)
    assert cache.resolve(None, cwd=folder, env=env_of()).choice.project_root == folder.resolve()
    git_init(tmp_path / "plain")
    assert cache.resolve(None, cwd=folder, env=env_of()).choice.project_root == (tmp_path / "plain").resolve()
    git_init(folder)
    assert cache.resolve(None, cwd=folder, env=env_of()).choice.project_root == folder.resolve()
    subprocess.run(["rm", "-rf", str(folder / ".git")], check=True)
    assert cache.resolve(None, cwd=folder, env=env_of()).choice.project_root == (tmp_path / "plain").resolve()


def test_a_linked_worktree_maps_to_its_main_repository(project):
    subprocess.run(["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    linked = project.parent / "linked"
    subprocess.run(["git", "-C", str(project), "worktree", "add", "-q", str(linked)], check=True)
    cache = ResolveCache()
    assert cache.resolve(None, cwd=linked, env=env_of()).choice.project_root == project.resolve()
    assert cache.resolve(None, cwd=linked, env=env_of()) == resolve(None, cwd=linked, env=env_of())


def test_each_caller_gets_its_own_config(project):
    cache = ResolveCache()
    cache.resolve(None, cwd=project, env=env_of()).config["hooks"]["prompt_k"] = 99
    assert cache.resolve(None, cwd=project, env=env_of()).config["hooks"]["prompt_k"] == 5


def test_it_keeps_a_bounded_number_of_answers(tmp_path):
    cache = ResolveCache(max_entries=3)
    folders = [tmp_path / f"f{i}" for i in range(5)]
    for folder in folders:
        folder.mkdir()
        assert cache.resolve(None, cwd=folder, env=env_of()).choice.project_root == folder.resolve()
    assert len(cache._entries) == 3
