"""The `cairn` command line as a user runs it: output, --json keys, and bad input (exit 2, nothing written)."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest

from cairn.adapters.cli import main


@pytest.fixture
def cairn(project, monkeypatch, capsys, minilm):
    """Run `cairn ARGS...` in-process from the project folder; returns (exit code, stdout, stderr)."""
    monkeypatch.chdir(project)

    def run(*args: str, stdin: str | bytes | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            raw = stdin.encode() if isinstance(stdin, str) else stdin
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code or 0
        out, err = capsys.readouterr()
        return code, out, err

    return run


def store_files(home: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (home / "stores").glob("*.db")} if (home / "stores").exists() else {}


def test_remember_recall_history_forget_round_trip(cairn):
    code, out, _ = cairn("remember", "Deploys go through blue-green on Fly", "--kind", "decision", "--tags", "deploy",
                         "--json")
    assert code == 0
    first = json.loads(out)
    assert first["status"] == "created" and first["memory"]["kind"] == "decision"
    assert first["memory"]["tags"] == ["deploy"]
    old_id = first["memory"]["id"]

    code, out, _ = cairn("remember", "We now deploy with Kamal", "--kind", "decision", "--replaces", old_id, "--json")
    new = json.loads(out)
    assert new["superseded"] == [old_id]

    code, out, _ = cairn("recall", "how do we deploy?", "--json")
    hits = json.loads(out)
    assert [h["memory"]["id"] for h in hits] == [new["memory"]["id"]]
    assert set(hits[0]) == {"memory", "score", "reasons"}

    code, out, _ = cairn("recall", "deploy", "--as-of", first["memory"]["recorded_at_iso"], "--json")
    assert [h["memory"]["id"] for h in json.loads(out)] == [old_id]

    code, out, _ = cairn("history", old_id)
    assert code == 0 and "superseded by" in out and "Kamal" in out

    code, out, _ = cairn("forget", new["memory"]["id"])
    assert code == 0 and out.startswith("forgot")
    code, out, _ = cairn("recall", "Kamal", "--json")
    assert json.loads(out) == []


def test_status_says_which_store_and_why(cairn, project):
    code, out, _ = cairn("status", "--json")
    info = json.loads(out)
    assert info["chosen_by"] == f"git toplevel {project.resolve()}"
    assert info["store"].startswith("project-")
    assert info["vector_backend"] == "sqlite-vec"


def test_stores_create_then_use_by_name(cairn):
    code, _, err = cairn("recall", "x", "--store", "team-notes")
    assert code == 2 and "does not exist" in err and "cairn stores create team-notes" in err
    assert cairn("stores", "create", "team-notes")[0] == 0
    assert cairn("remember", "Shared note", "--store", "team-notes")[0] == 0
    code, out, _ = cairn("stores", "--json")
    names = {s["name"] for s in json.loads(out)["stores"]}
    assert "team-notes" in names


def test_export_import_through_files(cairn, tmp_path):
    cairn("remember", "Ports: API 8080, admin 9000", "--kind", "fact")
    dump = tmp_path / "dump.jsonl"
    assert cairn("export", str(dump))[0] == 0
    assert cairn("import", str(dump), "--store", "copy", "--create", "--json")[1].count('"imported": 1') == 1


BAD_INPUTS = [
    (("remember", ""), "memory text is empty"),
    (("remember", "   \n\t "), "memory text is empty"),
    (("remember", "x" * 8193), "the limit is 8192"),
    (("remember", "fine text", "--kind", "opinion"), "opinion"),
    (("remember", "fine text", "--importance", "6"), "importance must be an integer from 1 to 5"),
    (("remember", "fine text", "--importance", "0"), "importance must be an integer from 1 to 5"),
    (("remember", "fine text", "--valid-from", "last tuesday"), "valid_from: cannot read"),
    (("recall", "deploy", "--as-of", "2026-13-45"), "as_of: cannot read"),
    (("remember", "fine text", "--store", "../escape", "--create"), "invalid store name"),
    (("remember", "fine text", "--store", "a/b", "--create"), "invalid store name"),
    (("remember", "fine text", "--replaces", "01NOSUCHMEMORY"), "no memory"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS, ids=[" ".join(a)[:40] for a, _ in BAD_INPUTS])
def test_bad_input_is_one_clear_line_exit_2_and_writes_nothing(cairn, cairn_home, args, message):
    cairn("remember", "an existing memory")
    before = store_files(cairn_home)
    code, out, err = cairn(*args)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert store_files(cairn_home) == before
    assert not (cairn_home / "stores" / "escape.db").exists() and not (cairn_home / "escape.db").exists()


def test_invalid_utf8_in_import_file_writes_nothing(cairn, cairn_home, tmp_path):
    cairn("remember", "an existing memory")
    good = {"id": "01KAAAAAAAAAAAAAAAAAAAAAAA", "text": "ok", "kind": "fact", "importance": 3, "source": "import",
            "valid_from": 1, "recorded_at": 1}
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(json.dumps(good).encode() + b"\n" + b'{"text": "caf\xe9"}\n')
    code, _, err = cairn("import", str(bad))
    assert code == 2 and "line 2: invalid UTF-8" in err
    code, out, _ = cairn("list", "--json")
    assert [m["text"] for m in json.loads(out)] == ["an existing memory"]


def test_corrupted_database_is_refused(cairn, cairn_home):
    cairn("remember", "an existing memory")
    (path,) = (cairn_home / "stores").glob("*.db")
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.write_bytes(b"this is not a database" * 100)
    code, _, err = cairn("recall", "memory")
    assert code == 2 and "not a readable SQLite database" in err
    assert path.read_bytes() == b"this is not a database" * 100


def test_newer_schema_is_refused_with_a_message_that_says_so(cairn, cairn_home):
    cairn("remember", "an existing memory")
    (path,) = (cairn_home / "stores").glob("*.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.commit()
    conn.close()
    code, _, err = cairn("remember", "another")
    assert code == 2 and "schema version 999, newer than this Cairn understands" in err
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


def test_other_model_is_refused_and_names_reembed(cairn, cairn_home, project):
    from cairn import Cairn, EmbeddingMismatch
    from cairn.embedder import HashingEmbedder

    cairn("remember", "an existing memory")
    with pytest.raises(EmbeddingMismatch, match="cairn reembed"):
        Cairn.open(cwd=project, embedder=HashingEmbedder())
    with Cairn.open(cwd=project, embedder=HashingEmbedder(), check_model=False) as memory:
        assert memory.reembed() == 1
    with Cairn.open(cwd=project, embedder=HashingEmbedder()) as memory:
        assert memory.recall("existing memory")[0].reasons["vector"]["rank"] == 1
