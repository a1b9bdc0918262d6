"""The team store on Postgres: selection, the URL kept out of files and output, moving a store
between backends, concurrent writers from several processes, and two machines sharing a store.
Every test here needs the server (pgserver) and is marked `postgres`."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from cairn import Cairn, NotCurrent, create_store, list_stores, migrate_store
from cairn.embedder import HashingEmbedder
from cairn.pgstore import PgStore
from tests.conftest import WAIT_S, run_cli, wait_for

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "hunter2-Xq9-pw"  # the server trusts local connections; a password in the URL must still never leak


def with_password(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"postgres:{PASSWORD}@"))


@pytest.fixture
def cli(monkeypatch, capsys):
    monkeypatch.setenv("CAIRN_NO_WARM", "1")

    def run(*args: str) -> tuple[int, str, str]:
        return run_cli(capsys, args)

    return run


@pytest.fixture
def team() -> str:
    """A store name of this test's own: every test shares the session's server."""
    return f"team-{uuid.uuid4().hex[:10]}"


def files_under(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_stores_create_postgres_keeps_the_url_out_of_files_status_exports_and_logs(cli, pg_server, cairn_home,
                                                                                   monkeypatch, team):
    url = with_password(pg_server)
    code, out, err = cli("stores", "create", team, "--postgres", url)
    assert code == 0, err
    assert f"created store {team} (postgres:cairn_{team})" in out
    marker = json.loads((cairn_home / "stores" / f"{team}.postgres").read_text())
    assert marker["backend"] == "postgres" and marker["schema"] == f"cairn_{team}"

    monkeypatch.delenv("CAIRN_POSTGRES_URL", raising=False)  # without a URL: one clear line, exit 2
    code, out, err = cli("status", "--store", team, "--json")
    assert code == 2 and "CAIRN_POSTGRES_URL" in err and PASSWORD not in err

    monkeypatch.setenv("CAIRN_POSTGRES_URL", url)
    code, out, err = cli("remember", "--store", team, "--kind", "decision", "--keyword-only",
                         "Team deploys go through the release train on Thursdays")
    assert code == 0, err
    outputs = [out, err]
    for args in (("status", "--store", team, "--json"), ("status", "--store", team), ("stores", "--json"),
                 ("export", "--store", team), ("recall", "--store", team, "--keyword-only", "release train")):
        code, out, err = cli(*args)
        assert code == 0, (args, err)
        outputs += [out, err]
    status = json.loads(cli("status", "--store", team, "--json")[1])
    assert status["path"] == f"postgres:cairn_{team}" and status["counts"]["current"] == 1
    assert [r["backend"] for r in json.loads(cli("stores", "--json")[1])["stores"] if r["name"] == team] == \
        ["postgres"]
    host = urlsplit(pg_server).query  # the server's socket folder: part of the URL
    for text in outputs:
        assert PASSWORD not in text and url not in text and host not in text
    assert files_under(cairn_home, PASSWORD.encode()) == []
    assert files_under(cairn_home, host.encode()) == []

    code, out, err = cli("stores", "delete", team, "--yes")
    assert code == 0, err
    assert not (cairn_home / "stores" / f"{team}.postgres").exists()
    assert not PgStore.exists(pg_server, team)


def test_a_project_store_follows_store_backend_in_the_config(project, pg_server, monkeypatch, cairn_home):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    (project / ".cairn.yaml").write_text("store:\n  backend: postgres\n")
    with Cairn.open(cwd=project, embedder=None) as memory:
        memory.remember("The project store lives on the team server", kind="fact")
        assert memory.status().path.startswith("postgres:cairn_")
        assert memory.status().vector_backend == "pgvector"
    assert not list((cairn_home / "stores").glob("*.db")) if (cairn_home / "stores").exists() else True


def strip_store(dump: str) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "store"} for line in dump.splitlines()]


def test_migrate_store_round_trips_sqlite_postgres_sqlite_with_history_vectors_and_verdicts(pg_server, monkeypatch,
                                                                                           hashing, team):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store("src")
    with Cairn.open("src", embedder=hashing) as memory:
        old = memory.remember("The API listens on port 8080", kind="fact", tags=["api"]).memory
        memory.replace(old.id, "The API listens on port 9090", valid_from="2026-03-01")
        gone = memory.remember("A secret to forget", kind="fact").memory
        memory.forget(gone.id)
        a = memory.remember("Reviews need two approvals", kind="convention", importance=5).memory
        b = memory.remember("Reviews need one approval for docs", kind="convention", valid_to="2030-01-01").memory
        memory.dismiss_pair(a.id, b.id)
        first = io.StringIO()
        memory.export(first)
        vectors = memory.store.vectors_of([memory.store.seq_of(i) for i in (a.id, b.id)])

    done = migrate_store("src", f"postgres:{team}")
    assert (done["memories"], done["vectors"], done["dismissals"]) == (5, 4, 1)
    assert json.loads((Path(os.environ["CAIRN_HOME"]) / "stores" / f"{team}.postgres").read_text())["schema"] == \
        f"cairn_{team}"
    with Cairn.open(team, embedder=hashing) as memory:
        assert memory.status().path == f"postgres:cairn_{team}"
        middle = io.StringIO()
        memory.export(middle)
        assert memory.is_dismissed(a.id, b.id)
        assert [m.id for m in memory.history(old.id)][0] == old.id
    assert strip_store(middle.getvalue()) == strip_store(first.getvalue())

    migrate_store(f"postgres:{team}", "sqlite:back")
    with Cairn.open("back", embedder=hashing) as memory:
        assert memory.status().path.endswith("back.db")
        last = io.StringIO()
        memory.export(last)
        assert memory.is_dismissed(a.id, b.id)
        back = memory.store.vectors_of([memory.store.seq_of(i) for i in (a.id, b.id)])
    assert strip_store(last.getvalue()) == strip_store(first.getvalue())
    assert sorted(v.tobytes() for v in back.values()) == sorted(v.tobytes() for v in vectors.values())


WRITER = """
import os, sys
from cairn import Cairn
from cairn.embedder import HashingEmbedder
from cairn.pgstore import PgStore
worker, count = int(sys.argv[1]), int(sys.argv[2])
with Cairn.open(sys.argv[3], embedder=HashingEmbedder()) as memory:
    for i in range(count):
        memory.remember(f"writer {worker} note {i}: shard {worker * 1000 + i} is healthy", kind="fact", detect=True)
