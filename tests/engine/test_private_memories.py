"""`<private>` spans and secrets never reach a store through `remember`, on either backend: a second
reader (on Postgres, another machine: its own data root, the same team store) never sees them, and
they are in no byte the store keeps (SQLite: the files under the data root; Postgres: every row of
the store's tables, and every file of the server's data directory, WAL included)."""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path

import pytest

from cairn import Cairn, InvalidMemory, create_store

from tests.conftest import BACKENDS

AWS_KEY = "AKIA4HQ7ZN2XKW3RM5TB"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


def all_files(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def server_bytes(url: str, schema: str) -> bytes:
    """Every row of every table of `schema` (COPY ... TO STDOUT), then every file of the server's
    data directory (heap, indexes, WAL) after a checkpoint."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
        assert {"memories", "memory_tags"} <= set(tables)
        rows = []
        for table in tables:
            with conn.cursor().copy(f'COPY "{schema}"."{table}" TO STDOUT') as copy:
                rows += [bytes(chunk) for chunk in copy]
        conn.execute("CHECKPOINT")
        data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])
    return b"".join(rows) + b"\n" + all_files(data_dir)


def test_private_spans_and_secrets_never_reach_the_store_or_another_reader(backend, request, monkeypatch, tmp_path,
                                                                          hashing):
    codename = f"bluebird-{uuid.uuid4().hex[:8]}"  # this test's own: the server is shared by the session
    name = f"team-{uuid.uuid4().hex[:8]}"
    roots = {"laptop": tmp_path / "laptop", "desktop": tmp_path / "desktop"}
    if backend == "postgres":
        url = request.getfixturevalue("pg_server")
        monkeypatch.setenv("CAIRN_POSTGRES_URL", url)
        for root in roots.values():  # two machines: each its own data root, the same team store
            monkeypatch.setenv("CAIRN_HOME", str(root))
            create_store(name, postgres=url)
    else:
        roots["desktop"] = roots["laptop"]  # one machine: a second engine on the same store file
        monkeypatch.setenv("CAIRN_HOME", str(roots["laptop"]))
        create_store(name)

    monkeypatch.setenv("CAIRN_HOME", str(roots["laptop"]))
    with Cairn.open(name, embedder=hashing) as writer:
        written = writer.remember(f"Deploy with key {AWS_KEY} <private>the project codename is {codename}"
                                  f"</private> via the release train", kind="decision", tags=["deploy"]).memory
        assert written.text == "Deploy with key [REDACTED:AWS Access Key]  via the release train"
        replaced = writer.replace(written.id, f"Deploy with token {GITHUB_TOKEN} via the release train").memory
        assert replaced.text == "Deploy with token [REDACTED:GitHub Token] via the release train"
        with pytest.raises(InvalidMemory, match="all <private>"):
            writer.remember(f"<private>{codename} is the real name</private>", kind="fact")
        assert writer.counts()["total"] == 2  # the all-private one wrote nothing

    monkeypatch.setenv("CAIRN_HOME", str(roots["desktop"]))
    with Cairn.open(name, embedder=hashing) as reader:
        seen = [m.text for m in reader.list(include_superseded=True)]
        assert sorted(seen) == sorted([written.text, replaced.text])
        assert [h.memory.id for h in reader.recall("release train deploy key", k=5)] == [replaced.id]
        assert reader.recall(codename, use_vectors=False) == [] and reader.recall(AWS_KEY, use_vectors=False) == []
        dump = io.StringIO()
        reader.export(dump)
        assert "[REDACTED:GitHub Token]" in dump.getvalue()
        status_path = reader.status().path

    needles = [AWS_KEY.encode(), GITHUB_TOKEN.encode(), codename.encode()]
    for text in (dump.getvalue(), *seen):
        assert not [n for n in needles if n.decode() in text]
    if backend == "postgres":
        stored = server_bytes(os.environ["CAIRN_POSTGRES_URL"], status_path.removeprefix("postgres:"))
        assert b"release train" in stored  # the check reads the rows that hold the memories
    else:
        stored = all_files(roots["laptop"])
        assert b"release train" in stored
    assert [n for n in needles if n in stored] == []


@pytest.mark.postgres
def test_an_old_store_or_an_export_with_private_text_is_scrubbed_on_its_way_to_the_server(pg_server, monkeypatch,
                                                                                         hashing):
    """A store written before `remember` scrubbed (here: an import into SQLite, which keeps rows as
    they are), or an export edited by hand, goes to the server scrubbed: by migrate-store and by
    import alike. A memory that was all private arrives forgotten; a changed memory's vector is
    recomputed from its scrubbed text, never copied."""
    import json

    from cairn import migrate_store

    monkeypatch.setenv("CAIRN_POSTGRES_URL", pg_server)
    codename = f"kestrel-{uuid.uuid4().hex[:8]}"
    create_store("old")
    with Cairn.open("old", embedder=hashing) as memory:
        plain = memory.remember("The staging database is Postgres 16", kind="fact").memory
        dump = io.StringIO()
        memory.export(dump)
    base = json.loads(dump.getvalue().splitlines()[0])
    lines = [dump.getvalue().strip(),
             json.dumps({**base, "id": "01J00000000000000000000010",
                         "text": f"Rotate {AWS_KEY} monthly <private>for project {codename}</private>"}),
             json.dumps({**base, "id": "01J00000000000000000000011", "text": f"<private>{codename}</private>"})]
    data = ("\n".join(lines) + "\n").encode()
    with Cairn.open("old", embedder=hashing) as memory:
        assert memory.import_(io.BytesIO(data)) == {"imported": 2, "skipped": 1}
        assert codename in memory.get("01J00000000000000000000011").text  # SQLite keeps an import as it is

    names = {f"mig-{uuid.uuid4().hex[:8]}": "migrate", f"imp-{uuid.uuid4().hex[:8]}": "import"}
    for name, how in names.items():
        if how == "migrate":
            done = migrate_store("old", f"postgres:{name}")
            assert (done["memories"], done["vectors"]) == (3, 1)  # the scrubbed ones are re-embedded
        else:
            create_store(name, postgres=pg_server)
            with Cairn.open(name, embedder=hashing) as memory:
                assert memory.import_(io.BytesIO(data)) == {"imported": 3, "skipped": 0}
        with Cairn.open(name, embedder=hashing) as memory:
            assert memory.get("01J00000000000000000000010").text == "Rotate [REDACTED:AWS Access Key] monthly"
            gone = memory.get("01J00000000000000000000011")
            assert gone.text is None and gone.forgotten_at is not None
            assert memory.get(plain.id).text == plain.text
            assert memory.flush_backlog() == (1 if how == "migrate" else 0)  # import embedded it already
            assert memory.counts()["awaiting_embedding"] == 0
            where = memory.status().path.removeprefix("postgres:")
        stored = server_bytes(pg_server, where)
        assert b"Rotate [REDACTED:AWS Access Key] monthly" in stored
        assert AWS_KEY.encode() not in stored and codename.encode() not in stored


def test_applies_when_phrases_are_scrubbed_and_a_tag_holding_a_secret_is_refused(kw_memory):
    key = "sk-ant-api03-" + "Qx7Lm2Vb9Tn4Rc8Wd1Fy6Hj3Kp5Zs0Ge" * 3
    phrases = ["PGPASSWORD=Sup3rS3cretPw psql", "deploying <private>to db7.corp</private>"]
    m = kw_memory.remember("Deploy the API server with the release workflow", kind="decision",
                           applies_when=phrases).memory
    assert m.applies_when == ("PGPASSWORD=[REDACTED:Secret Assignment] psql", "deploying")
    before = kw_memory.counts()["current"]
    with pytest.raises(InvalidMemory, match="tag 2 holds a secret"):
        kw_memory.remember("Rotate the CI key monthly", tags=["ci", key])
    with pytest.raises(InvalidMemory, match="applies_when phrase 1 is all <private> content"):
        kw_memory.remember("Rotate the CI key monthly", applies_when=["<private>the vault at db7</private>"])
    assert kw_memory.counts()["current"] == before  # nothing written


def test_a_tag_that_is_a_random_token_is_refused_and_topics_are_not(kw_memory):
    before = kw_memory.counts()["current"]
    with pytest.raises(InvalidMemory, match="tag 1 looks like a secret"):
        kw_memory.remember("deploy key", tags=["8fJ2kQ9xLmN4pR7sT1vW3yZ5aB6cD0eF"])
    assert kw_memory.counts()["current"] == before  # nothing written
    tags = ["postgresql-16-upgrade-plan", "release-2026-q4-migration", "k8s-cluster-eu-west-1-prod"]
    assert kw_memory.remember("Plan the upgrade", tags=tags).memory.tags == tuple(sorted(tags))
