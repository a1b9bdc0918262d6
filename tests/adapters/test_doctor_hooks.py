"""`cairn doctor`'s "hooks registered": read from Claude Code's settings files and plugin cache, as
Claude Code records an installed plugin (enabledPlugins; plugins/cache/<marketplace>/cairn/<version>/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cairn.adapters.claude.doctor import hooks_check, settings_project
from cairn.adapters.claude.hooks import HOOK_EVENTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def claude(tmp_path):
    home = tmp_path / "claude-home"
    home.mkdir()
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    return home, project, {"CLAUDE_CONFIG_DIR": str(home)}


def write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def install(home: Path, version: str = "0.9.0", hooks: Path = ROOT / "hooks" / "hooks.json") -> None:
    write(home / "settings.json", {"enabledPlugins": {"cairn@cairn": True, "other@x": True}})
    target = home / "plugins" / "cache" / "cairn" / "cairn" / version / "hooks" / "hooks.json"
    target.parent.mkdir(parents=True)
    shutil.copy(hooks, target)


def test_nothing_installed_is_a_warning_that_says_how_to_install(claude):
    home, project, env = claude
    check = hooks_check(project, env)
    assert (check.name, check.status) == ("hooks registered", "warn")
    assert "no Cairn plugin enabled" in check.detail and "/plugin install cairn@cairn" in check.fix


def test_an_installed_plugin_with_every_hook_event_is_ok(claude):
    home, project, env = claude
    install(home)
    check = hooks_check(project, env)
    assert check.status == "ok", check
    assert check.detail == f"cairn@cairn 0.9.0: {', '.join(HOOK_EVENTS)}"


def test_a_plugin_copy_missing_an_event_names_it(claude, tmp_path):
    home, project, env = claude
    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    del hooks["hooks"]["Stop"]
    write(tmp_path / "old-hooks.json", hooks)
    install(home, hooks=tmp_path / "old-hooks.json")
    check = hooks_check(project, env)
    assert check.status == "warn" and check.detail.endswith("does not register Stop")
    assert "/plugin update cairn" in check.fix


def test_a_project_setting_that_disables_the_plugin_overrides_the_user_setting(claude):
    home, project, env = claude
    install(home)
    write(project / ".claude" / "settings.local.json", {"enabledPlugins": {"cairn@cairn": False}})
    check = hooks_check(project, env)
    assert check.status == "warn"
    assert check.detail == f"cairn@cairn is disabled in {project / '.claude' / 'settings.local.json'}"


def test_hooks_written_into_settings_by_hand_count(claude):
    home, project, env = claude
    command = {"hooks": [{"type": "command", "command": "/opt/cairn/hooks/cairn-hook SessionStart"}]}
    write(project / ".claude" / "settings.json",
          {"hooks": {"SessionStart": [command], "UserPromptSubmit": [{"hooks": [
              {"type": "command", "command": "cairn hook UserPromptSubmit"}]}]}})
    assert hooks_check(project, env).status == "ok"
    write(project / ".claude" / "settings.json", {"hooks": {"SessionStart": [command]}})
    check = hooks_check(project, env)
    assert check.status == "warn" and check.fix == "add UserPromptSubmit (see hooks/hooks.json)"


def test_an_unreadable_settings_file_is_named_not_raised(claude):
    home, project, env = claude
    write(home / "settings.json", "{not json")
    check = hooks_check(project, env)
    assert check.status == "warn" and f"cannot read {home / 'settings.json'}" in check.detail


def test_the_settings_project_is_the_repository_top_level(claude):
    _, project, _ = claude
    (project / "src" / "pkg").mkdir(parents=True)
    assert settings_project(project / "src" / "pkg") == project.resolve()


def test_an_unknown_hook_event_is_logged_and_doctor_reports_it(cairn_home, tmp_path):
    import os
    import subprocess
    import sys

    from cairn.adapters.claude.doctor import hook_events_check

    log = cairn_home / "logs" / "hooks.log"
    assert hook_events_check(log).status == "ok"
    env = {**os.environ, "CAIRN_NO_WARM": "1"}
    out = subprocess.run([sys.executable, "-m", "cairn", "hook", "Bogus"], input="{}", text=True, env=env,
                         capture_output=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0 and out.stdout == ""
    assert "unknown hook event 'Bogus'" in log.read_text()
    check = hook_events_check(log)
    assert check.status == "warn" and "'Bogus'" in check.detail and check.fix
