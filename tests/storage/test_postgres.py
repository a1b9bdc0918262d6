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
from urllib.parse import parse_qs, urlsplit, urlunsplit

import pytest
from ulid import ULID

from cairn import Cairn, Draft, NotCurrent, ProposalClosed, create_store, list_stores, migrate_store
from cairn.embedder import HashingEmbedder
from cairn.storage.migrations import MIGRATIONS
from cairn.timeutil import END_OF_TIME
from cairn.storage.postgres import PgStore
from tests.conftest import WAIT_S, run_cli, wait_for

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "hunter2-Xq9-pw"  # the server trusts local connections; a password in the URL must still never leak


def socket_dir(url: str) -> str:
    """The server's socket folder, the part of pgserver's URL that names where it runs."""
    return parse_qs(urlsplit(url).query)["host"][0]


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
                 ("export", "--store", team), ("recall", "--store", team, "--keyword-only", "release train"),
                 ("backup", "--store", team), ("sessions", "list", "--store", team)):
        code, out, err = cli(*args)
        assert code == 0, (args, err)
        outputs += [out, err]
    status = json.loads(cli("status", "--store", team, "--json")[1])
    assert status["path"] == f"postgres:cairn_{team}" and status["counts"]["current"] == 1
    assert [r["backend"] for r in json.loads(cli("stores", "--json")[1])["stores"] if r["name"] == team] == \
        ["postgres"]
    host = socket_dir(pg_server)  # the server's socket folder: part of the URL
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
        memory.review.dismiss(a.id, b.id)
        first = io.StringIO()
        memory.export(first)
        vectors = memory.store.vectors_of([memory.store.seq_of(i) for i in (a.id, b.id)])

    done = migrate_store("src", f"postgres:{team}")
    assert (done["memories"], done["vectors"], done["dismissals"]) == (5, 4, 1)
    assert json.loads((Path(os.environ["CAIRN_HOME"]) / "stores" / f"{team}.postgres").read_text())["schema"] == \
        f"cairn_{team}"
    with Cairn.open(team, embedder=hashing) as memory:
        assert memory.status().path == f"postgres:cairn_{team}"
        # The copy filled the vectors without their HNSW index, then built it once: it is there and valid.
        assert memory.store.conn.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexname = "
                                         "'memory_vectors_hnsw'", (f"cairn_{team}",)).fetchone()[0] == 1
        assert memory.store.invalid_indexes() == []
        middle = io.StringIO()
        memory.export(middle)
        assert memory.review.is_dismissed(a.id, b.id)
        assert [m.id for m in memory.history(old.id)][0] == old.id
    assert strip_store(middle.getvalue()) == strip_store(first.getvalue())

    migrate_store(f"postgres:{team}", "sqlite:back")
    with Cairn.open("back", embedder=hashing) as memory:
        assert memory.status().path.endswith("back.db")
        last = io.StringIO()
        memory.export(last)
        assert memory.review.is_dismissed(a.id, b.id)
        back = memory.store.vectors_of([memory.store.seq_of(i) for i in (a.id, b.id)])
    assert strip_store(last.getvalue()) == strip_store(first.getvalue())
    assert sorted(v.tobytes() for v in back.values()) == sorted(v.tobytes() for v in vectors.values())


