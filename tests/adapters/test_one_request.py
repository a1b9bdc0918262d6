"""One hook request, as the warm process handles it: each fact of the session's project is worked
out once (the git root, the store's resolution, the config, Claude Code's settings files, the
store's counts), however many paths of the event read it."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

import cairn.adapters.claude.auto_memory as claude_memory
import cairn.compose
from cairn import Cairn, load_config
from cairn.adapters.claude.hooks import handle
from cairn.adapters.warm.runtime import WarmRuntime


@pytest.fixture
def reads(monkeypatch):
    """Counts, per request: git processes, config loads, settings files read, store resolutions,
    store counts."""
    seen: Counter = Counter()
    run = subprocess.run

    def counting_run(args, *a, **k):
        if args and Path(str(args[0])).name == "git":
            seen["git"] += 1
        return run(args, *a, **k)

    load_config = cairn.compose.load_config

    def counting_load(*a, **k):
        seen["config"] += 1
        return load_config(*a, **k)

    settings = claude_memory._settings

    def counting_settings(path):
        seen[f"settings {path}"] += 1
        return settings(path)

    counts = Cairn.counts

    def counting_counts(self):
        seen["counts"] += 1
        return counts(self)

    monkeypatch.setattr(subprocess, "run", counting_run)
    monkeypatch.setattr(cairn.compose, "load_config", counting_load)
    monkeypatch.setattr(claude_memory, "_settings", counting_settings)
    monkeypatch.setattr(Cairn, "counts", counting_counts)
    return seen


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "PreToolUse"])
def test_each_fact_is_worked_out_once_per_request(project, tmp_path, reads, event, minilm, monkeypatch):
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (project / "src" / "payments").mkdir(parents=True)
    env = {"CLAUDE_PROJECT_DIR": str(project), "HOME": str(home)}
    with Cairn.open(cwd=project, embedder=minilm) as memory:
        memory.remember("Charges are idempotent: retry with the same key", kind="convention",
                        paths=["src/payments/**"])
        memory.remember("We deploy with Kamal from the main branch", kind="decision")
    runtime = WarmRuntime(load_config(), minilm)  # the warm process's: stores kept open, resolutions cached
    resolutions = Counter()
    resolve = runtime.resolve

    def counting_resolve(*a, **k):
        resolutions["resolve"] += 1
        return resolve(*a, **k)

    monkeypatch.setattr(runtime, "resolve", counting_resolve)

    payload = {"session_id": "s1", "cwd": str(project), "source": "startup",
               "prompt": "how do we deploy the payments service?", "tool_name": "Read",
               "tool_input": {"file_path": str(project / "src" / "payments" / "charge.py")}}
    try:
        handle(event, {**payload, "session_id": "s0"}, env, runtime)  # warms the cache
        reads.clear()
        resolutions.clear()
        handle(event, payload, env, runtime)
    finally:
        runtime.close()
    assert resolutions["resolve"] == 1
    assert reads["git"] <= 1, reads  # the warm cache answers the store's; Claude Code's folder may ask once
    assert reads["config"] == 0, reads  # unchanged since the last request: the cache's copy
    assert reads["counts"] <= 1, reads
    settings = {k: v for k, v in reads.items() if k.startswith("settings")}
    assert all(v == 1 for v in settings.values()), settings
