"""The `cairn` command line as a user runs it: output, --json keys, and bad input (exit 2, nothing written)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import legacy, run_cli


@pytest.fixture
def cairn(project, monkeypatch, capsys, minilm):
    """Run `cairn ARGS...` in-process from the project folder; returns (exit code, stdout, stderr).
    The model is loaded in this process (CAIRN_NO_WARM=1): no warm process per test's data root."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")

    def run(*args: str, stdin: str | bytes | None = None) -> tuple[int, str, str]:
        raw = stdin.encode() if isinstance(stdin, str) else stdin
        return run_cli(capsys, args, stdin=raw, monkeypatch=monkeypatch)

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
    assert code == 0 and out == f"forgot {new['memory']['id']}\n"
    code, out, _ = cairn("forget", new["memory"]["id"])  # idempotent, and says so
    assert code == 0 and out == f"already forgotten: {new['memory']['id']}\n"
    code, out, _ = cairn("recall", "Kamal", "--json")
    assert json.loads(out) == []
    code, out, _ = cairn("history", new["memory"]["id"])
    assert code == 0 and "; forgotten " in out and "Kamal" not in out


def test_status_says_which_store_and_why(cairn, project):
    code, out, _ = cairn("status", "--json")
    info = json.loads(out)
    assert info["chosen_by"] == f"git toplevel {project.resolve()}"
    assert info["store"].startswith("project-")
    assert info["vector_backend"] == "sqlite-vec"


def test_a_global_memory_creates_no_project_store(cairn, cairn_home):
    code, out, _ = cairn("remember", "The user wants short answers", "--kind", "preference", "--scope", "global")
    assert code == 0 and out.startswith("remembered ")
    assert list(store_files(cairn_home)) == ["global.db"]
    code, out, _ = cairn("recall", "short answers", "--scope", "global", "--json")
    assert [h["memory"]["text"] for h in json.loads(out)] == ["The user wants short answers"]
    assert list(store_files(cairn_home)) == ["global.db"]


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
    (("remember", "fine text", "--importance", "6"), "'--importance': 6 is not in the range 1<=x<=5"),
    (("remember", "fine text", "--importance", "0"), "'--importance': 0 is not in the range 1<=x<=5"),
    (("recall", "x" * 2001), "2001 characters; at most 2000"),
    (("recall", "deploy", "-k", "201"), "'-k': 201 is not in the range 1<=x<=200"),
    (("remember", "fine text", "--valid-from", "last tuesday"), "--valid-from: cannot read 'last tuesday'"),
    (("remember", "fine text", "--valid-from", "²"), "--valid-from: cannot read '²'"),  # found by bench/fuzz.py
    (("recall", "deploy", "--as-of", "١٢٣"), "--as-of: cannot read '١٢٣'"),  # digits, but not epoch ms
    (("recall", "deploy", "--as-of", "2026-13-45"), "--as-of: cannot read '2026-13-45'"),
    (("recall", "deploy", "--as-of", "yesterday"), "--as-of: cannot read 'yesterday'"),
    (("recall", "deploy", "--known-at", "soon"), "--known-at: cannot read 'soon'"),
    (("list", "--as-of", "soon"), "--as-of: cannot read 'soon'"),
    (("recall", ""), "query is empty"),
    (("recall", "  \t "), "query is empty"),
    (("remember", "fine text", "--store", "../escape", "--create"), "invalid store name"),
    (("remember", "fine text", "--store", "a/b", "--create"), "invalid store name"),
    (("remember", "fine text", "--replaces", "01NOSUCHMEMORY"), "no memory"),
    (("scope", "01NOSUCHMEMORY"), "no memory"),
    (("scope", "01NOSUCHMEMORY", "--reset-learned"), "no memory"),
    (("config",), "Missing option '--client'. Choose from: claude, opencode, cursor, codex, generic"),
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