WRITER = """
import os, sys
from cairn import Cairn
from cairn.embedder import HashingEmbedder
from cairn.storage.postgres import PgStore
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


def test_backup_of_a_postgres_store_restores_as_a_local_store_and_never_over_the_shared_one(pg_server, monkeypatch,
                                                                                           hashing, team, tmp_path):
    from cairn import StoreError, backup_store, restore_store

    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store(team, postgres=pg_server)
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text(json.dumps({"type": "user", "uuid": "u1", "sessionId": "s1",
                                      "timestamp": "2026-03-01T10:00:00Z",
                                      "message": {"role": "user", "content": "how do we rotate the TLS certs?"}})
                          + "\n")
    with Cairn.open(team, embedder=hashing) as memory:
        old = memory.remember("TLS certs rotate every 90 days", kind="fact").memory
        memory.replace(old.id, "TLS certs rotate every 30 days")
        memory.forget(memory.remember("A memory to forget", kind="fact").memory.id)
        memory.sessions.ingest(transcript)
        before = io.StringIO()
        memory.export(before)
    done = backup_store(team, keep=1)
    path = Path(done["path"])
    assert path.parent.name == "backups" and path.stat().st_mode & 0o777 == 0o600
    assert done["counts"]["total"] == 3 and done["removed"] == []
    assert not list(path.parent.glob(".*partial*"))

    with pytest.raises(StoreError, match=f"is on Postgres.*cairn restore {path} --store {team}-restored"):
        restore_store(path)  # the backup names the team store: never restored over the shared one
    restored = restore_store(path, name=f"{team}-restored")
    assert restored["counts"] == {**done["counts"], "awaiting_embedding": 0}
    with Cairn.open(f"{team}-restored", embedder=hashing) as local:
        assert local.status().path.endswith(".db")
        after = io.StringIO()
        local.export(after)
        assert [m.text for m in local.history(old.id)] == ["TLS certs rotate every 90 days",
                                                           "TLS certs rotate every 30 days"]
        assert [t.text for t in local.sessions.read("s1")[1]] == ["how do we rotate the TLS certs?"]
        assert local.sessions.search("rotate", mode="keyword")[0].turn.uuid == "u1"
    assert strip_store(after.getvalue()) == strip_store(before.getvalue())


def test_migrate_store_copies_captured_sessions_both_ways(pg_server, monkeypatch, hashing, team, tmp_path):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    lines = [json.dumps({"type": role, "uuid": f"m{i}", "sessionId": "s1", "timestamp": f"2026-03-01T10:00:0{i}Z",
                         "message": {"role": role, "content": text}}) + "\n"
             for i, (role, text) in enumerate([("user", "the zebra crossing is broken"), ("assistant", "noted"),
                                               ("user", "deploy the fix to staging")])]
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text("".join(lines))
    create_store("local")
    with Cairn.open("local", embedder=hashing) as memory:
        memory.sessions.ingest(transcript)
        expected = memory.sessions.search("zebra", mode="keyword", k=10)
    done = migrate_store("local", f"postgres:{team}")
    assert (done["sessions"], done["turns"]) == (1, 3)
    with Cairn.open(team, embedder=hashing) as memory:
        assert memory.status().sessions["turns"] == 3
        hits = memory.sessions.search("zebra", mode="keyword", k=10)
        assert [h.turn.uuid for h in hits] == [h.turn.uuid for h in expected]
        assert memory.sessions.ingest(transcript)["turns_added"] == 0  # how far it was read came along
        assert memory.sessions.embed_backlog() == 3
        assert memory.sessions.search("zebra crossing", mode="semantic", k=1)[0].turn.uuid == "m0"
    migrate_store(f"postgres:{team}", "sqlite:back")
    with Cairn.open("back", embedder=hashing) as memory:
        assert [t.uuid for t in memory.sessions.read("s1")[1]] == ["m0", "m1", "m2"]


def test_rename_renames_only_this_machines_entry_for_the_shared_store(pg_server, monkeypatch, tmp_path, team, cli):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    for machine in ("desktop", "laptop"):
        monkeypatch.setenv("CAIRN_HOME", str(tmp_path / machine))
        create_store(team, postgres=pg_server)
    with Cairn.open(team, embedder=None) as memory:
        memory.remember("The laptop calls this store by its own name", kind="fact")
    monkeypatch.delenv("CAIRN_POSTGRES_URL")  # renaming asks no server
    code, out, err = cli("stores", "rename", team, "mine")
    assert code == 0, err
    assert not (tmp_path / "laptop" / "stores" / f"{team}.postgres").exists()
    assert json.loads((tmp_path / "laptop" / "stores" / "mine.postgres").read_text())["schema"] == f"cairn_{team}"
    code, out, err = cli("stores", "rename", "mine", "mine")
    assert code == 2 and "already exists" in err
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    with Cairn.open("mine", embedder=None) as memory:
        assert memory.status().path == f"postgres:cairn_{team}"
        assert [m.text for m in memory.list()] == ["The laptop calls this store by its own name"]
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "desktop"))  # the other machine still calls it `team`
    with Cairn.open(team, embedder=None) as memory:
        memory.remember("The desktop still calls it team", kind="fact")
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "laptop"))
    with Cairn.open("mine", embedder=None) as memory:
        assert len(memory.list()) == 2


def test_doctor_checks_a_postgres_store_and_fixes_its_indexes(pg_server, monkeypatch, cairn_home, team, cli):
    import psycopg

    monkeypatch.setenv("CAIRN_POSTGRES_URL", with_password(pg_server))
    Path(os.environ["CAIRN_CONFIG"]).write_text("embedding:\n  enabled: false\n")  # no model to load
    create_store(team, postgres=pg_server)
    with Cairn.open(team, embedder=HashingEmbedder()) as memory:
        broken = memory.remember("The doctor finds this memory without its keyword entry", kind="fact").memory

    def checks(*args: str) -> tuple[int, dict[str, dict], str]:
        code, out, err = cli("doctor", "--json", *args)
        assert PASSWORD not in out + err and pg_server not in out + err
        return code, {c["name"]: c for c in json.loads(out)["checks"] if c["name"].startswith(f"store {team}")}, out

    code, found, _ = checks()
    assert [(n.split(": ")[1], c["status"]) for n, c in found.items()] == [
        ("server", "ok"), ("pgvector", "ok"), ("schema", "ok"), ("indexes", "ok")]
    assert found[f"store {team}: schema"]["detail"] == f"version {len(MIGRATIONS)}"

    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'UPDATE "cairn_{team}".memories SET tsv = NULL WHERE id = %s', (broken.id,))
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
                     (f'"cairn_{team}".memories_tsv',))
    code, found, _ = checks()
    indexes = found[f"store {team}: indexes"]
    assert code == 1 and indexes["status"] == "fail" and not indexes["fixed"]
    assert "fts missing: 1" in indexes["detail"] and "invalid index memories_tsv" in indexes["detail"]
    code, found, _ = checks("--fix")
    assert found[f"store {team}: indexes"]["fixed"]
    code, found, _ = checks()
    assert found[f"store {team}: indexes"]["status"] == "ok"
    with Cairn.open(team, embedder=None) as memory:
        assert [h.memory.id for h in memory.recall("doctor keyword entry")] == [broken.id]

    monkeypatch.delenv("CAIRN_POSTGRES_URL")
    code, found, _ = checks()
    assert code == 1 and found[f"store {team}: server"]["status"] == "fail"
    assert "CAIRN_POSTGRES_URL" in found[f"store {team}: server"]["fix"]


def test_a_bad_url_is_a_clear_error_that_names_no_part_of_it(pg_server, monkeypatch, cairn_home, team, cli, project):
    create_store(team, postgres=pg_server)
    # libpq quotes a malformed URL whole in its message, password included.
    bad = f"postgresql://postgres:{PASSWORD}@[::1/cairn-secret-db"
    monkeypatch.setenv("CAIRN_POSTGRES_URL", bad)
    code, out, err = cli("status", "--store", team)
    assert code == 2 and err.startswith("cairn: error: cannot connect to the Postgres server:")
    assert PASSWORD not in err and "cairn-secret-db" not in err and bad not in err
    code, out, err = cli("doctor", "--json")
    assert PASSWORD not in out + err and "cairn-secret-db" not in out + err
    # A database that does not exist: the server's own message names it; the error does not.
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server.replace("/postgres?", "/cairn-secret-db?"))
    code, out, err = cli("recall", "--store", team, "--keyword-only", "anything")
    assert code == 2 and "cannot connect" in err and "cairn-secret-db" not in err
    # A hook fails open, and what it logs names no part of the URL either.
    env = {**os.environ, "CAIRN_NO_WARM": "1", "CAIRN_STORE": team, "CAIRN_POSTGRES_URL": bad,
           "CLAUDE_PROJECT_DIR": str(project), "PYTHONPATH": str(ROOT / "engine")}
    out = subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", "UserPromptSubmit"], env=env, text=True,
                         input=json.dumps({"prompt": "how do we deploy the release?", "session_id": "s"}),
                         capture_output=True, timeout=WAIT_S)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    log = (cairn_home / "logs" / "hooks.log").read_text()
    assert "cannot connect to the Postgres server" in log
    assert files_under(cairn_home, PASSWORD.encode()) == [] and files_under(cairn_home, b"cairn-secret-db") == []


def test_a_long_lived_process_reopens_a_store_whose_connection_was_lost(pg_server, monkeypatch, team):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store(team, postgres=pg_server)
    with Cairn.open(team, embedder=None) as memory:
        assert not memory.stale  # a Postgres store is never "replaced" like a file; its connection may be lost
        memory.store.conn.close()
        assert memory.stale


# The steps a store recorded when Postgres numbered its migrations apart from SQLite (cold_at was
# its m005, the postings its m008), in their order.
OLD_POSTGRES_STEPS = ["m001_initial", "m002_review_dismissals", "m003_memory_usage", "m004_sessions",
                      "m005_cold_tier", "m006_applies_when", "m007_review_queue", "m008_postings"]


@pytest.mark.parametrize("old_version", [4, 8])
def test_a_store_numbered_the_old_postgres_way_opens_renumbered_and_migrated(pg_server, monkeypatch, team,
                                                                             hashing, old_version):
    """A store an older Cairn wrote (its steps recorded under the old numbers, its schema as those
    steps left it) opens with its records renumbered into the one history and the steps it lacks
    applied; what it held is read as before, and what the later steps brought works."""
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store(team, postgres=pg_server)
    with Cairn.open(team, embedder=hashing) as memory:
        kept = memory.remember("We deploy with Kamal to two hosts", kind="decision", detect=False).memory
        conn = memory.store.conn
        if old_version == 4:  # undo what old steps 5 to 8 made, as a store at old version 4 is
            conn.execute("DROP TABLE memory_postings; DROP FUNCTION memory_postings_added, "
                         "memory_postings_changed CASCADE; DROP FUNCTION cairn_postings; "
                         "DROP TABLE proposals; DROP TABLE leases; ALTER TABLE memories DROP COLUMN cold_at; "
                         "ALTER TABLE memories DROP COLUMN applies_when")
        conn.execute("DELETE FROM migrations")
        for number, name in enumerate(OLD_POSTGRES_STEPS[:old_version], start=1):
            conn.execute("INSERT INTO migrations (number, name, applied_at) VALUES (%s, %s, 0)", (number, name))
    with Cairn.open(team, embedder=hashing) as memory:
        rows = memory.store.conn.execute("SELECT number, name FROM migrations ORDER BY number").fetchall()
        assert rows == [(step.number, step.name) for step in MIGRATIONS]
        assert memory.store.schema_version() == len(MIGRATIONS)
        assert [h.memory.id for h in memory.recall("how do we deploy", k=3)] == [kept.id]
        made = memory.remember("Release notes are written in the pull request", kind="convention",
                               applies_when=["writing release notes"], detect=False).memory
        assert memory.set_cold(kept.id, True)
        assert [h.memory.id for h in memory.recall("release notes", k=3, use_vectors=False)] == [made.id]
        assert memory.store.index_report()["postings_stale"] == 0


HOOK_PROMPT = "why did the {who} team decide that the billing API moves to gRPC streaming?"
HOOK_MEMORY = "The {who} team decided that the billing API moves to gRPC streaming"


def test_hooks_and_mcp_servers_on_two_machines_see_each_others_memories_within_a_second(pg_server, tmp_path, team,
                                                                                         project):
    """The bar of issue 14: two machines (two data roots) share a team store; what one machine's MCP
    server remembers, the other's prompt hook injects and its MCP server recalls, each time at its
    first read within one second of the write (wait_for polls from the write's acknowledgement)."""
    from tests.adapters.test_mcp_server import Client

    envs, clients = {}, {}
    for machine in ("laptop", "desktop"):
        home = tmp_path / machine
        home.mkdir()
        (home / "config.yaml").write_text("embedding:\n  enabled: false\n")  # keyword-only: no model to load
        envs[machine] = {**{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
                         "CAIRN_HOME": str(home), "CAIRN_CONFIG": str(home / "config.yaml"),
                         "CAIRN_POSTGRES_URL": pg_server, "CAIRN_STORE": team, "CAIRN_NO_WARM": "1",
                         "CLAUDE_PROJECT_DIR": str(project), "PYTHONPATH": str(ROOT / "engine"),
                         "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        made = subprocess.run([sys.executable, "-m", "cairn", "stores", "create", team, "--postgres", pg_server],
                              env=envs[machine], cwd=ROOT, capture_output=True, text=True, timeout=WAIT_S)
        assert made.returncode == 0, made.stderr
    try:
        for machine, env in envs.items():
            clients[machine] = Client(env, tmp_path / f"{machine}-mcp-stderr.txt")

        def hook_injects(machine: str, text: str, prompt: str) -> bool:
            payload = {"prompt": prompt, "session_id": uuid.uuid4().hex, "cwd": str(project)}
            out = subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", "UserPromptSubmit"],
                                 input=json.dumps(payload), env=envs[machine], capture_output=True, text=True,
                                 timeout=WAIT_S)
            assert out.returncode == 0 and out.stderr == "", out.stderr
            return bool(out.stdout) and text in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]

        def mcp_recalls(machine: str, memory_id: str, prompt: str) -> bool:
            return memory_id in [h["id"] for h in clients[machine].ok("memory_recall", query=prompt)["hits"]]

        for writer, reader in (("laptop", "desktop"), ("desktop", "laptop")):
            text, prompt = HOOK_MEMORY.format(who=writer), HOOK_PROMPT.format(who=writer)
            assert not hook_injects(reader, text, prompt)
            made = clients[writer].ok("memory_remember", text=text, kind="decision")
            assert made["status"] == "created"
            wait_for(lambda r=reader, t=text, p=prompt: hook_injects(r, t, p), 1.0,
                     f"{reader}'s prompt hook to inject it")
            wait_for(lambda r=reader, i=made["id"], p=prompt: mcp_recalls(r, i, p), 1.0,
                     f"{reader}'s MCP server to recall it")
    finally:
        for client in clients.values():
            client.close()
    for machine in envs:  # what the servers logged, and every file of both data roots, name no part of the URL
        assert socket_dir(pg_server) not in (tmp_path / f"{machine}-mcp-stderr.txt").read_text()
        assert files_under(tmp_path / machine, socket_dir(pg_server).encode()) == []


