"""Backup and restore: a backup is a consistent copy taken while others write; restoring it brings
back exactly the memories and history it held, keeps the replaced store aside, and refuses a backup
from a newer Cairn."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cairn
from cairn import Cairn, SchemaTooNew, backup_store, backups_of, restore_store

from tests.conftest import run_cli


def export(memory: Cairn) -> list[dict]:
    out = io.StringIO()
    memory.export(out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def ids_in(path: Path) -> set[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM memories")}


def test_restore_brings_back_exactly_the_memories_and_history_the_backup_held(project, hashing, cairn_home):
    with Cairn.open(cwd=project, embedder=hashing) as memory, Cairn.open(cwd=project, embedder=hashing) as other:
        # `other` stays open throughout, as the warm process or an MCP server would.
        a = memory.remember("Deploys go out on Tuesdays", kind="decision").memory
        b = memory.remember("The staging database runs PostgreSQL 14", kind="fact").memory
        c = memory.remember("The on-call phone number is 555-0199", kind="fact").memory
        b2 = memory.replace(b.id, "The staging database runs PostgreSQL 16").memory
        memory.forget(c.id)
        memory.review.dismiss(a.id, b2.id)
        held = export(memory)
        made = backup_store(memory.name)
        assert Path(made["path"]).parent == cairn_home / "backups" and made["counts"]["total"] == 4

        d = memory.remember("Feature flags live in LaunchDarkly", kind="fact").memory
        memory.replace(a.id, "Deploys go out on Thursdays")
        memory.forget(b2.id)
        before_restore = export(memory)
        assert other.get(d.id).text == "Feature flags live in LaunchDarkly"

        # b2 was forgotten after the backup: brought back only when asked (the next test: the default).
        done = restore_store(made["path"], bring_back_forgotten=True)
        assert done["store"] == memory.name and done["counts"]["total"] == 4
        assert [m["id"] for m in done["forgotten"]] == [b2.id]
        assert export(memory) == held
        assert export(other) == held  # an engine kept open reads the restored store, not the old one
        assert [m.id for m in other.history(b2.id)] == [b.id, b2.id]
        assert other.get(b2.id).text == "The staging database runs PostgreSQL 16"
        assert other.review.is_dismissed(a.id, b2.id)
        assert {h.memory.id for h in other.recall("staging database PostgreSQL")} >= {b2.id}
        assert d.id not in [m.id for m in other.list(include_superseded=True)]
        assert other.counts()["awaiting_embedding"] == 0  # the vectors came back with the memories

    # The replaced store was kept aside, whole: restored under another name, it is what was replaced.
    aside = Path(done["replaced_kept_at"])
    assert aside.parent == cairn_home / "backups" and stat.S_IMODE(aside.stat().st_mode) == 0o600
    restore_store(aside, name="replaced")
    with Cairn.open("replaced", embedder=hashing) as replaced:
        assert [{**m, "store": None} for m in export(replaced)] == [{**m, "store": None} for m in before_restore]


def test_a_memory_forgotten_after_the_backup_stays_forgotten_and_is_named(project, hashing, capsys):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        kept = memory.remember("Deploys go out on Tuesdays", kind="decision").memory
        gone = memory.remember("The on-call phone number is 555-0199", kind="fact").memory
        made = backup_store(memory.name)
        memory.forget(gone.id)
        path = memory.status().path
    code, out, err = run_cli(capsys, ["restore", made["path"]])
    assert code == 0, err
    assert gone.id in err and "kept forgotten" in err and "--bring-back-forgotten" in err
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert memory.get(kept.id).text == "Deploys go out on Tuesdays"
        assert memory.get(gone.id).forgotten_at is not None and memory.get(gone.id).text is None
    assert b"555-0199" not in Path(path).read_bytes()  # erased again, as forget erases
    code, out, err = run_cli(capsys, ["restore", made["path"], "--bring-back-forgotten"])
    assert code == 0 and "brought back" in err
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert memory.get(gone.id).text == "The on-call phone number is 555-0199"


def run(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, args)


def test_cli_backup_keep_json_and_restore_refusals(project, cairn_home, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    assert run(capsys, "remember", "Deploys go out on Tuesdays", "--keyword-only")[0] == 0
    assert run(capsys, "stores", "create", "client-acme")[0] == 0
    paths = []
    for _ in range(3):
        code, out, err = run(capsys, "backup", "--keep", "2", "--json")
        assert code == 0, err
        (made,) = json.loads(out)["backups"]
        paths.append(made["path"])
        assert made["counts"]["current"] == 1
    assert made["removed"] == [paths[0]]
    name = made["store"]
    assert [str(p) for p in backups_of(name)] == paths[1:]
    assert stat.S_IMODE((cairn_home / "backups").stat().st_mode) == 0o700
    assert all(stat.S_IMODE(Path(p).stat().st_mode) == 0o600 for p in paths[1:])

    code, out, _ = run(capsys, "backup", "--all", "--json")
    assert code == 0 and {b["store"] for b in json.loads(out)["backups"]} == {name, "client-acme"}
    assert run(capsys, "backup", "--all", "--store", "x")[0] == 2

    # Refusals: a newer schema, a file that is not a store; the store is left as it was.
    newer = tmp_path / "newer.db"
    newer.write_bytes(Path(paths[-1]).read_bytes())
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    code, _, err = run(capsys, "restore", str(newer))
    assert code == 2 and "schema version 99, newer than this Cairn" in err
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    code, _, err = run(capsys, "restore", str(junk))
    assert code == 2 and "not a readable SQLite database" in err
    code, _, err = run(capsys, "restore", str(tmp_path / "missing.db"))
    assert code == 2 and "no backup file" in err
    with pytest.raises(SchemaTooNew):
        restore_store(newer)

    assert run(capsys, "remember", "Deploys go out on Thursdays", "--keyword-only")[0] == 0
    code, out, err = run(capsys, "restore", paths[-1], "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["store"] == name and done["counts"]["current"] == 1 and Path(done["replaced_kept_at"]).exists()
    code, out, _ = run(capsys, "list", "--json")
    assert [m["text"] for m in json.loads(out)] == ["Deploys go out on Tuesdays"]


def test_a_store_that_cannot_be_read_is_moved_aside_and_restored(project, hashing, cairn_home):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        made = memory.remember("Deploys go out on Tuesdays", kind="decision").memory
        name, path = memory.name, memory.store.path
    backup = backup_store(name)["path"]
    path.write_bytes(b"\x00garbage" * 4096)
    done = restore_store(backup)
    assert Path(done["replaced_kept_at"]).read_bytes() == b"\x00garbage" * 4096
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert memory.get(made.id).text == "Deploys go out on Tuesdays"


WRITER = textwrap.dedent("""
    import sys
    from cairn import Cairn
    from cairn.embedder import HashingEmbedder
    with Cairn.open(sys.argv[1], create=True, embedder=HashingEmbedder()) as memory:
        for i in range(int(sys.argv[2])):
            made = memory.remember(f"Writer fact number {i} about service {i * 7}", kind="fact", detect=False)
            print(made.memory.id, flush=True)
