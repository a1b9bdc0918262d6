"""Forget erases: once it returns, the forgotten text (and its vector) is in no file under the data root.

Each test first checks that its search finds the text before the forget, so a search that could
never find anything cannot pass for erasure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn import Cairn
from cairn.storage.migrations import MIGRATIONS
from cairn.adapters.cli import main

SECRET = "The staging vault codename is zyxwquartz-plover-42, rotated by Ingrid"
NEEDLES = (SECRET.encode(), b"zyxwquartz", b"Ingrid", SECRET.lower().encode())


def files_holding(root: Path, needles) -> dict[str, list[bytes]]:
    """{path: needles found in its bytes} over every file under root (following a symlinked root)."""
    found: dict[str, list[bytes]] = {}
    for folder, _, names in os.walk(root, followlinks=True):
        for name in names:
            path = Path(folder) / name
            try:
                data = path.read_bytes()
            except OSError:  # a socket, or a file removed meanwhile
                continue
            hits = [n for n in needles if n in data]
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


def fill(memory: Cairn) -> None:
    for i in range(40):
        memory.remember(f"Service {i} listens on port {8000 + i} and logs to journald", kind="fact", tags=["ports"])


def test_forget_leaves_neither_text_nor_vector_in_any_file(project, hashing, cairn_home):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        fill(memory)
        secret = memory.remember(SECRET, kind="fact", tags=["zyxwquartz-vault"]).memory
        memory.recall("vault codename")
        vector = memory.store.vectors_of([memory.store.seq_of(secret.id)])
        blob = next(iter(vector.values())).tobytes()
        memory.store.flush_to_disk()  # the text now sits in the database file itself, not just the WAL
        before = files_holding(cairn_home, NEEDLES + (blob,))
        assert any(SECRET.encode() in hits for hits in before.values()) and any(blob in h for h in before.values())

        tomb = memory.forget(secret.id)
        assert files_holding(cairn_home, NEEDLES + (blob,)) == {}
        # What remains is the tombstone: id and times, no text.
        assert (tomb.id, tomb.text, tomb.tags) == (secret.id, None, ())
        assert tomb.forgotten_at is not None and tomb.recorded_at == secret.recorded_at
        assert secret.id not in [h.memory.id for h in memory.recall("vault codename zyxwquartz")]
        assert memory.counts()["current"] == 40


def test_forget_through_the_cli_leaves_no_trace_in_stores_logs_or_session_markers(project, minilm, cairn_home,
                                                                                   monkeypatch, capsys):
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")

    def cli(*args: str) -> str:
        with pytest.raises(SystemExit) as exit_:
            main(list(args))
            raise SystemExit(0)
        assert exit_.value.code in (0, None), capsys.readouterr().err
        return capsys.readouterr().out

    for i in range(10):
        cli("remember", f"Service {i} listens on port {8000 + i}")
    made = json.loads(cli("remember", SECRET, "--tags", "vault", "--json"))["memory"]
    assert made["id"] in cli("recall", "vault codename", "--json")
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(project)}
    for event, payload in (("SessionStart", {"session_id": "s-1", "source": "startup"}),
                           ("UserPromptSubmit", {"session_id": "s-2", "prompt": "what is the vault codename?"})):
        out = subprocess.run([sys.executable, "-P", "-m", "cairn", "hook", event], input=json.dumps(payload),
                             capture_output=True, text=True, env=env, cwd=str(project), timeout=120, check=True)
        assert "zyxwquartz" in out.stdout  # the hook did inject it: markers were written with it in context
    assert (cairn_home / "sessions").is_dir()

    cli("forget", made["id"])
    assert files_holding(cairn_home, NEEDLES) == {}
    shown = json.loads(cli("show", made["id"], "--json"))
    assert shown["id"] == made["id"] and shown["text"] is None and shown["forgotten_at"] is not None


def test_a_store_written_before_secure_delete_is_purged_when_opened(project, hashing, cairn_home):
    """A store from an older Cairn (schema 3: no FTS secure-delete, no secure_delete pragma) holds
    forgotten text in free pages and FTS segments; opening it with this Cairn erases it."""
    # Written as that Cairn wrote it: its three migrations, its rows, and a forget that only deleted
    # (plain SQL: today's code reads columns that schema does not have).
    from cairn.storage import db
    from cairn.stores.paths import choose_store
    from cairn.text import index_text

    path = choose_store(None, cwd=project, env={"CAIRN_HOME": os.environ["CAIRN_HOME"]}).path
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = db.connect(str(path))
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    for step in MIGRATIONS[:3]:
        step.sqlite(conn)
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, 0)", (step.name,))
    conn.execute("PRAGMA user_version = 3")
    texts = [f"Service {i} listens on port {8000 + i} and logs to journald" for i in range(40)] + [SECRET]
    for seq, text in enumerate(texts, start=1):
        conn.execute("INSERT INTO memories (id, text, text_key, kind, importance, source, valid_from, recorded_at) "
                     "VALUES (?, ?, ?, 'fact', 3, 'user', ?, ?)", (f"01J{seq:023d}", text, text.lower(), seq, seq))
        conn.execute("INSERT INTO memory_fts(rowid, body, tags) VALUES (?, ?, 'ports')", (seq, index_text(text)))
        conn.execute("INSERT INTO vector_backlog(seq) VALUES (?)", (seq,))
    conn.commit()
    conn.execute("UPDATE memories SET text = NULL, text_key = NULL, forgotten_at = 99, retired_at = 99 WHERE seq = 41")
    conn.execute("DELETE FROM memory_fts WHERE rowid = 41")
    conn.execute("DELETE FROM vector_backlog WHERE seq = 41")
    conn.commit()
    conn.close()
    assert files_holding(cairn_home, NEEDLES), "the older way of forgetting must leave the text behind"

    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert memory.store.conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert files_holding(cairn_home, NEEDLES) == {}
        memory.flush_backlog(100)
        assert memory.counts() == {"current": 40, "cold": 0, "superseded": 0, "forgotten": 1, "total": 41,
                                   "awaiting_embedding": 0}
        assert len(memory.recall("port 8005 journald", k=3)) == 3
    assert path.exists()


def relation_files(conn, schema: str) -> list[Path]:
    """The files of every table, index and TOAST relation of a store's schema (superuser view)."""
    data = Path(conn.execute("SHOW data_directory").fetchone()[0])
    rows = conn.execute(
        "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s OR c.oid IN (SELECT reltoastrelid FROM pg_class k JOIN pg_namespace kn "
        "ON kn.oid = k.relnamespace WHERE kn.nspname = %s) OR c.oid IN (SELECT indexrelid FROM pg_index WHERE "
        "indrelid IN (SELECT reltoastrelid FROM pg_class k JOIN pg_namespace kn ON kn.oid = k.relnamespace "
        "WHERE kn.nspname = %s))", (schema, schema, schema)).fetchall()
    files = []
    for (rel,) in rows:
        if rel:
            files += sorted((data / rel).parent.glob(Path(rel).name + "*"))  # segments and the _fsm/_vm forks
    return files