def test_the_warm_process_keeps_a_team_store_open_and_serves_each_new_write_within_a_second(pg_server, monkeypatch,
                                                                                            tmp_path, team, project):
    """Hooks normally go through the warm process, which keeps each store open across prompts: its
    connection must see what other machines commit, at once (and a lost connection is reopened:
    test_a_long_lived_process_reopens_a_store_whose_connection_was_lost)."""
    from cairn.adapters.warm import client as warm

    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    for machine in ("laptop", "desktop"):
        monkeypatch.setenv("CAIRN_HOME", str(tmp_path / machine))
        create_store(team, postgres=pg_server)
    desktop = tmp_path / "desktop"
    monkeypatch.setenv("CAIRN_SERVICE_IDLE_SECONDS", "120")
    assert warm.spawn(sys.executable)
    try:
        assert warm.wait_until_ready(120), (desktop / "logs" / "service.log").read_text()

        def injected(text: str, prompt: str) -> bool:
            reply = warm.request({"op": "hook", "event": "UserPromptSubmit",
                                  "env": {"CLAUDE_PROJECT_DIR": str(project), "CAIRN_STORE": team},
                                  "payload": {"prompt": prompt, "session_id": uuid.uuid4().hex}}, timeout=30)
            assert reply is not None and reply.get("ok"), reply
            return text in ((reply["output"] or {}).get("hookSpecificOutput", {}).get("additionalContext", ""))

        for n in (1, 2):  # the second write reaches a store the warm process already holds open
            text, prompt = HOOK_MEMORY.format(who=f"laptop {n}"), HOOK_PROMPT.format(who=f"laptop {n}")
            assert not injected(text, prompt)
            monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "laptop"))
            with Cairn.open(team, embedder=None) as laptop:
                laptop.remember(text, kind="decision")
            monkeypatch.setenv("CAIRN_HOME", str(desktop))
            wait_for(lambda t=text, p=prompt: injected(t, p), 1.0, "the desktop's warm process to inject it")
        log = (desktop / "logs" / "service.log").read_text()
        assert "Traceback" not in log and socket_dir(pg_server) not in log
    finally:
        warm.request({"op": "shutdown"})
        wait_for(lambda: not warm.is_running(), 30, "the warm process to exit")


