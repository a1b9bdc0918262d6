"""`cairn doctor`'s checks of the Claude Code side: whether Claude Code runs Cairn's hooks for a
project, and whether a hooks configuration names an event Cairn does not answer."""

from __future__ import annotations

import json
from pathlib import Path

from cairn import Check

from .hook_process import UNKNOWN_EVENT
from .hooks import HOOK_EVENTS, SESSION_START, USER_PROMPT_SUBMIT
from .transcripts import claude_dir


def settings_project(cwd: Path) -> Path:
    """The folder whose .claude/ Claude Code reads for a session started in `cwd`: the nearest
    ancestor holding .claude or .git (the repository's top level), else `cwd`."""
    cwd = cwd.resolve()
    return next((p for p in (cwd, *cwd.parents) if (p / ".claude").is_dir() or (p / ".git").exists()), cwd)


def hook_events_check(log: Path) -> Check:
    """`cairn doctor`'s "hook events": whether hooks.log (`log`; its last 256 KB) records a hook run
    for an event Cairn does not answer (a typo in a hooks configuration turns memory off silently
    otherwise). "warn", with the names."""
    try:
        with open(log, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - 262_144))
            tail = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return Check("hook events", "ok", "no hook has logged an unknown event")
    except OSError as exc:
        return Check("hook events", "warn", f"cannot read {log}: {exc.strerror or exc}")
    names = sorted({line.split(UNKNOWN_EVENT, 1)[1].split(":", 1)[0].strip() for line in tail.splitlines()
                    if UNKNOWN_EVENT in line})
    if not names:
        return Check("hook events", "ok", "no hook has logged an unknown event")
    return Check("hook events", "warn", f"hooks ran for {', '.join(names)}, which Cairn does not answer "
                 f"(see {log})", "fix the event names in your hooks configuration (hooks/hooks.json lists "
                 "Cairn's); Claude Code's names are case-sensitive")


def hooks_check(project: Path | None, env: dict[str, str] | None = None) -> Check:
    """`cairn doctor`'s "hooks registered": whether Claude Code runs Cairn's hooks for `project`.

    Claude Code records an installed plugin as `enabledPlugins: {"cairn@<marketplace>": true}` in the
    user's settings.json, the project's .claude/settings.json or .claude/settings.local.json (a later
    file overrides an earlier one), and copies it to plugins/cache/<marketplace>/cairn/<version>/,
    whose hooks/hooks.json must register HOOK_EVENTS. Hooks written into a settings file by hand
    (a command running cairn-hook or `cairn hook`) count too. "warn", never "fail": the CLI and the
    MCP server work without the hooks; only the automatic brief, recall and capture are missing."""
    home = claude_dir(env)
    files = [home / "settings.json"]
    if project is not None:
        files += [project / ".claude" / "settings.json", project / ".claude" / "settings.local.json"]
    enabled, manual, unreadable = _settings_hooks(files)
    problems = "; ".join(f"cannot read {u}" for u in unreadable)
    on = sorted(key for key, (value, _) in enabled.items() if value)
    install = "in Claude Code: `/plugin marketplace add <this repository>` then `/plugin install cairn@cairn`"
    if not on and not manual:
        off = [f"{key} is disabled in {path}" for key, (value, path) in enabled.items() if not value]
        detail = "; ".join(off) or "Claude Code has no Cairn plugin enabled for this project"
        return Check("hooks registered", "warn", detail + (f"; {problems}" if problems else ""),
                     "enable it with `/plugin` in Claude Code" if off else install)
    if manual and not on:
        missing = [e for e in (SESSION_START, USER_PROMPT_SUBMIT) if e not in manual]
        return Check("hooks registered", "warn" if missing else "ok",
                     f"hooks set in a settings file: {', '.join(sorted(manual))}",
                     f"add {', '.join(missing)} (see hooks/hooks.json)" if missing else None)
    found = _cached_hooks(home, on)
    if not found:
        return Check("hooks registered", "ok", f"{', '.join(on)} enabled (its files are not in Claude Code's "
                     "plugin cache: loaded with --plugin-dir?)")
    version, missing = found[-1]
    if missing:
        return Check("hooks registered", "warn", f"{', '.join(on)} {version} does not register {', '.join(missing)}",
                     "update the plugin: `/plugin update cairn`")
    return Check("hooks registered", "ok", f"{', '.join(on)} {version}: {', '.join(HOOK_EVENTS)}"
                 + (f"; {problems}" if problems else ""))


def _settings_hooks(files: list[Path]) -> tuple[dict[str, tuple[bool, Path]], set[str], list[str]]:
    """What Claude Code's settings `files` (a later one overrides an earlier one) say of Cairn:
    ({plugin key "cairn@<marketplace>": (enabled, the file saying so)}, the events a file sets a hook
    running cairn-hook or `cairn hook` for by hand, the files that cannot be read, with why)."""
    enabled: dict[str, tuple[bool, Path]] = {}
    manual: set[str] = set()
    unreadable = []
    for path in files:
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            unreadable.append(f"{path} ({exc.__class__.__name__})")
            continue
        if not isinstance(settings, dict):
            continue
        plugins = settings.get("enabledPlugins")
        for key, value in (plugins.items() if isinstance(plugins, dict) else ()):
            if isinstance(key, str) and key.split("@")[0] == "cairn":
                enabled[key] = (value is True, path)
        hooks = settings.get("hooks")
        for event, entries in (hooks.items() if isinstance(hooks, dict) else ()):
            if "cairn-hook" in json.dumps(entries) or "cairn hook" in json.dumps(entries):
                manual.add(event)
    return enabled, manual, unreadable


def _cached_hooks(home: Path, on: list[str]) -> list[tuple[str, list[str]]]:
    """For each copy of the enabled plugins `on` in Claude Code's plugin cache under `home`, in
    version order: (its version, the HOOK_EVENTS its hooks/hooks.json does not register)."""
    found = []
    for key in on:
        marketplace = key.partition("@")[2]
        for hooks_json in sorted((home / "plugins" / "cache" / marketplace / "cairn").glob("*/hooks/hooks.json")):
            try:
                events = json.loads(hooks_json.read_text(encoding="utf-8")).get("hooks", {})
            except (OSError, ValueError, AttributeError):
                continue
            found.append((hooks_json.parent.parent.name, [e for e in HOOK_EVENTS if e not in events]))
    return found

