"""Captured sessions: storage apart from memories, privacy before storage, incremental ingestion of
Claude Code transcripts (bad input skipped and counted), and session search with context windows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn import Cairn, InvalidInput, SessionNotFound
from cairn.privacy.scrub import scrub
from cairn.sessions.turns import choose_mode, parse_lines

from tests.conftest import BACKENDS

AWS_KEY = "AKIA4HQ7ZN2XKW3RM5TB"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def line(kind: str, uuid: str, content, *, ts: str = "2026-03-01T10:00:00.000Z", **extra) -> str:
    return json.dumps({"type": kind, "uuid": uuid, "sessionId": "s1", "timestamp": ts, "gitBranch": "main",
                       "cwd": "/work/app", "message": {"role": kind, "content": content}, **extra}) + "\n"


def tool_use(name: str, **params) -> dict:
    return {"type": "tool_use", "id": "t", "name": name, "input": params}


def conversation() -> list[str]:
    return [
        line("user", "u1", "pytest fails with ModuleNotFoundError: No module named 'cairn_x'",
             ts="2026-03-01T10:00:00Z"),
        line("assistant", "a1", [{"type": "text", "text": "Let me look at the package layout."},
                                 tool_use("Read", file_path="/work/app/pyproject.toml")], ts="2026-03-01T10:00:01Z"),
        line("user", "r1", [{"type": "tool_result", "tool_use_id": "t", "content": "TOOL OUTPUT " * 50}],
             ts="2026-03-01T10:00:02Z"),
        line("assistant", "a2", [tool_use("Edit", file_path="/work/app/setup.cfg")], ts="2026-03-01T10:00:03Z"),
        line("assistant", "a3", [{"type": "text", "text": "Fixed: the package was missing from packages.find."}],
             ts="2026-03-01T10:00:04Z"),
        line("user", "u2", "thanks, now deploy it to staging", ts="2026-03-01T10:01:00Z"),
        line("assistant", "a4", [{"type": "text", "text": "Deployed to staging with kamal deploy."}],
             ts="2026-03-01T10:01:05Z"),
    ]


@pytest.fixture
def transcript(tmp_path) -> Path:
    path = tmp_path / "s1.jsonl"
    path.write_text("".join(conversation()))
    return path


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """The tests that store turns run on SQLite and on Postgres (marked `postgres`)."""
    return request.param


@pytest.fixture
def engine(project, hashing, use_backend):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        yield memory


# -- storage ----------------------------------------------------------------------------------------
def test_captured_turns_are_stored_apart_from_memories(engine, transcript):
    engine.remember("We deploy with Kamal", kind="decision")
    done = engine.sessions.ingest(transcript)
    assert done["turns_added"] == 5  # u1, a1, a3, u2, a4: tool output and a tool-only line are not turns
    assert [h.memory.text for h in engine.recall("deploy staging kamal")] == ["We deploy with Kamal"]
    assert engine.counts()["total"] == 1
    assert engine.status().sessions["turns"] == 5
    info, turns = engine.sessions.read("s1")
    assert [t.uuid for t in turns] == ["u1", "a1", "a3", "u2", "a4"]
    assert [t.position for t in turns] == [0, 1, 2, 3, 4]
    assert turns[0].role == "user" and turns[1].role == "assistant"
    assert turns[0].git_branch == "main" and turns[0].cwd == "/work/app"
    assert turns[0].at == 1772359200000  # 2026-03-01T10:00:00Z
    # Tool names and file paths are metadata of the assistant text before them; tool output is gone.
    assert turns[1].meta == {"tools": ["Read", "Edit"], "files": ["/work/app/pyproject.toml", "/work/app/setup.cfg"]}
    assert all("TOOL OUTPUT" not in t.text for t in turns)
    assert info.title.startswith("pytest fails with ModuleNotFoundError")
    assert info.turn_count == 5 and info.started_at == turns[0].at and info.ended_at == turns[-1].at


def test_ingesting_twice_or_after_a_restart_never_duplicates(engine, transcript, project, hashing):
    engine.sessions.ingest(transcript)
    assert engine.sessions.ingest(transcript)["turns_added"] == 0
    # Even reading the file from the start again (another path for the session) adds nothing.
    copy = transcript.with_name("copy.jsonl")
    copy.write_bytes(transcript.read_bytes())
    assert engine.sessions.ingest(copy, session_id="s1")["turns_added"] == 0
    assert engine.sessions.read("s1")[0].turn_count == 5


def test_ingestion_is_incremental_and_waits_for_a_line_still_being_written(engine, tmp_path):
    path = tmp_path / "s1.jsonl"
    lines = conversation()
    path.write_text("".join(lines[:2]) + lines[2][:40])  # the third line is half written
    assert engine.sessions.ingest(path)["turns_added"] == 2
    assert engine.status().sessions["skipped"] == {}
    path.write_text("".join(lines))
    done = engine.sessions.ingest(path)
    assert done["turns_added"] == 3 and done["skipped"] == {}
    turns = engine.sessions.read("s1")[1]
    assert [t.position for t in turns] == [0, 1, 2, 3, 4]
    # The tool call read in the second step is attached to the turn stored in the first.
    assert turns[1].meta["tools"] == ["Read", "Edit"]



def test_a_turn_is_found_by_the_words_of_the_two_turns_on_each_side_however_it_was_ingested(project, hashing, tmp_path,
                                                                                           use_backend):
    """Key expansion: a word said in one turn also finds the two turns before and after it, and a
    session captured one line at a time (a Stop hook per turn) gets the same index as read at once."""
    texts = ["alpha one", "beta two", "gamma three", "the zebra crossing", "delta four", "epsilon five",
             "zeta six"]
    lines = [line("user" if i % 2 == 0 else "assistant", f"m{i}", t, ts=f"2026-03-01T10:00:0{i}Z")
             for i, t in enumerate(texts)]
    whole, growing = tmp_path / "whole.jsonl", tmp_path / "growing.jsonl"
    whole.write_text("".join(lines))
    found = []
    for name, path in (("whole", whole), ("growing", growing)):
        with Cairn.open(name, create=True, embedder=hashing) as memory:
            if path is growing:
                for i in range(len(lines)):
                    path.write_text("".join(lines[: i + 1]))
                    memory.sessions.ingest(path, session_id="s")
            else:
                memory.sessions.ingest(path, session_id="s")
            hits = memory.sessions.search("zebra", mode="keyword", k=10)
            found.append([(h.turn.uuid, round(h.score, 9)) for h in hits])
    assert found[0] == found[1]
    assert found[0][0][0] == "m3"  # the turn itself first
    assert {uuid for uuid, _ in found[0]} == {"m1", "m2", "m3", "m4", "m5"}


def test_bad_lines_are_skipped_and_counted_and_no_good_line_is_lost(engine, tmp_path):
    good = conversation()
    junk = [
        '{"type": "user", "uuid": "x1", "message": {"content": "trunc\n',  # truncated JSON
        "not json at all\n",
        '{"type": "mystery", "uuid": "m1"}\n',
        b"\x00\xff\xfe binary \x80junk\n".decode("latin-1"),
        line("user", "big", [{"type": "tool_result", "content": "x" * 3_000_000}]),
        '[1, 2, 3]\n',
        json.dumps({"type": "user", "uuid": "sur", "message": {"content": "lone \ud800 surrogate kept"}}) + "\n",
    ]
    path = tmp_path / "s1.jsonl"
    with open(path, "wb") as f:
        for i, text in enumerate(good):
            f.write(text.encode("utf-8"))
            if i < len(junk):
                f.write(junk[i].encode("latin-1") if i == 3 else junk[i].encode("utf-8", "surrogatepass"))
    done = engine.sessions.ingest(path)
    assert done["skipped"] == {"malformed": 4, "unknown type": 1}
    texts = [t.text for t in engine.sessions.read("s1")[1]]
    assert len(texts) == 6  # the five good turns and the one with a lone surrogate
    assert "lone ? surrogate kept" in texts
    assert engine.status().sessions["skipped"] == {"malformed": 4, "unknown type": 1}


def test_an_enormous_line_is_skipped_unread(engine, tmp_path, monkeypatch):
    import cairn.sessions.sessions_api

    monkeypatch.setattr(cairn.sessions.sessions_api, "TRANSCRIPT_CHUNK_BYTES", 4096)
    lines = conversation()
    huge = line("user", "huge", "y" * 10_000)
    path = tmp_path / "s1.jsonl"
    path.write_text(lines[0] + huge + "".join(lines[1:]))
    done = engine.sessions.ingest(path)
    assert done["skipped"] == {"oversized": 1} and done["turns_added"] == 5


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_any_bytes_never_crash_the_parser(data):
    parsed = parse_lines(data + b"\n")
    assert sum(parsed.skipped.values()) + len(parsed.turns) <= data.count(b"\n") + 1


def test_an_unreadable_transcript_is_one_clear_error(engine, tmp_path):
    with pytest.raises(InvalidInput, match="cannot read transcript"):
        engine.sessions.ingest(tmp_path / "missing.jsonl")


# -- privacy ----------------------------------------------------------------------------------------
def test_private_spans_are_stripped_across_lines_and_inside_code_fences():
    text = ("keep this <private>my home\naddress is 12 Elm St</private> and this\n"
            "```\nconfig = 1  # <private>internal hostname db7.corp</private>\n```\n<PRIVATE>unclosed secret")
    out = scrub(text)
    assert "12 Elm St" not in out.text and "db7.corp" not in out.text and "unclosed" not in out.text
    assert "keep this" in out.text and "and this" in out.text and "config = 1" in out.text
    assert out.private_spans == 3


def test_secrets_are_redacted_and_only_counted():
    text = (f"my aws key is {AWS_KEY}\ntoken {GITHUB_TOKEN}\npassword = \"correct-horse-battery\"\n"
            "db at postgres://admin:s3cr3tpass@db.example.com/app\n"
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabcdef\n-----END RSA PRIVATE KEY-----\nafter the key")
    out = scrub(text)
    for secret in (AWS_KEY, GITHUB_TOKEN, "correct-horse-battery", "s3cr3tpass", "MIIEowIBAAKCAQEA7", "abcdef"):
        assert secret not in out.text
    assert "after the key" in out.text and "postgres://admin:" in out.text
    assert dict(out.redactions) == {"AWS Access Key": 1, "GitHub Token": 1, "Secret Keyword": 1,
                                    "Basic Auth Credentials": 1, "Private Key": 1}
    assert "[REDACTED:AWS Access Key]" in out.text


# Secrets detect-secrets' own detectors miss, found by Cairn's (cairn/privacy/secret_detectors.py) or the
# vendored rule sets (Betterleaks', Microsoft's: cairn/privacy/secret_rules.py); each made up here, in the
# provider's published format.
ANTHROPIC_KEY = "sk-ant-api03-" + ("Qx7Lm2Vb9Tn4Rc8Wd1Fy6Hj3Kp5Zs0Ge" * 3)[:93] + "AA"
OPENAI_PROJECT_KEY = ("sk-proj-" + ("Nf3Ud8Rk1Wm6Yq9Bt4Hc7Jp2Lx5Va0Se" * 3)[:74] + "T3BlbkFJ"
                      + ("Qx7Lm2Vb9Tn4Rc8Wd1Fy6Hj3Kp5Zs0Ge" * 3)[:74])


@pytest.mark.parametrize(("line", "secret", "kind", "kept"), [
    (f"the key is {ANTHROPIC_KEY} for CI", ANTHROPIC_KEY, "Anthropic Api Key", "for CI"),
    (f"use {OPENAI_PROJECT_KEY} in the notebook", OPENAI_PROJECT_KEY, "OpenAI Token", "in the notebook"),
    ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ3kd9", "wJalrXUtnFEMI",
     "Secret Assignment", "export AWS_SECRET_ACCESS_KEY="),
    ("PGPASSWORD=hunter2secret psql -h db", "hunter2secret", "Secret Assignment", "psql -h db"),
    ("the staging password: Tr0ub4dor&3 (rotate it)", "Tr0ub4dor&3", "Password In Prose", "(rotate it)"),
    ("the password is hunter22 for now", "hunter22", "Password In Prose", "for now"),
    ("The DB password for staging is Xy7!qPz9", "Xy7!qPz9", "Password In Prose", "for staging is"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ3kd9", "wJalrXUtnFEMI", "Secret Assignment",
     "aws_secret_access_key = "),
    ("DB_PASS=Sup3rS3cret for the replica", "Sup3rS3cret", "Secret Assignment", "for the replica"),
    ("MYSQL_PWD=hunter2x mysql -u app", "hunter2x", "Secret Assignment", "mysql -u app"),
    ("key AIzaSyB7kQ2mX9vR4tL8wP3nJ6hF1cD5gZ0eT2y here", "AIzaSyB7kQ2mX9vR4", "Gcp Api Key", "here"),
    ("npm_x7lk2vb9rt4wm8np3hc6jd1fs5gz0ye2uaq9 in .npmrc", "npm_x7lk2vb9rt", "Npm Access Token", "in .npmrc"),
])
def test_secrets_beyond_detect_secrets_own_are_redacted(line, secret, kind, kept):
    out = scrub(line)
    assert secret not in out.text
    assert f"[REDACTED:{kind}]" in out.text and kept in out.text
    assert out.redactions[kind] == 1


@pytest.mark.parametrize("line", [
    # Detectors that match a fixed-length part of a longer token: the whole token goes. (Fixtures are
    # random-looking: an alphabet run like "abcdefgh" is a documented placeholder, kept as written.)
    "stripe sk_live_51H8Kq8Vn3Lr7Tx2Wm9Pz4Hb6Yc1Jd5Fs0Gk8Qa3Nr7Uw2EsD4Vf6Bg9Hj2Kl5Mn8Pq1Rs4Tv here",
    "export GITHUB_TOKEN=ghp_R7tY2uI9oP4aS8dF3gH6jK1lZ5xC0vB2nM7q here",
    "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "Kq8Vn3Lr7Tx2Wm9Pz4Hb6Yc1Jd5Fs0Gk8Qa3Nr7Uw2E here",
])
def test_no_part_of_a_token_survives_its_redaction(line):
    out = scrub(line).text
    assert out.endswith(" here") and out.count("[REDACTED:") == 1
    token = line.split()[1].split("=")[-1]
    assert not any(token[i:i + 6] in out for i in range(len(token) - 5))


def test_text_after_a_one_line_private_key_is_kept():
    out = scrub("-----BEGIN RSA PRIVATE KEY----- MIIEowIBAAKCAQEA7 -----END RSA PRIVATE KEY----- after key")
    assert out.text == "[REDACTED:Private Key] after key"


@pytest.mark.parametrize("text", [
    "the password reset flow sends an email; a password is required",
    "set DATABASE_PASSWORD in the vault, never in the repo",
    "TOKEN_TTL=3600 and USE_TOKEN=true and DB_PASSWORD=$DB_PASS and API_KEY=${KEY}",
    "GITHUB_TOKEN=<your token here> or X_TOKEN={{ secrets.X }}",
    "sk-ant- is the prefix of Anthropic keys",
    "SESSION_TOKEN_TTL=3600s MAX_TOKENS=4096k CSRF_TOKEN_HEADER=X-CSRF-Token SECRET_KEY_BASE=TRUE",
    "the pwd is /home/alice/src2 and PASSPORT_ID=AB123456 and COMPASS_URL=https://compass.example",
])
def test_settings_references_and_placeholders_are_not_secrets(text):
    assert scrub(text).text == text


def test_ordinary_identifiers_are_not_redacted():
    text = "commit 3f2a9bc1d7e4a7b8c9d0e1f2a3b4c5d6e7f8a9b0 fixed test_user_login in src/auth.py"
    assert scrub(text).text == text


def test_nothing_private_or_secret_reaches_the_store_file(engine, tmp_path, use_backend):
    path = tmp_path / "s2.jsonl"
    path.write_text(line("user", "p1", f"use key {AWS_KEY} <private>codename bluebird</private> to deploy"))
    engine.sessions.ingest(path)
    where = engine.status().path
    engine.close()
    if use_backend == "postgres":  # every row of the store's tables, every file of the server's data directory
        from tests.engine.test_private_memories import server_bytes

        raw = server_bytes(os.environ["CAIRN_POSTGRES_URL"], where.removeprefix("postgres:"))
        assert b"to deploy" in raw
    else:
        db = Path(where)
        raw = b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))
    assert len(raw) > 10_000
    assert AWS_KEY.encode() not in raw and b"bluebird" not in raw
    with Cairn.open(cwd=Path(engine.choice.project_root), embedder=None) as again:
        sessions = again.status().sessions
        assert sessions["redactions"] == {"AWS Access Key": 1} and sessions["private_spans"] == 1
        assert again.sessions.read("s2")[1][0].text == "use key [REDACTED:AWS Access Key]  to deploy"


# -- search -----------------------------------------------------------------------------------------
def test_auto_mode_picks_exact_for_quoted_strings_and_identifiers():
    assert choose_mode('"No module named cairn_x"') == ("exact", "No module named cairn_x")
    assert choose_mode("src/app/main.py") == ("exact", "src/app/main.py")
    assert choose_mode("ERR_CONNECTION_REFUSED") == ("exact", "ERR_CONNECTION_REFUSED")
    assert choose_mode("E0425") == ("exact", "E0425")
    assert choose_mode("packages.find") == ("exact", "packages.find")
    assert choose_mode("how did we deploy to staging") == ("hybrid", "how did we deploy to staging")


def test_exact_search_finds_the_error_with_its_context_window(engine, transcript):
    engine.sessions.ingest(transcript)
    hits = engine.sessions.search("\"No module named 'cairn_x'\"", window=1)
    assert [h.turn.uuid for h in hits] == ["u1"] and hits[0].mode == "exact"
    assert hits[0].before == () and [t.uuid for t in hits[0].after] == ["a1"]
    hits = engine.sessions.search("packages.find", mode="exact", window=2)
    assert [h.turn.uuid for h in hits] == ["a3"]
    assert [t.uuid for t in hits[0].before] == ["u1", "a1"] and [t.uuid for t in hits[0].after] == ["u2", "a4"]


def test_keyword_semantic_and_hybrid_rank_turns_only(engine, transcript):
    engine.sessions.ingest(transcript)
    for mode in ("keyword", "semantic", "hybrid", "auto"):
        hits = engine.sessions.search("deployed staging kamal", mode=mode, k=2, window=0)
        assert hits[0].turn.uuid == "a4", mode
        assert all(h.before == () and h.after == () for h in hits)
        assert len(hits) <= 2
    assert engine.sessions.search("staging", mode="keyword")[0].reasons["bm25"]["rank"] == 1


def test_an_identifier_that_no_turn_contains_falls_back_to_hybrid(engine, transcript):
    engine.sessions.ingest(transcript)
    hits = engine.sessions.search("deploy_to_staging")
    assert hits and hits[0].mode == "hybrid"


def test_a_pasted_error_message_is_found_as_written(engine, transcript):
    engine.sessions.ingest(transcript)
    hits = engine.sessions.search("ModuleNotFoundError: No module named 'cairn_x'", window=0)
    assert [h.turn.uuid for h in hits] == ["u1"] and hits[0].mode == "exact"
    # Pasted but held by no turn: searched by keyword and meaning instead.
    assert engine.sessions.search("ModuleNotFoundError: No module named 'other'")[0].mode == "hybrid"


def test_semantic_search_returns_no_filler_for_what_no_turn_is_about(engine, transcript):
    engine.sessions.ingest(transcript)
    assert engine.sessions.search("zyxwquartz plover", mode="semantic") == []
    assert engine.sessions.search("zyxwquartz plover", mode="hybrid") == []


def test_search_is_bounded_by_time(engine, transcript):
    engine.sessions.ingest(transcript)
    assert [h.turn.uuid for h in engine.sessions.search("staging", mode="keyword", since="2026-03-01T10:01:02Z")] \
        == ["a4"]
    assert engine.sessions.search("staging", mode="exact", until="2026-03-01T10:00:30Z") == []


def test_bad_search_arguments_are_clear_errors(engine):
    with pytest.raises(InvalidInput, match="query is empty"):
        engine.sessions.search("  ")
    with pytest.raises(InvalidInput, match="unknown mode"):
        engine.sessions.search("x", mode="fuzzy")
    with pytest.raises(SessionNotFound):
        engine.sessions.read("nope")


def test_the_catalog_lists_sessions_and_pages_through_one(engine, transcript, tmp_path):
    engine.sessions.ingest(transcript)
    later = tmp_path / "s9.jsonl"
    later.write_text(line("user", "z1", "second session", ts="2026-03-05T09:00:00Z"))
    engine.sessions.ingest(later)
    assert [s.session_id for s in engine.sessions.catalog()] == ["s9", "s1"]
    assert [s.session_id for s in engine.sessions.catalog(until="2026-03-02")] == ["s1"]
    info, page = engine.sessions.read("s1", offset=2, limit=2)
    assert [t.uuid for t in page] == ["a3", "u2"] and info.git_branch == "main"


def test_locomo_conversations_import_as_sessions(engine, tmp_path):
    data = {"speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
                          {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a dog"}],
            "session_2_date_time": "2:00 pm on 9 May, 2023",
            "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "How is Rex?"}]}
    path = tmp_path / "7.json"
    path.write_text(json.dumps(data))
    assert engine.sessions.import_locomo(path) == {"sessions": 2, "turns_added": 3}
    assert engine.sessions.import_locomo(path)["turns_added"] == 0
    turns = engine.sessions.read("7/session_1")[1]
    assert [(t.uuid, t.speaker, t.role) for t in turns] == [("D1:1", "Ann", "user"), ("D1:2", "Bob", "assistant")]
    assert turns[1].text == "Lovely! [shares a dog]"
    assert engine.sessions.search("puppy", mode="keyword")[0].turn.uuid == "D1:1"


def test_turns_embedded_later_or_re_embedded_get_the_vectors_capture_gives_them(project, hashing, use_backend,
                                                                               tmp_path):
    """A turn's vector is computed from "SPEAKER: text" (read with the turn before it, when there is
    one) however it is made: at capture, from the backlog (captured keyword-only), or after `reembed`
    with another model (which drops the turns' old vectors and queues them, so two models' vectors
    are never searched together). Stored as int8 codes: a cosine of 1 comes back within 0.01."""
    from cairn.embedder import HashingEmbedder

    data = {"speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
                          {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely, what breed is he?"}]}
    path = tmp_path / "8.json"
    path.write_text(json.dumps(data))
    with Cairn.open(cwd=project, embedder=None) as keyword_only:
        keyword_only.sessions.import_locomo(path)
    spoken = "Ann: I adopted a puppy named Rex."

    def best(memory: Cairn, embedder) -> float:
        return memory.store.turn_vector_search(embedder.embed_queries([spoken])[0], 1)[0][1]

    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert memory.sessions.embed_backlog() == 2
        assert best(memory, hashing) == pytest.approx(1.0, abs=1e-2)
    other = HashingEmbedder(dim=32, model_name="test/other")
    with Cairn.open(cwd=project, embedder=other, check_model=False) as memory:
        memory.reembed()
        assert len(memory.store.turn_backlog(10)) == 2 and memory.store.turn_vector_search(
            other.embed_queries([spoken])[0], 1) == []
        assert memory.sessions.embed_backlog() == 2
        assert memory.store.turn_backlog(10) == []
        assert best(memory, other) == pytest.approx(1.0, abs=1e-2)


# -- turns in context, time windows, retention ---------------------------------------------------------
def locomo_file(tmp_path, sessions: dict[str, tuple[str, list[tuple[str, str]]]]) -> Path:
    """A LoCoMo-layout file: {session_N: (date_time, [(speaker, text), ...])}."""
    data: dict = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for key, (when, turns) in sessions.items():
        n = key.split("_")[1]
        data[f"{key}_date_time"] = when
        data[key] = [{"speaker": who, "dia_id": f"D{n}:{i}", "text": text} for i, (who, text) in enumerate(turns, 1)]
    path = tmp_path / "9.json"
    path.write_text(json.dumps(data))
    return path


def test_a_turn_embedded_from_the_backlog_gets_the_vector_capture_gives_it(project, hashing, tmp_path):
    # Capture and the backlog share one way of reading a turn in context (Sessions._in_context): the
    # vectors the backlog stores are those capture computes for the same turns, a repeated turn too.
    import numpy as np

    from cairn.models import TurnDraft

    turns = [("Ann", "Should we move the nightly backup to the object storage bucket?"), ("Bob", "Yes, exactly!"),
             ("Ann", "Yes, exactly!"), ("Bob", "Then we drop the tape drives next month.")]
    with Cairn.open(cwd=project, embedder=None) as keyword_only:
        keyword_only.sessions.import_locomo(locomo_file(tmp_path, {"session_1": ("1:56 pm on 8 May, 2023", turns)}))
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        filled: dict[int, object] = {}
        fill = memory.store.fill_turn_backlog
        memory.store.fill_turn_backlog = lambda vectors: (filled.update(vectors), fill(vectors))[1]
        assert memory.sessions.embed_backlog() == len(turns)
        drafts = [TurnDraft(uuid=f"D1:{i}", role="user", text=text, speaker=who) for i, (who, text) in enumerate(turns)]
        at_capture = memory.sessions._vectors(drafts, None)
        backlog = np.stack([filled[seq] for seq in sorted(filled)])
        assert backlog.shape == at_capture.shape == (len(turns), hashing.dim)
        assert np.allclose(backlog, at_capture, atol=1e-6)
        assert not np.allclose(backlog[1], backlog[2])  # one text, another turn before it: another vector
        tail = memory.sessions._vectors(drafts[2:], drafts[1])  # capture resumed after the second turn
        assert np.allclose(tail, at_capture[2:], atol=1e-6)


def test_a_short_reply_is_found_through_the_turn_it_answers(engine, tmp_path):
    path = locomo_file(tmp_path, {"session_1": ("1:56 pm on 8 May, 2023", [
        ("Ann", "Should we move the nightly backup to the object storage bucket?"),
        ("Bob", "Yes, exactly!"),
        ("Ann", "Lunch was great today.")])})
    engine.sessions.import_locomo(path)
    found = [h.turn.uuid for h in engine.sessions.search("nightly backup object storage bucket", mode="semantic")]
    assert "D1:2" in found and "D1:3" not in found
    # Returned as the single turn, with its window around it.
    hit = next(h for h in engine.sessions.search("nightly backup object storage bucket", mode="semantic", window=1)
               if h.turn.uuid == "D1:2")
    assert hit.turn.text == "Yes, exactly!" and [t.uuid for t in hit.before] == ["D1:1"]


def test_a_time_expression_ranks_the_turns_of_its_window_first_and_says_which(engine, tmp_path):
    path = locomo_file(tmp_path, {
        "session_1": ("10:00 am on 1 March, 2023", [("Ann", "We decided to cache the parser output in redis.")]),
        "session_2": ("10:00 am on 10 August, 2023", [("Ann", "We decided to cache the parser output on disk.")]),
        "session_3": ("10:00 am on 20 August, 2023", [("Bob", "The parser cache decision stands.")])})
    engine.sessions.import_locomo(path)
    reference = "2023-08-20T12:00:00Z"  # a Sunday: last week is 7 to 13 August
    plain = engine.sessions.search("what did we decide about the parser cache", mode="keyword", reference=reference)
    assert plain.time_window is None
    march = engine.sessions.search("what did we decide about the parser cache in March", mode="keyword",
                                   reference=reference, window=0)
    assert march[0].turn.uuid == "D1:1" and march[0].reasons["time_window"] is True
    assert march.window_json() == {"expression": "in March", "since": "2023-03-01T00:00:00.000Z",
                                   "until": "2023-04-01T00:00:00.000Z"}
    assert {h.turn.uuid for h in march[1:]} == {"D2:1", "D3:1"}  # the rest still follow
    last_week = engine.sessions.search("parser cache decided last week", reference=reference, window=0)
    assert last_week[0].turn.uuid == "D2:1" and last_week.time_window.expression == "last week"
    # Hard bounds still hold: nothing before `since`, even inside the window.
    bounded = engine.sessions.search("parser cache in March", mode="keyword", reference=reference,
                                     since="2023-08-01")
    assert [h.turn.uuid for h in bounded] and "D1:1" not in [h.turn.uuid for h in bounded]
    # A quoted (exact) query is taken as written: no window.
    assert engine.sessions.search('"cache the parser output"', reference=reference).time_window is None


def test_old_turns_lose_their_vectors_but_stay_found_by_keyword(project, hashing, use_backend, tmp_path, monkeypatch):
    path = locomo_file(tmp_path, {
        "session_1": ("10:00 am on 1 March, 2020", [("Ann", "The flaky websocket test needs a longer timeout.")]),
        "session_2": ("10:00 am on 1 March, 2026", [("Ann", "The flaky websocket test is fixed for good.")])})
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        memory.config["sessions"]["vector_days"] = 365
        memory.sessions.import_locomo(path)
        semantic = [h.turn.uuid for h in memory.sessions.search("flaky websocket test", mode="semantic")]
        keyword = [h.turn.uuid for h in memory.sessions.search("flaky websocket test", mode="keyword")]
        assert semantic == ["D2:1"] and sorted(keyword) == ["D1:1", "D2:1"]
        assert memory.store.turn_backlog(10) == []  # not queued for a vector either
        assert memory.sessions.read("9/session_1")[1][0].text.startswith("The flaky websocket")


def test_a_store_from_before_migration_10_keeps_its_turns_findable_and_requeues_their_vectors(project, hashing):
    """Schema 10 kept the turn FTS's text and float vectors: migration 11 makes the FTS contentless
    (the same BM25 results) and queues every turn for its vector in context (int8 codes)."""
    from cairn.stores.paths import choose_store
    from cairn.storage import db
    from cairn.storage.migrations import MIGRATIONS

    path = choose_store(None, cwd=project, env={"CAIRN_HOME": os.environ["CAIRN_HOME"]}).path
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = db.connect(str(path))
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    for step in MIGRATIONS[:10]:
        step.sqlite(conn)
    conn.execute("PRAGMA user_version = 10")
    conn.execute("INSERT INTO meta(key, value) VALUES ('vector_backend', 'numpy')")
    conn.execute("INSERT INTO sessions (session_id, source, updated_at) VALUES ('s1', 'claude-code', 1)")
    texts = ["the zebra crossing is broken", "noted, I will look", "deploy the fix to staging"]
    for i, text in enumerate(texts):
        conn.execute("INSERT INTO turns (seq, session_id, uuid, position, role, text, at) VALUES (?, 's1', ?, ?, "
                     "'user', ?, ?)", (i + 1, f"m{i}", i, text, 1000 + i))
        conn.execute("INSERT INTO turn_fts(rowid, body, key) VALUES (?, ?, '')", (i + 1, text))
    conn.execute("CREATE TABLE turn_vectors (seq INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
    conn.execute("INSERT INTO turn_vectors VALUES (1, ?)", (hashing.embed(["old"])[0].tobytes(),))
    conn.commit()
    conn.close()
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        store = memory.store
        assert store.schema_version() == len(MIGRATIONS)
        assert [h.turn.uuid for h in memory.sessions.search("zebra", mode="keyword")] == ["m0"]
        assert store.conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'turn_vectors'").fetchone()[0] == 0
        assert len(store.turn_backlog(10)) == 3
        assert memory.sessions.embed_backlog() == 3
        assert memory.sessions.search("zebra crossing", mode="semantic", k=1)[0].turn.uuid == "m0"
        # Contentless: the index holds no copy of the text.
        assert store.conn.execute("SELECT body FROM turn_fts WHERE rowid = 1").fetchone()[0] is None


def test_turn_codes_rank_as_float_vectors_and_follow_appends_and_deletes(tmp_path):
    """The int8 codes (sign bits for candidates, int8 dot products to rank) give the float ranking's
    top 10 on random unit vectors (but near-ties), and the copy held in memory follows every change."""
    import numpy as np

    from cairn.storage import db
    from cairn.storage.migrations import migrate_sqlite
    from cairn.storage.vectors import TurnCodeIndex

    conn = db.connect(str(tmp_path / "codes.db"))
    migrate_sqlite(conn, str(tmp_path / "codes.db"))
    conn.execute("INSERT INTO sessions (session_id, source, updated_at) VALUES ('s', 'x', 1)")
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((5000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = TurnCodeIndex()
    with db.write_transaction(conn):
        for i, v in enumerate(vectors[:4000]):
            conn.execute("INSERT INTO turns (seq, session_id, uuid, position, role, text) "
                         "VALUES (?, 's', ?, ?, 'user', 't')", (i + 1, str(i), i))
            index.upsert(conn, i + 1, v)
    queries = vectors[rng.choice(4000, 20)] + 0.5 * rng.standard_normal((20, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    overlap = []
    for q in queries:
        exact = [int(s) + 1 for s in np.argsort(-(vectors[:4000] @ q))[:10]]
        found = [seq for seq, _ in index.search(conn, q, 10, None, ())]
        assert found[0] == exact[0]
        overlap.append(len(set(found) & set(exact)) / 10)
    # Random vectors are the hard case: past the first, their neighbours are near-ties at cosine
    # 0.15, which sign bits barely tell apart (real turns: docs/benchmarks.md).
    assert np.mean(overlap) >= 0.9
    with db.write_transaction(conn):  # appended: read alone
        for i, v in enumerate(vectors[4000:], 4000):
            conn.execute("INSERT INTO turns (seq, session_id, uuid, position, role, text) "
                         "VALUES (?, 's', ?, ?, 'user', 't')", (i + 1, str(i), i))
            index.upsert(conn, i + 1, v)
    assert index.search(conn, vectors[4500], 1, None, ())[0][0] == 4501 and index.held == 5000
    with db.write_transaction(conn):
        conn.execute("DELETE FROM turns WHERE seq = 4501")  # its code goes with it (cascade)
    assert index.search(conn, vectors[4500], 1, None, ())[0][0] != 4501 and index.held == 4999
    assert [s for s, _ in index.search(conn, vectors[10], 3, "SELECT seq FROM turns WHERE seq > ?", (4000,))][0] > 4000
    conn.close()


def test_migration_11_requeues_every_turn_for_its_vector_in_context(project, hashing, use_backend, tmp_path):
    """On both backends: a store whose turn vectors were made before migration 11 (each turn alone)
    gets every turn queued again, and the vectors made then are read in context."""
    from cairn.storage.migrations import MIGRATIONS

    path = locomo_file(tmp_path, {"session_1": ("1:56 pm on 8 May, 2023", [
        ("Ann", "Should we move the nightly backup to the object storage bucket?"), ("Bob", "Yes, exactly!")])})
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        memory.sessions.import_locomo(path)
        store = memory.store
        if use_backend == "postgres":  # as before migration 11: its row gone, the vectors made then
            store.conn.execute("DELETE FROM migrations WHERE number = 11")
        else:
            store.conn.execute("PRAGMA user_version = 10")
            store.conn.execute("DELETE FROM migrations WHERE name >= 'm011'")  # 11 and every later step
            store.conn.execute("DROP TABLE turn_codes")
            store.conn.execute("DROP TRIGGER IF EXISTS turn_codes_added")
            store.conn.execute("DROP TRIGGER IF EXISTS turn_codes_removed")
            store.conn.execute("DELETE FROM meta WHERE key = 'turn_codes_count'")
            store.conn.execute("ALTER TABLE turn_fts RENAME TO turn_fts_old")
            store.conn.execute("CREATE VIRTUAL TABLE turn_fts USING fts5(body, key, "
                               "tokenize = 'porter unicode61 remove_diacritics 2')")
            store.conn.execute("INSERT INTO turn_fts(rowid, body, key) SELECT seq, text, '' FROM turns")
            store.conn.execute("DROP TABLE turn_fts_old")
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert memory.store.schema_version() == len(MIGRATIONS)
        assert len(memory.store.turn_backlog(10)) == 2
        assert memory.sessions.embed_backlog() == 2
        found = [h.turn.uuid for h in memory.sessions.search("nightly backup object storage", mode="semantic")]
        assert "D1:2" in found
        assert [h.turn.uuid for h in memory.sessions.search("bucket", mode="keyword")][0] == "D1:1"