def test_the_bulk_import_skips_and_refuses_exactly_as_the_row_by_row_import(pg_server, monkeypatch, team, hashing):
    """import_rows from BULK_MIN records on goes through COPY; its result must be the row-by-row
    import's (SQLite's): the same memories written, the same ones skipped, the same refusal."""
    from cairn import InvalidImport
    from cairn.storage.postgres import BULK_MIN

    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store("src")
    with Cairn.open("src", embedder=hashing) as memory:
        memory.remember_many([Draft(text=f"Service {i} listens on port {8000 + i}", kind="fact",
                                    tags=["ports", f"svc-{i % 7}"]) for i in range(BULK_MIN + 40)], detect=False)
        old = memory.remember("The cache TTL is 60 s", kind="fact", tags=["cache"]).memory
        memory.replace(old.id, "The cache TTL is 300 s")
        memory.forget(memory.remember("A password hint to forget", kind="fact").memory.id)
        dump = io.StringIO()
        memory.export(dump)
    lines = dump.getvalue().splitlines()
    twin = json.loads(lines[3])  # the same text under another id: skipped, as the same id twice is
    twin["id"] = "01J00000000000000000000000"
    data = "\n".join([*lines, lines[5], json.dumps(twin)]).encode() + b"\n"

    results, exports = [], []
    for name in (f"postgres:{team}", "sqlite:check"):
        create_store(name.split(":")[1], postgres=pg_server if name.startswith("postgres") else None)
        with Cairn.open(name.split(":")[1], embedder=hashing) as memory:
            results.append(memory.import_(io.BytesIO(data)))
            assert memory.import_(io.BytesIO(data)) == {"imported": 0, "skipped": len(lines) + 2}
            out = io.StringIO()
            memory.export(out)
            exports.append(strip_store(out.getvalue()))
            assert memory.history(old.id)[-1].text == "The cache TTL is 300 s"
            assert [h.memory.text for h in memory.recall("port 8003", k=1, use_vectors=False)] == \
                ["Service 3 listens on port 8003"]
    assert results[0] == results[1] == {"imported": len(lines), "skipped": 2}
    assert exports[0] == exports[1] == strip_store(dump.getvalue())

    dangling = json.loads(lines[0])
    dangling.update(id="01J00000000000000000000001", text="A memory replaced by one that exists nowhere",
                    superseded_by="01J00000000000000000000002", retired_at=dangling["recorded_at"] + 1)
    bad = "\n".join([json.dumps(dangling), *(json.dumps({**json.loads(line), "id": f"01J1{i:022d}", "text": f"x {i}"})
                                             for i, line in enumerate(lines[1:BULK_MIN + 1]))]).encode() + b"\n"
    errors = []
    for name in (team, "check"):
        with Cairn.open(name, embedder=None) as memory:
            before = memory.counts()
            with pytest.raises(InvalidImport) as caught:
                memory.import_(io.BytesIO(bad))
            errors.append(str(caught.value))
            assert memory.counts() == before  # all or nothing
    assert errors[0] == errors[1] == "superseded_by points to a memory that is neither in the file nor the store"