""")


def test_a_backup_taken_while_another_process_writes_is_consistent_and_complete(cairn_home):
    env = {**os.environ, "CAIRN_HOME": str(cairn_home)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, "busy", "400"], stdout=subprocess.PIPE, text=True,
                              env=env)
    acked: list[str] = []
    backups = []
    try:
        while True:
            line = writer.stdout.readline()
            if not line:
                break
            acked.append(line.strip())
            if len(acked) % 80 == 0:
                before = set(acked)
                made = backup_store("busy")  # fails if the copy does not pass integrity_check
                backups.append((before, made["path"]))
    finally:
        writer.wait(120)
    assert writer.returncode == 0 and len(acked) == 400 and len(backups) == 5
    for before, path in backups:
        assert before <= ids_in(Path(path)), "every write acknowledged before the backup is in it"


LOCKER = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")  # readers are shut out too, not only writers
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.read()  # until the test closes stdin
""")


def test_restore_into_a_store_another_process_keeps_locked_is_refused_as_busy_and_changes_nothing(
        project, hashing, cairn_home):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        memory.remember("Deploys go out on Tuesdays", kind="decision")
        made = backup_store(memory.name)
        memory.remember("Feature flags live in LaunchDarkly", kind="fact")
        path, held = memory.store.path, export(memory)
    before = sorted(p.name for p in (cairn_home / "backups").iterdir())
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        with pytest.raises(cairn.StoreBusy, match="is busy.*nothing was restored"):
            restore_store(made["path"], busy_timeout_ms=200)
        assert path.exists()  # not moved aside as if it were unreadable
        assert sorted(p.name for p in (cairn_home / "backups").iterdir()) == before  # no stray copy
    finally:
        locker.stdin.close()
        locker.wait(30)
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert export(memory) == held  # unchanged; and once the lock is gone, the restore goes through
    assert restore_store(made["path"])["counts"]["current"] == 1