print("done", worker)
"""


def run_writers(n: int, count: int, store: str, env: dict[str, str]) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(w), str(count), store], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(n)]
    for p in procs:
        out, err = p.communicate(timeout=WAIT_S * 5)
        assert p.returncode == 0, err[-2000:]


def test_concurrent_writer_processes_lose_no_write(pg_server, monkeypatch, team):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store(team, postgres=pg_server)
    run_writers(4, 15, team, dict(os.environ))
    with Cairn.open(team, embedder=None) as memory:
        texts = {m.text for m in memory.list(limit=1000)}
    assert texts == {f"writer {w} note {i}: shard {w * 1000 + i} is healthy" for w in range(4) for i in range(15)}


RACER = """
import sys
from cairn import Cairn, NotCurrent
with Cairn.open(sys.argv[3], embedder=None) as memory:
    try:
        memory.replace(sys.argv[1], "The staging DB is Postgres " + sys.argv[2])
        print("replaced")
    except NotCurrent:
        print("refused")
"""


def test_two_writers_superseding_the_same_memory_cannot_both_win(pg_server, monkeypatch, team):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store(team, postgres=pg_server)
    for round_ in range(3):
        with Cairn.open(team, embedder=None) as memory:
            old = memory.remember(f"The staging DB is Postgres 1{round_}", kind="fact", detect=False).memory
        procs = [subprocess.Popen([sys.executable, "-c", RACER, old.id, f"2{round_}{w}", team], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=WAIT_S * 2)
            assert p.returncode == 0, err[-2000:]
            results.append(out.strip())
        assert sorted(results) == ["refused", "refused", "refused", "replaced"]
        with Cairn.open(team, embedder=None) as memory:
            chain = memory.history(old.id)
            assert len(chain) == 2 and chain[0].superseded_by == chain[1].id
            with pytest.raises(NotCurrent):
                memory.replace(old.id, "too late")


def test_two_machines_see_each_others_memories_within_a_second(pg_server, monkeypatch, tmp_path, team):
    """Two data roots (two machines) with the same named store on one server."""
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    engines = {}
    for machine in ("laptop", "desktop"):
        monkeypatch.setenv("CAIRN_HOME", str(tmp_path / machine))
        create_store(team, postgres=pg_server)
        engines[machine] = Cairn.open(team, embedder=HashingEmbedder())
    try:
        for writer, reader in (("laptop", "desktop"), ("desktop", "laptop")):
            text = f"The {writer} decided the API moves to gRPC"
            written = engines[writer].remember(text, kind="decision").memory
            start = time.monotonic()
            def seen(reader=reader, writer=writer, written=written):
                return [h for h in engines[reader].recall(f"{writer} gRPC", k=3) if h.memory.id == written.id]

            hits = wait_for(seen, timeout=1.0, what=f"{reader} sees {writer}")
            assert time.monotonic() - start < 1.0 and hits[0].memory.text == text
        # A separate process of the second machine (as a hook or the MCP server is) sees both.
        env = {**os.environ, "CAIRN_HOME": str(tmp_path / "desktop"), "CAIRN_NO_WARM": "1"}
        out = subprocess.run([sys.executable, "-m", "cairn", "recall", "--store", team, "--keyword-only", "--json",
                              "gRPC"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=WAIT_S)
        assert out.returncode == 0, out.stderr
        found = {h["memory"]["text"] for h in json.loads(out.stdout)}
        assert found == {"The laptop decided the API moves to gRPC", "The desktop decided the API moves to gRPC"}
    finally:
        for engine in engines.values():
            engine.close()
    assert {r["name"] for r in list_stores()} == {team}


def test_captured_sessions_say_they_are_not_supported_on_postgres_yet(project, pg_server, monkeypatch):
    from cairn import StoreError

    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    (project / ".cairn.yaml").write_text("store:\n  backend: postgres\n")
    with Cairn.open(cwd=project, embedder=None) as memory:
        assert memory.status().sessions["turns"] == 0
        for call in (lambda: memory.search_sessions("deploy", mode="keyword"), lambda: memory.list_sessions(),
                     lambda: memory.ingest_transcript(project / ".cairn.yaml")):
            with pytest.raises(StoreError, match="not supported on the postgres backend yet"):
                call()