def test_a_stop_hook_captures_into_the_team_store_and_the_other_machine_searches_it(pg_server, monkeypatch, tmp_path,
                                                                                    team, project):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    for machine in ("laptop", "desktop"):
        monkeypatch.setenv("CAIRN_HOME", str(tmp_path / machine))
        create_store(team, postgres=pg_server)
    transcript = tmp_path / "s1.jsonl"
    said = [("user", "the zebra crossing sensor on the staging board is flaky"),
            ("assistant", "Reset it with key AKIA4HQ7ZN2XKW3RM5TB <private>board serial zx-4471</private> then.")]
    transcript.write_text("".join(json.dumps({
        "type": role, "uuid": f"m{i}", "sessionId": "s1", "timestamp": f"2026-03-01T10:00:0{i}Z",
        "message": {"role": role, "content": text}}) + "\n" for i, (role, text) in enumerate(said)))
    env = {**os.environ, "CAIRN_HOME": str(tmp_path / "laptop"), "CAIRN_STORE": team, "CAIRN_NO_WARM": "1",
           "CLAUDE_PROJECT_DIR": str(project), "PYTHONPATH": str(ROOT / "engine")}
    out = subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", "Stop"], env=env, text=True, timeout=WAIT_S,
                         input=json.dumps({"session_id": "s1", "transcript_path": str(transcript),
                                           "cwd": str(project), "hook_event_name": "Stop"}), capture_output=True)
    assert (out.returncode, out.stdout) == (0, ""), out.stderr
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "desktop"))
    with Cairn.open(team, embedder=None) as desktop:
        hits = wait_for(lambda: desktop.sessions.search("zebra crossing", mode="keyword", window=1), WAIT_S,
                        lambda: (tmp_path / "laptop" / "logs" / "capture.log").read_text())
        assert hits[0].turn.uuid == "m0" and [t.uuid for t in hits[0].after] == ["m1"]
        assert hits[0].after[0].text == "Reset it with key [REDACTED:AWS Access Key]  then."
        assert desktop.sessions.search("zx-4471", mode="exact") == []
        assert desktop.status().sessions["private_spans"] == 1


def test_two_machines_share_the_team_stores_review_queue(pg_server, monkeypatch, tmp_path, team, cli):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    for machine in ("laptop", "desktop"):
        monkeypatch.setenv("CAIRN_HOME", str(tmp_path / machine))
        create_store(team, postgres=pg_server)
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "laptop"))
    with Cairn.open(team, embedder=None) as laptop:
        a = laptop.remember("Always squash commits before merging a pull request", kind="convention",
                            detect=False).memory
        b = laptop.remember("Before merging a pull request, always squash the commits", kind="convention",
                            detect=False).memory
    # The nightly cron line (`cairn maintain --all --apply`) covers the team store too.
    code, out, err = cli("maintain", "--all", "--apply", "--json")
    assert code == 0, err
    (report,) = [r for r in json.loads(out)["stores"] if r["store"] == team]
    assert report["dry_run"] is False and report["counts"]["near_duplicate"] == 1
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "desktop"))
    with Cairn.open(team, embedder=None) as desktop:
        (p,) = desktop.review.queue(types=["near_duplicate"])
        assert p.source_ids == [a.id, b.id]
        assert desktop.review.decide(p.id, "approve", by="mcp")["superseded"] == [b.id]
        assert desktop.review.status()["last_run"]["staged"] == report["staged"]
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "laptop"))
    with Cairn.open(team, embedder=None) as laptop:
        with pytest.raises(ProposalClosed, match="already applied by mcp"):
            laptop.review.decide(p.id, "keep")
        assert laptop.get(b.id).superseded_by == a.id and laptop.counts()["current"] == 1