def relation_files_holding(conn, schema: str, needles) -> dict[str, list[bytes]]:
    conn.execute("CHECKPOINT")  # every change written into the relation files, not only the WAL
    found = {}
    for path in relation_files(conn, schema):
        data = path.read_bytes()
        hits = [n for n in needles if n in data]
        if hits:
            found[path.name] = hits
    return found


@pytest.mark.postgres
def test_forget_on_postgres_leaves_no_text_or_vector_in_the_store_tables_or_indexes(project, hashing, backend,
                                                                                     monkeypatch, pg_server):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    Path(os.environ["CAIRN_CONFIG"]).write_text("store:\n  backend: postgres\n")
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        fill(memory)
        secret = memory.remember(SECRET, kind="fact", tags=["zyxwquartz-vault"]).memory
        store = memory.store
        blob = next(iter(store.vectors_of([store.seq_of(secret.id)]).values())).tobytes()
        before = relation_files_holding(store.conn, store.schema, NEEDLES + (blob,))
        assert any(SECRET.encode() in hits for hits in before.values()) and any(blob in h for h in before.values())
        # The postings (m009) hold the text's lexemes, in their table and in their index.
        postings = {Path(store.conn.execute("SELECT pg_relation_filepath(%s)", (rel,)).fetchone()[0]).name
                    for rel in ("memory_postings", "memory_postings_by_lexeme")}
        assert all(b"zyxwquartz" in before.get(name, []) for name in postings), before

        tomb = memory.forget(secret.id)
        assert relation_files_holding(store.conn, store.schema, NEEDLES + (blob,)) == {}
        assert (tomb.id, tomb.text, tomb.tags) == (secret.id, None, ())
        assert secret.id not in [h.memory.id for h in memory.recall("vault codename zyxwquartz")]
        assert memory.counts()["current"] == 40


