"""Fixtures for end-to-end tests that run the real Claude Code CLI against a fake Messages API.

- ``claude_bin`` (session): path to the pinned ``claude`` binary, installed with npm on first use.
- ``fake_api`` (test): a started :class:`fake_api.FakeAnthropicAPI`; stopped afterwards, and the
  test errors if its script raised.
- ``claude_env`` (test): a :class:`harness.ClaudeHarness` with an isolated HOME, a ``git init``
  project folder, a private TMPDIR and ``fake_api``.

Mark tests with ``@pytest.mark.e2e``; run them alone with ``pytest -m e2e tests/e2e``.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # helper modules, whatever pytest's import mode

from fake_api import FakeAnthropicAPI  # noqa: E402
from harness import ClaudeHarness, HarnessError, claude_code_dir, ensure_claude_code, npm_executable  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """Return the ``claude`` binary of the pinned Claude Code (installing it if needed).

    Skips only when npm is absent; an npm or version failure fails the tests.
    """
    install_dir = claude_code_dir(REPO_ROOT)
    npm = npm_executable()
    if npm is None and not (install_dir / "node_modules" / ".bin" / "claude").exists():
        pytest.skip("e2e: npm not found on PATH, cannot install @anthropic-ai/claude-code")
    try:
        return ensure_claude_code(install_dir, npm or "npm")
    except HarnessError as exc:
        pytest.fail(f"e2e: installing Claude Code failed: {exc}", pytrace=False)


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropicAPI]:
    """Yield a started fake Messages API on 127.0.0.1 (default script: one text reply)."""
    with FakeAnthropicAPI() as api:
        yield api
    if api.errors:
        pytest.fail("fake API script raised:\n" + "\n".join(api.errors), pytrace=False)


@pytest.fixture
def claude_env(claude_bin: Path, fake_api: FakeAnthropicAPI, tmp_path: Path) -> Iterator[ClaudeHarness]:
    """Yield a :class:`ClaudeHarness`: isolated ``home``, git ``project``, ``tmp``, and ``api``.

    At teardown every process the harness started that is still alive (a hook, an MCP server, a
    detached worker) is killed, with a warning naming how many there were.
    """
    home, project, tmp = tmp_path / "home", tmp_path / "project", tmp_path / "tmp"
    for d in (home, project, tmp):
        d.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    harness = ClaudeHarness(claude_bin=claude_bin, home=home, project=project, tmp=tmp, api=fake_api)
    yield harness
    if killed := harness.kill_leftovers():
        warnings.warn(f"e2e: killed {len(killed)} leftover process(es) at teardown: {killed}", stacklevel=1)