def test_migrate_store_carries_the_review_queue_both_ways_scrubbed_into_postgres(pg_server, monkeypatch, team):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store("src")
    with Cairn.open("src", embedder=None) as memory:
        memory.remember("Run the linter before pushing.", kind="convention")
        memory.remember("We might run the linter before pushing.", kind="convention")
        (conflict,) = memory.review.queue()
        kept = memory.review.propose("Tabs, not spaces.", kind="preference")["proposal"]["id"]
        memory.review.decide(kept, "keep")
        # an imported guidance line with a secret in it, queued before anything scrubbed it
        secret = memory.review.propose(
            "The deploy key is AKIA4HQ7ZN2XKW3RM5TB for the staging bucket")["proposal"]["id"]
        memory.review.maintain(apply=True)
        before = {p.id: p for p in memory.review.queue(states=["pending", "rejected"])}
    assert set(before) >= {conflict.id, kept, secret}

    done = migrate_store("src", f"postgres:{team}")
    assert done["proposals"] == len(before)
    with Cairn.open(team, embedder=None) as memory:
        after = {p.id: p for p in memory.review.queue(states=["pending", "rejected"])}
        assert {i: (p.state, p.type, p.sources) for i, p in after.items()} == \
            {i: (p.state, p.type, p.sources) for i, p in before.items()}
        assert after[secret].payload["text"] == "The deploy key is [REDACTED:AWS Access Key] for the staging bucket"
        assert after[conflict.id].payload == before[conflict.id].payload
        assert memory.review.status()["last_run"] is not None
        # the copied proposal is still decidable: its sources' stamps came along with the memories
        assert memory.review.decide(conflict.id, "approve")["state"] == "applied"

    migrate_store(f"postgres:{team}", "sqlite:back")
    with Cairn.open("back", embedder=None) as memory:
        states = {p.id: p.state for p in memory.review.queue(states=["pending", "rejected", "applied", "expired"])}
        assert set(states) == set(before)
        assert (states[conflict.id], states[kept], states[secret]) == ("applied", "rejected", "pending")


def test_reads_and_writes_go_on_while_a_forget_rewrites_the_vector_table(pg_server, monkeypatch, team, hashing):
    """A forget's VACUUM FULL holds the vector table exclusively while it rebuilds the HNSW index
    (about a minute at 100k memories). Meanwhile recall answers from keywords and a write stores
    its memory queued for embedding, each within a second instead of waiting the rebuild out; the
    queued vector is stored once the table is free."""
    from cairn.storage.postgres import VECTOR_LOCK_WAIT_MS, connect

    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store(team, postgres=pg_server)
    with Cairn.open(team, embedder=hashing) as memory:
        for i in range(20):
            memory.remember(f"Service {i} listens on port {8000 + i}", kind="fact", detect=False)
        assert memory.counts()["awaiting_embedding"] == 0
        memory.store.conn.execute("SET statement_timeout = '20s'")  # a statement that waits fails, not hangs
        other = connect(pg_server)
        try:
            other.execute("BEGIN")
            # The lock VACUUM FULL takes:
            other.execute(f'LOCK TABLE "{memory.store.schema}".memory_vectors IN ACCESS EXCLUSIVE MODE')
            wait = VECTOR_LOCK_WAIT_MS / 1000  # each statement on the vector table gives up after this
            start = time.monotonic()
            hits = memory.recall("which port does service 7 listen on")
            recall_s = time.monotonic() - start
            start = time.monotonic()
            made = memory.remember("Service 99 listens on port 8099", kind="fact")  # detection reads vectors too
            remember_s = time.monotonic() - start
            assert hits and hits[0].memory.text == "Service 7 listens on port 8007"
            assert all("vector" not in h.reasons and "bm25" in h.reasons for h in hits)
            assert made.status == "created" and memory.counts()["awaiting_embedding"] == 1
            assert recall_s < 2 * wait + 1.0 and remember_s < 3 * wait + 1.0, (recall_s, remember_s)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert memory.flush_backlog() == 1 and memory.counts()["awaiting_embedding"] == 0
        assert "vector" in memory.recall("Service 99 port", k=1)[0].reasons


# -- postings (m009): one-word phrases ranked from memory_postings, exactly as from the tsv ---------
POSTINGS_TEXTS = [
    ("The API gateway listens on port 8080 behind the pre-commit hooks", "fact", ["api", "ports"],
     ["changing the gateway"]),
    ("Deploys go through the release train on Thursdays; the service restarts on failure", "decision", ["deploy"],
     []),
    ("Der Dienst startet nach einem Fehler neu und schreibt Protokolle nach journald", "fact", ["dienst"],
     ["Dienste neu starten"]),
    ("Les services redémarrent après une panne ; les journaux vont dans journald", "fact", [], []),
    ("東京のサーバーはポート9090で起動する", "fact", ["サーバー"], ["サーバーを起動するとき"]),
    ("数据库连接池的大小是二十，服务重启后生效", "fact", [], ["调整数据库"]),
    ("Services restart services; the service logs to journald, service after service", "fact", ["ports"], []),
    ("The server.http.port setting moves the gateway's port; GB/s figures are per service", "decision", [],
     ["tuning the gateway"]),
]
POSTINGS_QUERIES = ["service restarts", "port", "pre-commit hooks", "journald Protokolle", "サーバー起動", "数据库",
                    "redémarrent panne", "gateway deploy release", "Dienst", "changing the gateway",
                    "server.http.port", "Thursdays failure", "bench note 7 journald", "GB/s", "nothing-matches-this"]


def postings_drift(store) -> int:
    """Rows in memory_postings that recomputing them from the tsv column would not give, plus the
    reverse (lexeme, memory, rank)."""
    recomputed = ("SELECT p.lexeme, m.seq, p.r FROM memories m CROSS JOIN LATERAL cairn_postings(m.tsv) p "
                  "WHERE m.tsv IS NOT NULL")
    return store.conn.execute(
        f"SELECT (SELECT count(*) FROM (SELECT lexeme, seq, r FROM memory_postings EXCEPT ALL {recomputed}) a) "
        f"+ (SELECT count(*) FROM ({recomputed} EXCEPT ALL SELECT lexeme, seq, r FROM memory_postings) b)"
    ).fetchone()[0]


