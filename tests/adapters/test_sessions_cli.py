"""`cairn import-sessions` and `cairn sessions search|list|show` (with --json: the rows docs/cli.md
documents), and the MCP tools memory_search_sessions and memory_sessions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cairn.adapters.claude.transcripts import encoded_project

from tests.conftest import git_init, run_cli
from tests.engine.test_sessions import AWS_KEY, conversation, line


@pytest.fixture
def cairn(project, monkeypatch, capsys, tmp_path):
    """`cairn ARGS...` in-process from the project folder, embedding off (keyword and exact search)."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    Path(os.environ["CAIRN_CONFIG"]).write_text("embedding:\n  enabled: false\n")

    def run(*args: str) -> tuple[int, str, str]:
        return run_cli(capsys, args, stdin=b"", monkeypatch=monkeypatch)

    return run


@pytest.fixture
def claude_root(tmp_path, project) -> Path:
    root = tmp_path / "claude-projects"
    folder = root / encoded_project(project.resolve())
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text("".join(conversation()).replace("/work/app", str(project)))
    (folder / "s2.jsonl").write_text(line("user", "k1", f"deploy key {AWS_KEY} please", ts="2026-03-02T08:00:00Z"))
    return root


def test_import_says_what_it_did_in_words(cairn, claude_root):
    code, out, _ = cairn("import-sessions", "--root", str(claude_root))
    assert code == 0 and out.startswith("read 2 transcripts: 6 turns added")
    assert "secrets redacted 1 (AWS Access Key 1)" in out and "{" not in out and "Counter" not in out


def test_import_then_list_search_show(cairn, claude_root):
    code, out, err = cairn("import-sessions", "--root", str(claude_root), "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["files"] == 2 and done["turns_added"] == 6 and done["redactions"] == {"AWS Access Key": 1}
    assert json.loads(cairn("import-sessions", "--root", str(claude_root), "--json")[1])["turns_added"] == 0

    rows = json.loads(cairn("sessions", "list", "--json")[1])
    assert [r["session_id"] for r in rows] == ["s2", "s1"]
    assert set(rows[1]) == {"session_id", "source", "title", "started_at", "ended_at", "turn_count", "git_branch",
                            "cwd", "transcript_path", "skipped", "redactions", "private_spans", "started_at_iso",
                            "ended_at_iso"}
    assert rows[1]["turn_count"] == 5 and rows[1]["started_at_iso"] == "2026-03-01T10:00:00.000Z"

    (result,) = json.loads(cairn("sessions", "search", "packages.find", "--window", "1", "--json")[1])
    assert set(result) == {"session_id", "score", "mode", "best", "turns", "time_window"} and result["mode"] == "exact"
    assert result["time_window"] is None
    assert [(t["uuid"], t["hit"]) for t in result["turns"]] == [("a1", False), ("a3", True), ("u2", False)]
    assert set(result["turns"][1]) == {"uuid", "position", "role", "text", "at", "speaker", "git_branch", "cwd",
                                       "meta", "at_iso", "hit"}

    code, out, _ = cairn("sessions", "search", "deploy staging", "--mode", "keyword", "-k", "1")
    assert code == 0 and "> " in out and "kamal" in out.lower() and "time window" not in out

    # A time expression: its window, counted from --reference, is ranked first and named.
    code, out, _ = cairn("sessions", "search", "deploy yesterday", "--mode", "keyword",
                         "--reference", "2026-03-02T09:00Z")
    assert code == 0 and "time window: 'yesterday' = 2026-03-01 .. 2026-03-02" in out
    results = json.loads(cairn("sessions", "search", "deploy yesterday", "--mode", "keyword", "--reference",
                               "2026-03-02T09:00Z", "--json")[1])
    assert results[0]["session_id"] == "s1" and results[0]["time_window"] == {
        "expression": "yesterday", "since": "2026-03-01T00:00:00.000Z", "until": "2026-03-02T00:00:00.000Z"}

    shown = json.loads(cairn("sessions", "show", "s1", "--offset", "3", "--limit", "5", "--json")[1])
    assert [t["uuid"] for t in shown["turns"]] == ["u2", "a4"] and shown["session"]["session_id"] == "s1"

    code, out, _ = cairn("status")
    assert "sessions  2 captured, 6 turns; secrets redacted 1 (AWS Access Key 1)" in out
    assert AWS_KEY not in out


def test_unknown_session_and_bad_mode_are_one_line_errors(cairn):
    code, _, err = cairn("sessions", "show", "nope")
    assert code == 2 and err.strip() == "cairn: error: no captured session 'nope' in store " \
        f"{err.split('in store ')[1].strip()}" and err.count("\n") == 1
    code, _, err = cairn("sessions", "search", "x", "--mode", "fuzzy")
    assert code == 2 and "fuzzy" in err


def test_import_all_projects_puts_each_into_its_own_store(cairn, claude_root, tmp_path, project):
    other = git_init(tmp_path / "other")
    folder = claude_root / encoded_project(other.resolve())
    folder.mkdir()
    (folder / "o1.jsonl").write_text(line("user", "o1", "other project prompt", cwd=str(other)).replace(
        '"cwd": "/work/app", ', ""))
    gone = claude_root / "-no-such-project"
    gone.mkdir()
    (gone / "g.jsonl").write_text(line("user", "g1", "x").replace("/work/app", "/no/such/project"))
    done = json.loads(cairn("import-sessions", "--all", "--root", str(claude_root), "--json")[1])
    assert done["projects"] == 2 and done["skipped"] == {"project folder gone": 1}
    assert [r["session_id"] for r in json.loads(cairn("sessions", "list", "--json")[1])] == ["s2", "s1"]
    os.chdir(other)
    assert [r["session_id"] for r in json.loads(cairn("sessions", "list", "--json")[1])] == ["o1"]
    os.chdir(project)


def test_locomo_import(cairn, tmp_path):
    path = tmp_path / "9.json"
    path.write_text(json.dumps({"speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
                                "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy."}]}))
    done = json.loads(cairn("import-sessions", "--locomo", str(path), "--json")[1])
    assert done == {"sessions": 1, "turns_added": 1}