@pytest.mark.postgres
def test_forget_on_postgres_rewrites_only_the_tables_that_held_the_memory(project, hashing, backend, monkeypatch,
                                                                          pg_server):
    """The rewrite (VACUUM FULL: new files, HNSW rebuilt) is the cost of a forget on Postgres: a
    memory without tags or vector rewrites its row's table and the postings of its words, and
    leaves the tags' and vectors' tables as they were; one with both rewrites all four. A
    rewritten table (or index) gets a new relfilenode."""
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    Path(os.environ["CAIRN_CONFIG"]).write_text("store:\n  backend: postgres\n")
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        fill(memory)
        store = memory.store

        def files() -> dict[str, int]:
            return dict(store.conn.execute(
                "SELECT relname, relfilenode FROM pg_class WHERE relname IN ('memories', 'memory_postings', "
                "'memory_postings_by_lexeme', 'memory_tags', 'memory_vectors', 'memory_vectors_hnsw') "
                "AND relnamespace = %s::regnamespace", (store.schema,)))

        bare = memory.remember("The vault is rotated on Mondays", kind="fact").memory
        store.conn.execute("DELETE FROM memory_vectors WHERE seq = %s", (store.seq_of(bare.id),))  # as if unembedded
        before = files()
        memory.forget(bare.id)
        after = files()
        assert all(after[k] != before[k] for k in ("memories", "memory_postings", "memory_postings_by_lexeme"))
        assert {k: after[k] for k in ("memory_tags", "memory_vectors", "memory_vectors_hnsw")} == \
            {k: before[k] for k in ("memory_tags", "memory_vectors", "memory_vectors_hnsw")}

        full = memory.remember(SECRET, kind="fact", tags=["zyxwquartz-vault"]).memory
        before = files()
        memory.forget(full.id)
        assert all(files()[k] != before[k] for k in before)
        assert store.invalid_indexes() == []
        assert len(memory.recall("service port journald", k=3)) == 3


def test_forget_takes_the_text_out_of_review_proposals_too(project, cairn_home, hashing):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        fill(memory)
        secret = memory.remember(SECRET, kind="fact").memory
        other = memory.remember("Deploys go through blue-green on Fly", kind="decision").memory
        # A pending proposal naming the memory, and a decided one.
        memory.store.add_proposals([(p, f"conflict:{p.id}") for p in [
            _proposal("pending-one", [secret, other]), _proposal("decided-one", [other, secret])]])
        memory.store.close_proposal("decided-one", state="rejected", at=1, by="user", result={"kept": [secret.text]})
        assert files_holding(cairn_home, NEEDLES), "the search must find the text before the forget"
        memory.forget(secret.id)
        pending, decided = memory.store.proposal("pending-one"), memory.store.proposal("decided-one")
        assert pending.state == "expired" and decided.state == "rejected"
        for p in (pending, decided):
            assert SECRET not in json.dumps([p.subject, p.payload, p.result])
            assert "[forgotten]" in p.payload["texts"] and other.text in p.payload["texts"]
    assert files_holding(cairn_home, NEEDLES) == {}


def _proposal(proposal_id: str, sources):
    from cairn.models import Proposal

    return Proposal(id=proposal_id, type="conflict", state="pending", subject=" ".join(sources[0].text.split()[:4]),
                    sources=tuple({"id": m.id, "stamp": str(m.recorded_at)} for m in sources),
                    payload={"texts": [m.text for m in sources], "reason": "test"}, created_at=1,
                    expires_at=2**62, decided_at=None, decided_by=None, result=None)


@pytest.mark.postgres
def test_forget_on_postgres_takes_the_text_out_of_review_proposals(project, hashing, pg_server, monkeypatch):
    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    Path(os.environ["CAIRN_CONFIG"]).write_text("store:\n  backend: postgres\n")
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        secret = memory.remember(SECRET, kind="fact").memory
        other = memory.remember("Deploys go through blue-green on Fly", kind="decision").memory
        memory.store.add_proposals([(_proposal("pg-pending", [secret, other]), "conflict:pg-pending")])
        memory.forget(secret.id)
        p = memory.store.proposal("pg-pending")
        assert p.state == "expired" and SECRET not in json.dumps([p.subject, p.payload, p.result])
        assert p.payload["texts"] == ["[forgotten]", other.text]
        assert "proposals" not in memory.store._unflushed  # VACUUM FULL rewrote it with the other tables