def assert_postings_rank_as_the_tsv(memory: Cairn, times: list[int]) -> int:
    """Every query under every filter (views, as_of and known_at at each of `times`, kinds, tags; a
    small limit too): the postings path's ranking equals the tsv path's, scores equal. Returns how
    many hits compared."""
    from cairn.storage.sql import Filters
    from cairn.text import fts_query

    store = memory.store
    assert postings_drift(store) == 0
    filters = [Filters(), Filters(include_superseded=True), Filters(include_cold=True),
               Filters(kinds=("decision",)), Filters(tags=("ports",)), Filters(since=times[1])]
    filters += [Filters(as_of=t) for t in times] + [Filters(known_at=t) for t in times]
    compared = 0
    for query in POSTINGS_QUERIES:
        match = fts_query(query)
        for f in filters:
            for limit in (50, 2):
                want = store.keyword_search(match, f, limit, postings=False)
                got = store.keyword_search(match, f, limit, postings=True)
                assert [s for s, _ in got] == [s for s, _ in want], (query, f, limit)
                assert [sc for _, sc in got] == pytest.approx([sc for _, sc in want], rel=1e-12), (query, f)
                compared += len(got)
    return compared


def test_postings_rank_exactly_as_the_tsv_after_every_write_path(pg_server, monkeypatch, hashing, team):
    """A varied store (English, German, French, Chinese, Japanese; tags; applies_when; superseded,
    expired, cold and forgotten memories; several valid and transaction times) written through
    remember, remember_many, replace, supersession by `replaces`, forget, set_cold, both imports
    (row by row and bulk), migrate-store, reembed and the index rebuild, on stores with English and
    German text search configurations: the postings hold exactly what the tsv column gives, and
    keyword search ranks from them as from the tsv. Then a store from before m008 (its postings
    dropped, schema version 7) gets them on opening."""
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    day = 86_400_000
    t0 = 1_700_000_000_000
    times = [t0 - day, t0 + 5 * day, t0 + 15 * day, t0 + 25 * day]

    create_store(team, postgres=pg_server)
    with Cairn.open(team, embedder=hashing) as memory:
        made = [memory.remember(text, kind=kind, tags=tags, applies_when=applies, valid_from=t0, detect=False).memory
                for text, kind, tags, applies in POSTINGS_TEXTS]
        memory.remember_many([Draft(text=f"Bench note {i}: service {i} logs to journald on port {9000 + i}",
                                    kind="fact", tags=("ports",) if i % 2 else (), valid_from=t0 + i * day)
                              for i in range(12)], detect=False)
        replaced = memory.replace(made[0].id, "The API gateway listens on port 9443 behind the pre-commit hooks",
                                  valid_from=t0 + 10 * day).memory
        times.append(replaced.recorded_at - 1)  # known_at: the store as it was before that replace
        memory.remember("Deploys go through the release train on Tuesdays; the service restarts twice",
                        kind="decision", tags=["deploy"], replaces=made[1].id, valid_from=t0 + 20 * day)
        memory.remember("The journald service keeps logs for a week", kind="fact", valid_from=t0,
                        valid_to=t0 + 8 * day, detect=False)
        memory.forget(made[3].id)
        memory.set_cold(made[6].id, True)
        import_lines = [json.dumps({"id": str(ULID.from_timestamp((t0 + i) / 1000)), "kind": "fact",
                                    "text": f"Imported {i}: der Dienst {i} schreibt nach journald, service port {i}",
                                    "tags": ["import"], "importance": 3, "source": "import", "valid_from": t0 + i,
                                    "recorded_at": t0 + i}) for i in range(3)]
        assert memory.import_(io.BytesIO("\n".join(import_lines).encode()))["imported"] == 3  # row by row
        assert memory.reembed() > 0
        assert assert_postings_rank_as_the_tsv(memory, times) > 200
        memory.store.rebuild_indexes()  # remakes every postings row: checked apart from the writes before
        memory.remember("サーバーのポートは起動のときに決まる", kind="fact", detect=False)
        memory.forget(made[5].id)
        assert assert_postings_rank_as_the_tsv(memory, times) > 200

    # A German store from SQLite through migrate-store (the bulk import: COPY, one INSERT ... SELECT).
    Path(os.environ["CAIRN_CONFIG"]).write_text("store:\n  language: german\n")
    create_store("postings-src")
    with Cairn.open("postings-src", embedder=hashing) as src:
        lines = [json.dumps({"id": str(ULID.from_timestamp((t0 + i) / 1000)), "kind": "fact" if i % 3 else "decision",
                             "text": f"Der Dienst {i} startet neu; service {i} restarts and logs to journald "
                                     f"({'東京のサーバー' if i % 7 == 0 else 'port'} {i})",
                             "tags": ["ports"] if i % 5 == 0 else [], "importance": 3, "source": "import",
                             "valid_from": t0 + i * day // 20, "recorded_at": t0 + i})
                 for i in range(260)]
        src.import_(io.BytesIO("\n".join(lines).encode()))
        for text, kind, tags, applies in POSTINGS_TEXTS:
            src.remember(text, kind=kind, tags=tags, applies_when=applies, valid_from=t0, detect=False)
        listed = src.list(limit=300)
        src.replace(listed[0].id, "Der Dienst startet jetzt zweimal neu", valid_from=t0 + 12 * day)
        src.forget(listed[1].id)
        src.set_cold(listed[2].id, True)
    german = f"{team}-de"
    assert migrate_store("postings-src", f"postgres:{german}")["memories"] > 260
    with Cairn.open(german, embedder=hashing) as memory:
        assert memory.store.get_meta("text_search_language") == "german"
        assert assert_postings_rank_as_the_tsv(memory, times) > 500
        more = [json.dumps({"id": str(ULID.from_timestamp((t0 + 10_000 + i) / 1000)), "kind": "fact",
                            "text": f"Nachtrag {i}: der Dienst protokolliert nach journald", "tags": [],
                            "importance": 3, "source": "import", "valid_from": t0, "recorded_at": t0 + 10_000 + i})
                for i in range(210)]
        assert memory.import_(io.BytesIO("\n".join(more).encode()))["imported"] == 210  # bulk, into a full store
        current = memory.list(limit=5)
        memory.forget(current[0].id)
        memory.replace(current[1].id, "Der Dienst startet nie neu", valid_from=t0 + 30 * day)
        assert assert_postings_rank_as_the_tsv(memory, times) > 500

    # A store from before m009: its postings are made when it is opened.
    with Cairn.open(team, embedder=hashing) as memory:
        memory.store.conn.execute("DROP TABLE memory_postings; DROP FUNCTION memory_postings_added, "
                                  "memory_postings_changed CASCADE; DROP FUNCTION cairn_postings; "
                                  "DELETE FROM migrations WHERE number = 9")
    with Cairn.open(team, embedder=hashing) as memory:
        assert memory.store.schema_version() == len(MIGRATIONS)
        assert memory.store.conn.execute("SELECT count(*) FROM memory_postings").fetchone()[0] > 100
        assert assert_postings_rank_as_the_tsv(memory, times) > 200
        store = memory.store
        assert store.index_report()["postings_stale"] == 0
        # Postings that drifted (written around the triggers) are what doctor reports, and --fix remakes.
        store.conn.execute("ALTER TABLE memories DISABLE TRIGGER memory_postings_changed")
        store.conn.execute("UPDATE memories SET tsv = NULL WHERE id = %s", (made[7].id,))
        store.conn.execute("ALTER TABLE memories ENABLE TRIGGER memory_postings_changed")
        store.conn.execute("DELETE FROM memory_postings WHERE seq = %s", (store.seq_of(made[2].id),))
        assert postings_drift(store) > 0
        assert {k: v for k, v in store.index_report().items() if k in ("fts_missing", "postings_stale")} == \
            {"fts_missing": 1, "postings_stale": 2}
        store.rebuild_indexes()
        assert store.index_report()["postings_stale"] == 0 and store.index_report()["fts_missing"] == 0
        assert assert_postings_rank_as_the_tsv(memory, times) > 200


def test_keyword_recall_goes_on_from_the_tsv_while_a_forget_rewrites_the_postings(pg_server, monkeypatch, team):
    """A forget's VACUUM FULL of memory_postings (seconds at 100k memories) holds the table
    exclusively: keyword search then waits at most VECTOR_LOCK_WAIT_MS and ranks from the tsv,
    with the same result."""
    from cairn.storage.postgres import VECTOR_LOCK_WAIT_MS, connect

    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store(team, postgres=pg_server)
    with Cairn.open(team, embedder=None) as memory:
        for i in range(20):
            memory.remember(f"Service {i} listens on port {8000 + i}", kind="fact", detect=False)
        expected = [h.memory.id for h in memory.recall("which port does service 7 listen on")]
        memory.store.conn.execute("SET statement_timeout = '20s'")  # a statement that waits fails, not hangs
        other = connect(pg_server)
        try:
            other.execute("BEGIN")
            other.execute(f'LOCK TABLE "{memory.store.schema}".memory_postings IN ACCESS EXCLUSIVE MODE')
            start = time.monotonic()
            hits = [h.memory.id for h in memory.recall("which port does service 7 listen on")]
            recall_s = time.monotonic() - start
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert hits == expected and memory.get(hits[0]).text == "Service 7 listens on port 8007"
        assert VECTOR_LOCK_WAIT_MS / 1000 <= recall_s < 2 * VECTOR_LOCK_WAIT_MS / 1000 + 1.0, recall_s


def test_a_store_from_before_schema_12_gets_the_one_duplicate_key(pg_server, monkeypatch, team, hashing):
    """Issue 31, on Postgres: text_key was normalise(text); migration 12 rewrites it to
    text.duplicate_key, and a punctuation variant left current beside its original gets a key no text
    has, for maintenance to retire."""
    from cairn.text import duplicate_key

    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    create_store(team, postgres=pg_server)
    with Cairn.open(team, embedder=hashing) as memory:
        cpp = memory.remember("Use C++ for the core engine.", kind="decision", detect=False).memory
        lint = memory.remember("Run the linter before pushing.", kind="convention", detect=False).memory
        variant = memory.remember("Run the linter before pushing!", kind="convention", detect=False,
                                  replaces=lint.id).memory  # retires lint; made current again below
        conn = memory.store.conn
        conn.execute("UPDATE memories SET text_key = lower(text)")
        conn.execute(f"UPDATE memories SET retired_at = {END_OF_TIME}, superseded_by = NULL, valid_to = "
                     f"{END_OF_TIME} WHERE id = %s", (lint.id,))
        conn.execute("DELETE FROM migrations WHERE number = 12")
    with Cairn.open(team, embedder=hashing) as memory:
        keys = dict(memory.store.conn.execute("SELECT id, text_key FROM memories").fetchall())
        assert keys[cpp.id] == duplicate_key(cpp.text) and keys[lint.id] == duplicate_key(lint.text)
        assert keys[variant.id].startswith(duplicate_key(variant.text) + "\n")
        assert memory.review.maintain(apply=True, safe_only=True)["retired"] == 1
        assert memory.get(variant.id).superseded_by == lint.id