# -- one composition root: defaults come from the config, the same for every entry point ------------
def test_recall_and_list_defaults_come_from_the_config(cairn, cairn_home, tmp_path, monkeypatch):
    for i in range(4):
        assert cairn("remember", f"Deploy note {i}: the deploy job waits for the smoke tests {i}",
                     "--no-detect", "--keyword-only")[0] == 0
    config = tmp_path / "config.yaml"
    config.write_text("recall: {k: 2}\nlist: {limit: 3}\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    assert len(json.loads(cairn("recall", "deploy note", "--keyword-only", "--json")[1])) == 2
    assert len(json.loads(cairn("recall", "deploy note", "--keyword-only", "-k", "4", "--json")[1])) == 4
    assert len(json.loads(cairn("list", "--json")[1])) == 3
    _, out, err = cairn("list")
    assert out.count("Deploy note") == 3 and "(the newest 3; --limit N for more)" in err
    assert "--limit N" not in cairn("list", "--limit", "10")[2]


def test_an_invalid_yaml_config_is_one_line_naming_the_file_and_place(cairn, tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text("recall:\n  k: [1,\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    code, _, err = cairn("status")
    assert code == 2
    assert err.count("\n") == 1 and str(config) in err and "not valid YAML at line" in err


def test_stores_create_says_when_the_store_already_exists(cairn):
    code, out, _ = cairn("stores", "create", "client-acme", "--json")
    assert code == 0 and json.loads(out)["created"] is True
    code, out, _ = cairn("stores", "create", "client-acme", "--json")
    assert code == 0 and json.loads(out)["created"] is False
    code, out, _ = cairn("stores", "create", "client-acme")
    assert "already exists" in out


# -- review from the CLI ---------------------------------------------------------------------------
def test_review_lists_a_queued_conflict_and_applies_the_users_verdict(cairn):
    older = json.loads(cairn("remember", "Deploys go through blue-green on Fly; never restart the DB in business hours",
                             "--kind", "decision", "--json")[1])["memory"]["id"]
    made = json.loads(cairn("remember", "We deploy with blue-green on Fly and never restart the database during "
                            "business hours", "--kind", "decision", "--json")[1])
    newer = made["memory"]["id"]
    assert [c["id"] for c in made["conflicts"]] == [older]  # similar, no statement of change: both current
    assert [r["id"] for r in made["related"]] == [older] and made["conflicts"][0]["restatement"]

    code, out, _ = cairn("review", "list", "--json")
    listing = json.loads(out)
    assert code == 0 and listing["count"] == 1
    proposal = listing["proposals"][0]
    # a restatement: queued as a cluster in which the user chooses the text that stays
    assert (proposal["type"], [s["id"] for s in proposal["sources"]]) == ("near_duplicate", [older, newer])
    code, out, _ = cairn("review", "list")
    assert code == 0 and proposal["id"] in out and "near_duplicate" in out
    code, out, _ = cairn("review", "show", proposal["id"])
    assert code == 0 and older in out and newer in out and "approve:" in out

    code, _, err = cairn("review", "decide", proposal["id"], "edit")
    assert code == 2 and "edit needs the text" in err
    code, out, _ = cairn("review", "decide", proposal["id"], "reject", "--json")
    assert code == 0 and json.loads(out)["state"] == "rejected"
    assert json.loads(cairn("review", "list", "--json")[1])["count"] == 0
    code, _, err = cairn("review", "decide", proposal["id"], "approve")
    assert code == 2 and "already rejected by cli" in err and "nothing was changed" in err
    assert json.loads(cairn("show", older, "--json")[1])["status"] == "current"
    code, out, _ = cairn("review", "list", "--state", "rejected", "--json")
    assert [p["id"] for p in json.loads(out)["proposals"]] == [proposal["id"]]


def test_maintain_is_a_dry_run_until_apply(cairn, tmp_path):
    # remember and import refuse a punctuation variant now; a store from before schema 10 may hold one.
    from cairn import Cairn

    a = json.loads(cairn("remember", "Tabs, not spaces.", "--kind", "preference", "--json")[1])
    with Cairn.open(embedder=None) as memory:
        b = {"memory": {"id": legacy(memory, "tabs not spaces", "preference").id}}
    code, out, _ = cairn("maintain", "--json")
    report = json.loads(out)
    assert code == 0 and report["dry_run"] and report["exact_duplicates"][0]["duplicates"] == [b["memory"]["id"]]
    assert json.loads(cairn("show", b["memory"]["id"], "--json")[1])["status"] == "current"
    code, out, _ = cairn("maintain")
    assert code == 0 and "dry run, nothing written" in out and "exact duplicate of" in out
    code, _, err = cairn("maintain", "--safe-only")
    assert code == 2 and "--safe-only goes with --apply" in err
    code, out, _ = cairn("maintain", "--apply", "--json")
    assert code == 0 and json.loads(out)["retired"] == 1
    shown = json.loads(cairn("show", b["memory"]["id"], "--json")[1])
    assert shown["status"] == "superseded" and shown["superseded_by"] == a["memory"]["id"]
    code, out, _ = cairn("maintain", "--status", "--json")
    assert code == 0 and json.loads(out)["last_run"]["retired"] == 1


def test_maintain_all_covers_every_store(cairn, cairn_home, tmp_path):
    from cairn import Cairn

    for name in ("one", "two"):  # each with a punctuation variant a store from before schema 10 may hold
        assert cairn("remember", "Run the linter before pushing.", "--store", name, "--create", "--no-detect",
                     "--kind", "fact")[0] == 0
        with Cairn.open(name, embedder=None) as memory:
            legacy(memory, "run the linter before pushing", "fact")
    code, out, _ = cairn("maintain", "--all", "--apply", "--json")
    reports = json.loads(out)["stores"]
    assert code == 0 and sorted(r["store"] for r in reports) == ["one", "two"]
    assert [r["retired"] for r in reports] == [1, 1]
    code, _, err = cairn("maintain", "--all", "--store", "one")
    assert code == 2 and "exclude each other" in err


def test_cold_memories_are_listed_and_recalled_with_include_cold_and_promoted_back(cairn):
    from cairn import Cairn

    made = json.loads(cairn("remember", "The legacy FTP server is called ferret", "--importance", "1",
                            "--json")[1])["memory"]["id"]
    with Cairn.open(embedder=None) as memory:
        memory.set_cold(made, True)
    assert cairn("list", "--json")[1].strip() == "[]"
    assert [m["id"] for m in json.loads(cairn("list", "--include-cold", "--json")[1])] == [made]
    assert json.loads(cairn("recall", "legacy FTP server", "--json")[1]) == []
    assert [h["memory"]["id"] for h in json.loads(cairn("recall", "legacy FTP server", "--include-cold",
                                                        "--json")[1])] == [made]
    code, out, _ = cairn("review", "promote", made)
    assert code == 0 and f"promoted {made}" in out
    assert [m["id"] for m in json.loads(cairn("list", "--json")[1])] == [made]


# -- parse once: remember and import apply the same rules ------------------------------------------
def _record(**overrides) -> str:
    base = {"id": "01J0000000000000000000000A", "text": "Deploys run from tags", "kind": "fact", "importance": 3,
            "source": "import", "valid_from": 1_700_000_000_000, "recorded_at": 1_700_000_000_000, "tags": []}
    return json.dumps({**base, **overrides}) + "\n"


def test_import_normalises_tags_as_remember_does(cairn, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(_record(tags=["Deploy", "PROD"]))
    assert cairn("import", str(path))[0] == 0
    code, out, _ = cairn("list", "--tag", "deploy", "--json")
    assert [m["tags"] for m in json.loads(out)] == [["deploy", "prod"]]


def test_import_refuses_a_tag_remember_refuses(cairn, tmp_path, cairn_home):
    path = tmp_path / "in.jsonl"
    path.write_text(_record(tags=["Deploy Prod"]))
    code, _, err = cairn("import", str(path))
    assert code == 2 and "line 1" in err and "invalid tag 'Deploy Prod'" in err
    code, _, err = cairn("remember", "x y", "--tags", "ok", "--tags", "Deploy Prod")
    assert code == 2


def test_import_names_every_problem_of_a_record_at_once(cairn, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(_record(kind="opinion", importance=9, source="rumour", tags=["a b"], valid_from="yesterday"))
    code, _, err = cairn("import", str(path))
    assert code == 2
    for problem in ("unknown kind 'opinion'", "importance must be", "unknown source 'rumour'", "invalid tag 'a b'",
                    "valid_from must be epoch milliseconds"):
        assert problem in err, problem


def test_remember_names_every_problem_at_once(cairn):
    from cairn import Cairn, InvalidMemory

    with Cairn.open(embedder=None) as memory, pytest.raises(InvalidMemory) as error:
        memory.remember("", kind="opinion", importance=0, tags=["a b"])
    for problem in ("empty", "unknown kind", "importance must be", "invalid tag"):
        assert problem in str(error.value), problem


# -- fast where people wait, honest when they look --------------------------------------------------
READ_ONLY = [("recall", "deploy"), ("list",), ("history", "01J0000000000000000000000A"),
             ("show", "01J0000000000000000000000A"), ("status",), ("export",), ("review", "list"), ("maintain",),
             ("recall", "deploy", "--keyword-only", "--json"), ("status", "--json")]


@pytest.mark.parametrize("args", READ_ONLY, ids=[" ".join(a) for a in READ_ONLY])
def test_read_only_commands_never_create_a_store(cairn, cairn_home, args):
    code, out, err = cairn(*args)
    assert store_files(cairn_home) == {}
    if args[0] in ("history", "show"):
        assert code == 2 and "no memory" in err
    else:
        assert code == 0, err


def test_a_store_that_does_not_exist_answers_as_empty(cairn, cairn_home):
    assert cairn("recall", "deploy")[1] == "no memories match\n"
    assert cairn("list")[1] == "no memories match\n"
    code, out, _ = cairn("status")
    assert code == 0 and "does not exist yet" in out and str(cairn_home / "stores") in out
    info = json.loads(cairn("status", "--json")[1])
    assert info["exists"] is False and info["counts"]["total"] == 0 and info["bytes"] == 0
    assert json.loads(cairn("review", "list", "--json")[1])["count"] == 0
    assert store_files(cairn_home) == {}
    assert cairn("remember", "The first memory creates the store")[0] == 0  # writes still create it
    assert len(store_files(cairn_home)) == 1
    assert json.loads(cairn("status", "--json")[1])["exists"] is True


def test_list_says_when_nothing_matches(cairn):
    cairn("remember", "A memory tagged deploy", "--tags", "deploy", "--keyword-only")
    assert cairn("list", "--tag", "nothing")[1] == "no memories match\n"


def test_recall_leaves_out_unrelated_filler(project, hashing):
    from cairn import VECTOR_FLOOR, Cairn, Draft

    with Cairn.open(cwd=project, embedder=hashing) as memory:
        memory.remember_many([Draft("alpha beta"), Draft("beta alpha gamma")], detect=False)
        # No word in common: the vector side returns both memories with cosine 0, which is no evidence.
        assert memory.recall("delta epsilon") == []
        hits = memory.recall("alpha")
        assert len(hits) == 2 and all("bm25" in h.reasons for h in hits)
    assert 0 < VECTOR_FLOOR < 0.3


def test_recall_with_the_real_model_answers_nothing_for_an_unrelated_query(cairn):
    cairn("remember", "Deploys go through blue-green on Fly; never restart the DB in business hours")
    cairn("remember", "Use pytest with the -x flag in CI")
    code, out, _ = cairn("recall", "banana bread recipe with walnuts", "--json")
    assert code == 0 and json.loads(out) == []
    hits = json.loads(cairn("recall", "how do we release to prod without downtime?", "--json")[1])
    assert hits and "blue-green" in hits[0]["memory"]["text"]  # related without a shared word: still found


def test_replaces_keeps_the_old_tags_kind_and_importance_unless_given(cairn):
    old = json.loads(cairn("remember", "Deploys go through blue-green on Fly", "--kind", "decision", "--tags",
                           "deploy,infra", "--importance", "5", "--json")[1])["memory"]
    new = json.loads(cairn("remember", "We now deploy with Kamal", "--replaces", old["id"], "--json")[1])
    assert new["superseded"] == [old["id"]]
    assert (new["memory"]["kind"], new["memory"]["tags"], new["memory"]["importance"]) == ("decision",
                                                                                           ["deploy", "infra"], 5)
    newer = json.loads(cairn("remember", "We deploy with Kamal 2", "--replaces", new["memory"]["id"], "--tags",
                             "kamal", "--kind", "fact", "--json")[1])["memory"]
    assert (newer["kind"], newer["tags"], newer["importance"]) == ("fact", ["kamal"], 5)
    plain = json.loads(cairn("remember", "An unrelated fact about ports", "--json")[1])["memory"]
    assert (plain["kind"], plain["tags"], plain["importance"]) == ("fact", [], 3)


def test_edit_saves_the_edited_text_as_a_replacement(cairn, monkeypatch):
    old = json.loads(cairn("remember", "The API listens on port 8080", "--tags", "api", "--json")[1])["memory"]
    monkeypatch.setattr("click.edit", lambda text, **_: text)  # saved unchanged
    code, out, _ = cairn("edit", old["id"])
    assert code == 0 and "unchanged" in out
    assert json.loads(cairn("list", "--json")[1])[0]["id"] == old["id"]
    monkeypatch.setattr("click.edit", lambda text, **_: None)  # closed without saving
    assert "unchanged" in cairn("edit", old["id"])[1]

    monkeypatch.setattr("click.edit", lambda text, **_: text.replace("8080", "9090") + "\n")
    code, out, _ = cairn("edit", old["id"], "--json")
    done = json.loads(out)
    assert code == 0 and done["changed"] is True and done["superseded"] == [old["id"]]
    assert done["memory"]["text"] == "The API listens on port 9090" and done["memory"]["tags"] == ["api"]
    code, _, err = cairn("edit", old["id"])
    assert code == 2 and "not current" in err


def test_an_edit_that_is_refused_is_kept_in_a_file_the_error_names(cairn, monkeypatch, tmp_path):
    import re

    old = json.loads(cairn("remember", "The API listens on port 8080", "--json")[1])["memory"]
    long_edit = "The API listens on port 9090. " + "More words the user typed. " * 400
    monkeypatch.setattr("click.edit", lambda text, **_: long_edit)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    code, _, err = cairn("edit", old["id"])
    assert code == 2 and "the limit is" in err and "nothing was written" in err
    kept = Path(re.search(r"your edited text is in (\S+)", err).group(1))
    assert kept.read_text() == long_edit and (kept.stat().st_mode & 0o777) == 0o600
    assert json.loads(cairn("list", "--json")[1])[0]["text"] == "The API listens on port 8080"


def test_stores_delete_asks_and_deletes_the_files(cairn, cairn_home, monkeypatch):
    assert cairn("stores", "create", "scratch")[0] == 0
    assert cairn("remember", "A scratch note", "--store", "scratch", "--keyword-only")[0] == 0
    path = cairn_home / "stores" / "scratch.db"
    code, _, err = cairn("stores", "delete", "scratch")  # no terminal and no --yes: refused
    assert code == 2 and "--yes" in err and path.exists()
    monkeypatch.setattr("cairn.adapters.cli._common._interactive", lambda: True)
    code, _, err = cairn("stores", "delete", "scratch", stdin="n\n")
    assert code == 1 and path.exists()
    code, out, _ = cairn("stores", "delete", "scratch", stdin="y\n")
    assert code == 0 and "deleted store scratch" in out
    assert not any(p.name.startswith("scratch.db") for p in (cairn_home / "stores").iterdir())
    code, _, err = cairn("stores", "delete", "scratch", "--yes")
    assert code == 2 and "does not exist" in err


def test_stores_rename_moves_files_and_recorded_name(cairn, cairn_home):
    assert cairn("stores", "create", "old-name")[0] == 0
    assert cairn("stores", "create", "taken")[0] == 0
    mid = json.loads(cairn("remember", "Kept across the rename", "--store", "old-name", "--keyword-only",
                           "--json")[1])["memory"]["id"]
    code, _, err = cairn("stores", "rename", "old-name", "taken")
    assert code == 2 and "already exists" in err
    code, _, err = cairn("stores", "rename", "missing", "other")
    assert code == 2 and "does not exist" in err
    code, _, renamed_err = cairn("stores", "rename", "old-name", "new-name")
    assert code == 0 and "will no longer find it" not in renamed_err  # a named store belongs to no folder
    assert not (cairn_home / "stores" / "old-name.db").exists()
    rows = {s["name"]: s for s in json.loads(cairn("stores", "--json")[1])["stores"]}
    assert "old-name" not in rows and rows["new-name"]["current"] == 1
    shown = json.loads(cairn("show", mid, "--store", "new-name", "--json")[1])
    assert shown["store"] == "new-name"


def test_renaming_a_projects_store_says_how_the_project_finds_it_again(cairn, project):
    store = json.loads(cairn("remember", "A project fact", "--keyword-only", "--json")[1])["memory"]["store"]
    code, out, err = cairn("stores", "rename", store, "renamed-project")
    assert code == 0 and out.startswith(f"renamed store {store} to renamed-project")
    assert f"{project.resolve()} will no longer find it by its folder; set CAIRN_STORE=renamed-project" in err


def test_a_cairn_config_naming_a_missing_file_is_an_error(cairn, tmp_path, monkeypatch, cairn_home):
    missing = tmp_path / "typo-config.yaml"
    monkeypatch.setenv("CAIRN_CONFIG", str(missing))
    code, _, err = cairn("status")
    assert code == 2 and err == f"cairn: error: CAIRN_CONFIG names {missing}, which does not exist\n"
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    monkeypatch.setenv("CAIRN_CONFIG", str(empty))
    assert cairn("status", "--json")[0] == 0


@pytest.mark.model  # sentence-transformers (PyTorch) is what finds the model missing
def test_status_says_keyword_only_when_the_model_cannot_load(cairn, tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text(f"embedding: {{model: {tmp_path / 'no-such-model'}}}\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    info = json.loads(cairn("status", "--json")[1])
    assert info["keyword_only"] is True and "cannot load embedding model" in info["keyword_only_reason"]
    code, out, _ = cairn("status")
    assert "KEYWORD-ONLY" in out
    ok = json.loads(cairn("status", "--json", "--store", "other", "--create")[1])
    assert ok["keyword_only"] is True  # the same configuration, whatever the store


@pytest.mark.model  # sentence-transformers (PyTorch) is what finds the model missing
def test_status_reports_a_store_embedded_with_another_model_rather_than_failing(cairn, tmp_path, monkeypatch):
    assert cairn("remember", "Deploys go through blue-green on Fly")[0] == 0  # vectors of the default model
    config = tmp_path / "config.yaml"
    config.write_text(f"embedding: {{model: {tmp_path / 'no-such-model'}}}\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    code, _, err = cairn("remember", "We now deploy with Kamal")
    assert code != 0 and "cairn reembed" in err  # the write is refused ...
    code, out, _ = cairn("status")
    assert code == 0 and "MISMATCH  the store's vectors come from sentence-transformers/all-MiniLM-L6-v2" in out
    info = json.loads(cairn("status", "--json")[1])  # ... and status says why
    assert info["store_embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert info["embedding_model"] == str(tmp_path / "no-such-model")


def test_status_with_the_model_is_not_keyword_only(cairn):
    info = json.loads(cairn("status", "--json")[1])
    assert info["keyword_only"] is False and info["model_loaded"] is True


def test_status_timings_says_where_the_time_went(cairn):
    cairn("remember", "A memory to search", "--keyword-only")
    code, out, _ = cairn("status", "--timings")
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("time ")]
    names = " | ".join(lines)
    for part in ("interpreter and imports", "config and store resolution", "store open", "model", "sample search"):
        assert part in names, part
    timings = json.loads(cairn("status", "--timings", "--json")[1])["timings_ms"]
    assert all(v >= 0 for v in timings.values()) and "sample search" in timings


def test_loading_notice_only_on_a_terminal(cairn, monkeypatch):
    from cairn.adapters.cli import LOADING_NOTICE

    code, _, err = cairn("remember", "A memory embedded in this process")
    assert code == 0 and err == ""  # not a terminal: nothing on stderr
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    code, _, err = cairn("recall", "memory embedded")
    assert code == 0 and err == LOADING_NOTICE + "\n"
    code, _, err = cairn("recall", "memory embedded", "--keyword-only")
    assert code == 0 and err == ""  # no model, no notice


def test_stores_json_names_the_data_root(cairn, cairn_home):
    cairn("remember", "Deploys go through blue-green on Fly", "--keyword-only")
    code, out, _ = cairn("stores", "--json")
    listing = json.loads(out)
    assert code == 0 and set(listing) == {"data_root", "current", "stores"}
    assert listing["data_root"] == str(cairn_home) and [s["name"] for s in listing["stores"]] == [listing["current"]]


def test_comma_separated_tags_filter_recall_and_list(cairn):
    cairn("remember", "Deploys go through blue-green on Fly", "--tags", "deploy,ops", "--keyword-only")
    cairn("remember", "Tests run with pytest", "--tags", "testing", "--keyword-only")
    code, out, _ = cairn("list", "--tag", "ops,testing", "--json")
    assert code == 0 and len(json.loads(out)) == 2
    code, out, _ = cairn("recall", "deploys", "--tag", "deploy,nothing", "--keyword-only", "--json")
    assert [h["memory"]["tags"] for h in json.loads(out)] == [["deploy", "ops"]]


def test_a_hook_run_by_hand_logs_to_hooks_log_not_the_terminal(cairn_home, project):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "cairn", "hook", "UserPromptSubmit"], input=b"garbage{",
                         capture_output=True, cwd=project, timeout=120)
    assert out.returncode == 0 and out.stdout == b"" and out.stderr == b""  # fails open, quietly
    log = (cairn_home / "logs" / "hooks.log").read_text()
    assert "UserPromptSubmit hook failed open: its input is not JSON" in log


def test_a_duplicate_of_another_kind_says_so_and_how_to_change_it(cairn):
    first = json.loads(cairn("remember", "Run the linter before pushing", "--kind", "convention",
                             "--keyword-only", "--json")[1])["memory"]["id"]
    code, out, _ = cairn("remember", "Run the linter before pushing.", "--kind", "fact", "--keyword-only")
    assert code == 0 and out.startswith(f"already remembered as {first} (a convention, not a fact: nothing was written")
    assert f"--replaces {first} --kind fact" in out
    assert cairn("remember", "Run the linter before pushing", "--keyword-only")[1] == f"already remembered as {first}\n"


def test_help_lists_each_command_with_its_whole_first_sentence():
    from click.testing import CliRunner

    from cairn.adapters.cli import cli

    out = CliRunner().invoke(cli, ["--help"], terminal_width=200).output
    assert "..." not in out.split("Commands:")[1]
    assert "Copy a store into <data root>/backups/NAME-<UTC time>.db, consistent while sessions write" in out


def test_counts_are_in_the_right_number():
    from cairn.adapters.cli import _count

    assert [_count(1, "time"), _count(2, "time"), _count(1, "memory", "memories"), _count(0, "memory", "memories")] \
        == ["1 time", "2 times", "1 memory", "0 memories"]


def test_six_restatements_from_the_cli_make_one_proposal_under_one_heading(cairn):
    """Issue 31: written one by one from the terminal, then maintenance: 1 proposal, 1 heading."""
    texts = ["Run ruff check before pushing.", "Always run ruff check before you push.",
             "Before pushing, run ruff check.", "Please run ruff check prior to pushing!",
             "ruff check must pass before every push", "We run ruff check before pushing code."]
    ids = [json.loads(cairn("remember", t, "--kind", "convention", "--json")[1])["memory"]["id"] for t in texts]
    assert cairn("maintain", "--apply")[0] == 0
    code, out, _ = cairn("review", "list", "--json")
    proposals = json.loads(out)["proposals"]
    assert code == 0 and len(proposals) == 1 and len({p["subject"] for p in proposals}) == 1
    assert sorted(s["id"] for s in proposals[0]["sources"]) == sorted(ids)


@pytest.mark.parametrize("home", ["file", "empty", "relative", "unwritable"])
def test_an_unusable_data_root_is_one_clear_error_everywhere_and_a_failing_doctor_check(
        home, tmp_path, project, capsys, monkeypatch):
    """Issue 31: CAIRN_HOME naming a file, empty, relative or unwritable: exit 2 with one line, and
    `cairn doctor` fails its data root check; nothing is created."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    if home == "file":
        value = str(tmp_path / "a-file")
        (tmp_path / "a-file").write_text("not a folder")
    elif home == "empty":
        value = ""
    elif home == "relative":
        value = "cairn-data"
    else:
        if os.geteuid() == 0:
            pytest.skip("root may write any folder")
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        value = str(locked / "cairn")
    monkeypatch.setenv("CAIRN_HOME", value)
    before = sorted(p.name for p in project.iterdir())
    for args in (["remember", "Deploys go through Fly", "--keyword-only"], ["recall", "deploys", "--keyword-only"],
                 ["status"], ["list"]):
        code, out, err = run_cli(capsys, args)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (args, err)
        assert "CAIRN_HOME" in err and "Traceback" not in err
    code, out, _ = run_cli(capsys, ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 1 and checks["data root"]["status"] == "fail"
    assert sorted(p.name for p in project.iterdir()) == before  # no data root made in the project


def test_a_write_says_it_queued_for_review_only_when_it_did(cairn):
    code, out, _ = cairn("remember", "The staging database is backed up nightly", "--no-ask")
    assert code == 0 and "queued" not in out and "review" not in out
    code, out, _ = cairn("remember", "The staging database might be backed up nightly", "--no-ask")
    assert code == 0 and "related 1." in out and "queued 1 proposal for review" in out
    assert json.loads(cairn("review", "list", "--json")[1])["count"] == 1


def test_list_recall_and_remember_spell_the_tag_option_alike_and_keep_the_old_spelling(cairn):
    assert cairn("remember", "Blue-green deploys on Fly", "--tag", "deploy", "--keyword-only")[0] == 0
    assert cairn("remember", "Releases are cut on Tuesdays", "--tags", "release", "--keyword-only")[0] == 0
    for flag in ("--tag", "--tags"):
        listed = json.loads(cairn("list", flag, "deploy", "--json")[1])
        assert [m["text"] for m in listed] == ["Blue-green deploys on Fly"]
    recalled = json.loads(cairn("recall", "releases", "--tags", "release", "--keyword-only", "--json")[1])
    assert [h["memory"]["text"] for h in recalled] == ["Releases are cut on Tuesdays"]


def test_status_on_a_fresh_data_root_creates_nothing_and_starts_nothing(tmp_path, project, capsys, monkeypatch):
    """Issue 31: a read-only command leaves no data root, log folder or warm process behind."""
    monkeypatch.chdir(project)
    monkeypatch.delenv("CAIRN_NO_WARM", raising=False)
    root = tmp_path / "fresh-root"
    monkeypatch.setenv("CAIRN_HOME", str(root))
    for args in (["status"], ["list"], ["recall", "deploys", "--keyword-only"], ["review", "list"]):
        code, _, err = run_cli(capsys, args)
        assert code == 0, (args, err)
        assert not root.exists(), args


@pytest.mark.parametrize("args", [[], ["review"], ["sessions"]])
def test_a_bare_command_group_prints_its_help(capsys, args):
    code, out, err = run_cli(capsys, args)
    assert code == 0 and err == ""
    assert out.startswith(f"Usage: cairn {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND") and "\n\nOptions:" in out


def test_a_short_id_works_where_an_id_does(cairn):
    first = json.loads(cairn("remember", "We deploy with Heroku", "--kind", "decision", "--json")[1])["memory"]["id"]
    code, out, err = cairn("show", first[:12].lower())
    assert code == 0 and first in out, err
    code, out, err = cairn("remember", "--replaces", first[:12], "We deploy with Fly.io", "--json")
    assert code == 0, err
    assert json.loads(cairn("history", first[:12], "--json")[1])[0]["id"] == first
    code, _, err = cairn("show", first[:4])
    assert code == 2 and "a short id needs 6 characters or more" in err