def test_hits_of_one_session_merge_into_one_result_with_its_id_once(cairn, claude_root):
    assert cairn("import-sessions", "--root", str(claude_root))[0] == 0
    results = json.loads(cairn("sessions", "search", "deploy", "--mode", "keyword", "--json")[1])
    s1 = [r for r in results if r["session_id"] == "s1"]
    assert len(s1) == 1 and len(s1[0]["best"]) > 1  # several turns of s1 hit, merged into one result
    assert [t["position"] for t in s1[0]["turns"]] == sorted({t["position"] for t in s1[0]["turns"]})
    assert {t["position"] for t in s1[0]["turns"] if t["hit"]} == set(s1[0]["best"])
    assert all("session_id" not in t for t in s1[0]["turns"])  # the id once, on the result
    code, out, _ = cairn("sessions", "search", "deploy", "--mode", "keyword")
    assert code == 0
    assert out.count("session s1 ") == 1 and out.count("s1") == 1  # one result, the id shown once
    block = out.split("session s1 ")[1].split("\n2. ")[0].split("\n1. ")[0]
    positions = [int(w[1:]) for w in block.split() if w.startswith("#") and w[1:].isdigit()]
    assert positions == sorted(set(positions))  # each turn once, in order, however many windows hold it


def test_turns_far_below_the_best_are_dropped():
    from cairn import Turn, merge_session_hits
    from cairn.models import SessionHit

    def hit(session, position, score):
        turn = Turn(session_id=session, uuid=f"{session}{position}", position=position, role="user", text="t",
                    at=0, speaker=None, git_branch=None, cwd=None, meta={})
        return SessionHit(turn=turn, score=score, mode="hybrid", reasons={})

    merged = merge_session_hits([hit("a", 3, 0.032), hit("a", 1, 0.030), hit("b", 0, 0.014)])
    assert [(r.session_id, r.best) for r in merged] == [("a", (3, 1))]
