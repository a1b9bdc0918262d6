"""`cairn serve --transport http`: the REST API (docs/http.md) and its guard, on a real server process.

Each test starts its own keyword-only server on a free loopback port in its own data root, and
stops it. Security: Host and Origin checks, the body limit, tokens (required once one exists, read-only,
limited to stores, revoked while the server runs), and a non-loopback bind without a token.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cairn import Cairn
from cairn.adapters import http as rest
from cairn.adapters import tokens as tokens_mod
from cairn.models import TurnDraft

from tests.conftest import WAIT_S, git_init
from tests.serving import Server, keyword_only_env


@pytest.fixture
def env(tmp_path, cairn_home):
    return keyword_only_env(tmp_path)


@pytest.fixture
def project(tmp_path):
    return git_init(tmp_path / "project")


@pytest.fixture
def server(tmp_path, project, env):
    s = Server(["--transport", "http"], cwd=project, env=env, log=tmp_path / "server.log")
    yield s
    s.stop()


def ok(result, status=200):
    code, _, body = result
    assert code == status, body
    return body


def refused(result, status, error):
    code, headers, body = result
    assert (code, body["error"]) == (status, error), body
    assert "Traceback" not in json.dumps(body)
    return body


def test_a_write_answers_with_related_and_the_replace_route_retires_one(server):
    npm = ok(server.request("POST", "/v1/memories", {"text": "The client SDK is published to npm."}), 201)
    pypi = ok(server.request("POST", "/v1/memories", {"text": "The client SDK is published to PyPI."}), 201)
    assert pypi["superseded"] == [] and [r["id"] for r in pypi["related"]] == [npm["memory"]["id"]]
    assert set(pypi["related"][0]) == {"id", "text", "kind", "date", "why"} and "memory_replace" in pypi["instruction"]
    done = ok(server.request("POST", f"/v1/memories/{npm['memory']['id']}/replace",
                             {"text": "The client SDK is published to PyPI."}))
    assert (done["status"], done["superseded"]) == ("duplicate", [npm["memory"]["id"]])


def test_remember_recall_list_replace_history_forget(server):
    made = ok(server.request("POST", "/v1/memories", {"text": "We deploy with Kamal", "kind": "decision",
                                                       "tags": ["deploy"]}), 201)
    assert made["status"] == "created" and made["memory"]["kind"] == "decision"
    first = made["memory"]["id"]
    hits = ok(server.request("POST", "/v1/recall", {"query": "how do we deploy"}))["hits"]
    assert [h["memory"]["id"] for h in hits] == [first]
    assert ok(server.request("GET", "/v1/memories?kind=decision&tag=deploy"))["memories"][0]["id"] == first
    assert ok(server.request("GET", "/v1/memories?kind=fact"))["memories"] == []

    replaced = ok(server.request("POST", f"/v1/memories/{first}/replace", {"text": "We deploy with Docker Compose"}))
    second = replaced["memory"]["id"]
    assert replaced["superseded"] == [first]
    chain = ok(server.request("GET", f"/v1/memories/{second}/history"))["chain"]
    assert [(m["id"], m["status"]) for m in chain] == [(first, "superseded"), (second, "current")]
    assert chain[0]["retired_at"] is not None and chain[1]["retired_at"] is None
    refused(server.request("POST", f"/v1/memories/{first}/replace", {"text": "again"}), 409, "not_current")

    gone = ok(server.request("DELETE", f"/v1/memories/{second}"))["memory"]
    assert gone["text"] is None and gone["forgotten_at"] is not None
    assert ok(server.request("POST", "/v1/recall", {"query": "deploy"}))["hits"] == []
    status = ok(server.request("GET", "/v1/status"))
    assert status["counts"]["current"] == 0 and status["keyword_only"] is True


def test_errors_are_json_with_stable_codes(server):
    refused(server.request("POST", "/v1/recall", {"query": ""}), 400, "invalid_request")
    body = refused(server.request("POST", "/v1/memories", {"text": "x", "kind": "gossip"}), 400, "invalid_request")
    assert body["fields"][0]["field"] == "kind"
    refused(server.request("POST", "/v1/memories", {"text": "x", "colour": "red"}), 400, "invalid_request")
    refused(server.request("POST", "/v1/recall", raw=b"{not json", headers={"Content-Type": "application/json"}),
            400, "invalid_json")
    refused(server.request("POST", "/v1/recall", raw=b"[1]", headers={"Content-Type": "application/json"}),
            400, "invalid_json")
    refused(server.request("POST", "/v1/recall", raw=b'{"query":"x"}', headers={"Content-Type": "text/plain"}),
            415, "unsupported_media_type")
    refused(server.request("POST", "/v1/recall", {"query": "x", "as_of": "next tuesday"}), 400, "invalid_time")
    refused(server.request("POST", "/v1/memories", {"text": "x", "valid_from": "yesterday"}), 400, "invalid_time")
    refused(server.request("GET", "/v1/memories/01NOSUCHMEMORY"), 404, "memory_not_found")
    refused(server.request("GET", "/v1/sessions/no-such-session"), 404, "session_not_found")
    refused(server.request("GET", "/v1/status?store=no-such-store"), 404, "store_not_found")
    refused(server.request("GET", "/v1/status?store=../etc"), 400, "invalid_store_name")
    refused(server.request("GET", "/v1/nothing"), 404, "not_found")
    refused(server.request("PUT", "/v1/status"), 405, "method_not_allowed")
    refused(server.request("POST", "/v1/review/proposals/p1/decide", {"verdict": "shrug"}), 400, "invalid_request")
    # every code the server sent is documented in ERRORS
    assert {"invalid_request", "invalid_json", "not_found"} <= set(rest.ERRORS)


def test_a_request_may_name_another_store(server, env):
    assert cli("stores", "create", "team", env=env).returncode == 0
    made = ok(server.request("POST", "/v1/memories?store=team", {"text": "Team wiki lives in Notion"}), 201)
    assert made["memory"]["store"] == "team"
    assert ok(server.request("GET", "/v1/memories"))["memories"] == []
    assert [m["id"] for m in ok(server.request("GET", "/v1/memories?store=team"))["memories"]] == \
        [made["memory"]["id"]]


def test_sessions_search_list_and_read(tmp_path, project, env):
    with Cairn.open(cwd=project, embedder=None) as engine:
        engine.sessions.add_turns("s1", [
            TurnDraft(uuid="u1", role="user", text="the build fails with ERR_OSSL_EVP_UNSUPPORTED", at=1_000),
            TurnDraft(uuid="u2", role="assistant", text="set NODE_OPTIONS=--openssl-legacy-provider", at=2_000),
        ], source="claude")
    s = Server(["--transport", "http"], cwd=project, env=env, log=tmp_path / "server.log")
    try:
        results = ok(s.request("POST", "/v1/sessions/search", {"query": "ERR_OSSL_EVP_UNSUPPORTED", "window": 1}))
        (result,) = results["results"]
        assert result["session_id"] == "s1" and result["mode"] == "exact" and result["best"] == [0]
        assert results["time_window"] is None
        dated = ok(s.request("POST", "/v1/sessions/search", {"query": "openssl error on 2026-03-01", "mode": "keyword",
                                                             "reference": "2026-03-05T00:00:00Z"}))
        assert dated["time_window"] == {"expression": "on 2026-03-01", "since": "2026-03-01T00:00:00.000Z",
                                        "until": "2026-03-02T00:00:00.000Z"}
        assert [(t["uuid"], t["hit"]) for t in result["turns"]] == [("u1", True), ("u2", False)]
        assert [x["session_id"] for x in ok(s.request("GET", "/v1/sessions"))["sessions"]] == ["s1"]
        turns = ok(s.request("GET", "/v1/sessions/s1?offset=1&limit=5"))["turns"]
        assert [t["uuid"] for t in turns] == ["u2"]
    finally:
        s.stop()


def test_review_is_the_queue_only_and_promote_brings_a_cold_memory_back(tmp_path, project, env):
    with Cairn.open(cwd=project, embedder=None) as engine:
        cold = engine.remember("The old staging box is called bramble", importance=1).memory.id
        engine.set_cold(cold, True)
    s = Server(["--transport", "http"], cwd=project, env=env, log=tmp_path / "server.log")
    try:
        # The pair scan and its verdicts are gone: the queue (/v1/review/proposals) is the one review.
        refused(s.request("GET", "/v1/review"), 404, "not_found")
        refused(s.request("POST", "/v1/review/decide", {"older_id": "a", "newer_id": "b", "verdict": "keep_both"}),
                404, "not_found")
        assert ok(s.request("GET", "/v1/maintain/status"))["cold"] == 1
        counts = ok(s.request("GET", "/v1/status"))["counts"]
        assert (counts["current"], counts["cold"], counts["total"]) == (0, 1, 1)
        assert ok(s.request("POST", f"/v1/memories/{cold}/promote")) == {"promoted": cold}
        refused(s.request("POST", f"/v1/memories/{cold}/promote"), 400, "invalid_input")
        refused(s.request("POST", "/v1/memories/01NOSUCHMEMORY/promote"), 404, "memory_not_found")
        assert [m["id"] for m in ok(s.request("GET", "/v1/memories"))["memories"]] == [cold]
        counts = ok(s.request("GET", "/v1/status"))["counts"]
        assert (counts["current"], counts["cold"]) == (1, 0)
    finally:
        s.stop()


def test_the_durable_queue_over_http(tmp_path, project, env):
    with Cairn.open(cwd=project, embedder=None) as engine:
        a = engine.remember("Run the linter before pushing.", kind="convention").memory.id
        b = engine.remember("We might run the linter before pushing.", kind="convention").memory.id
    s = Server(["--transport", "http"], cwd=project, env=env, log=tmp_path / "server.log")
    try:
        queue = ok(s.request("GET", "/v1/review/proposals"))
        (proposal,) = queue["proposals"]
        assert proposal["type"] == "conflict" and [x["id"] for x in proposal["sources"]] == [a, b]
        shown = ok(s.request("GET", f"/v1/review/proposals/{proposal['id']}"))
        assert [m["id"] for m in shown["sources"]] == [a, b] and shown["stale"] is None
        refused(s.request("POST", f"/v1/review/proposals/{proposal['id']}/decide", {"verdict": "edit"}),
                400, "invalid_input")
        done = ok(s.request("POST", f"/v1/review/proposals/{proposal['id']}/decide", {"verdict": "approve"}))
        assert (done["state"], done["superseded"], done["by"]) == ("applied", [a], b)
        refused(s.request("POST", f"/v1/review/proposals/{proposal['id']}/decide", {"verdict": "keep"}),
                409, "proposal_closed")
        refused(s.request("GET", "/v1/review/proposals/nope"), 404, "proposal_not_found")
        applied = ok(s.request("GET", "/v1/review/proposals?state=applied"))["proposals"]
        assert [(p["id"], p["decided_by"]) for p in applied] == [(proposal["id"], "http")]
        report = ok(s.request("POST", "/v1/maintain", {}))
        assert report["dry_run"] is True and report["scanned"] == 1
        assert ok(s.request("GET", "/v1/maintain/status"))["last_run"] is None
    finally:
        s.stop()


# -- the guard ------------------------------------------------------------------------------------------
def test_a_foreign_host_header_is_refused_on_loopback(server):
    refused(server.request("GET", "/v1/status", headers={"Host": "attacker.example:80"}), 421, "host_not_allowed")
    refused(server.request("GET", "/", headers={"Host": "attacker.example"}), 421, "host_not_allowed")
    for host in ("localhost", f"localhost:{server.port}", f"127.0.0.1:{server.port}"):
        ok(server.request("GET", "/v1/status", headers={"Host": host}))


def test_a_cross_origin_write_is_refused_and_writes_nothing(server):
    refused(server.request("POST", "/v1/memories", {"text": "planted by a web page"},
                           headers={"Origin": "http://attacker.example"}), 403, "origin_not_allowed")
    assert ok(server.request("GET", "/v1/memories"))["memories"] == []
    # the console's own origin is same-origin
    ok(server.request("POST", "/v1/memories", {"text": "from the console"},
                      headers={"Origin": f"http://127.0.0.1:{server.port}"}), 201)
    _, headers, _ = server.request("GET", "/v1/status", headers={"Origin": f"http://127.0.0.1:{server.port}"})
    assert "access-control-allow-origin" not in headers  # no CORS unless configured


def test_cors_only_for_a_configured_origin(tmp_path, project, env):
    s = Server(["--transport", "http", "--cors-origin", "http://localhost:3000"], cwd=project, env=env,
               log=tmp_path / "server.log")
    try:
        code, headers, _ = s.request("OPTIONS", "/v1/recall", headers={
            "Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"})
        assert code == 200 and headers["access-control-allow-origin"] == "http://localhost:3000"
        code, headers, _ = s.request("GET", "/v1/status", headers={"Origin": "http://localhost:3000"})
        assert code == 200 and headers["access-control-allow-origin"] == "http://localhost:3000"
        refused(s.request("GET", "/v1/status", headers={"Origin": "http://localhost:4000"}), 403, "origin_not_allowed")
    finally:
        s.stop()


def test_an_oversized_body_is_refused(tmp_path, project, env):
    s = Server(["--transport", "http", "--max-body-bytes", "4096"], cwd=project, env=env, log=tmp_path / "server.log")
    try:
        refused(s.request("POST", "/v1/memories", {"text": "x" * 5000}), 413, "body_too_large")
        assert ok(s.request("GET", "/v1/memories"))["memories"] == []
        ok(s.request("POST", "/v1/memories", {"text": "small enough"}), 201)
    finally:
        s.stop()


def test_security_headers_and_the_console_page(server):
    code, headers, text = server.request("GET", "/")
    assert code == 200 and headers["content-type"].startswith("text/html") and "Cairn" in text
    assert "default-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    refused(server.request("GET", "/console.js/../../etc/passwd"), 404, "not_found")
    refused(server.request("GET", "/index.html"), 404, "not_found")  # only the routes, never the folder


# -- tokens -----------------------------------------------------------------------------------------------
def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cairn", *args], env=env, capture_output=True, text=True,
                          timeout=WAIT_S)


def test_token_create_list_revoke_store_only_a_hash(env, cairn_home):
    made = cli("token", "create", "laptop", "--read-only", "--json", env=env)
    assert made.returncode == 0, made.stderr
    secret = json.loads(made.stdout)["token"]
    assert secret.startswith("cairn_")
    path = tokens_mod.tokens_path()
    raw = path.read_text()
    assert secret not in raw and tokens_mod._digest(secret) in raw
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    listed = json.loads(cli("token", "list", "--json", env=env).stdout)["tokens"]
    assert [(t["name"], t["read_only"], t["stores"]) for t in listed] == [("laptop", True, [])]
    assert secret not in json.dumps(listed) and "sha256" not in listed[0]
    assert cli("token", "create", "laptop", env=env).returncode == 2  # names are unique
    typo = cli("token", "create", "ci", "--store", "no-such-store", env=env)
    assert typo.returncode == 2 and "no store named 'no-such-store'" in typo.stderr  # it would never work
    assert cli("token", "create", "ci", "--store", "global", "--json", env=env).returncode == 0
    assert cli("token", "revoke", "ci", env=env).returncode == 0
    assert cli("token", "revoke", "laptop", env=env).returncode == 0
    assert json.loads(cli("token", "list", "--json", env=env).stdout)["tokens"] == []
    assert cli("token", "revoke", "laptop", env=env).returncode == 2


def test_once_a_token_exists_every_request_needs_one(tmp_path, project, env):
    writer, _ = tokens_mod.create("writer")
    reader, _ = tokens_mod.create("reader", read_only=True)
    s = Server(["--transport", "http"], cwd=project, env=env, log=tmp_path / "server.log")
    try:
        code, headers, body = s.request("GET", "/v1/status")
        assert (code, body["error"]) == (401, "unauthorized") and headers["www-authenticate"].startswith("Bearer")
        refused(s.request("GET", "/v1/status", token="cairn_00000000_wrong"), 401, "unauthorized")
        refused(s.request("GET", "/v1/status", headers={"Authorization": writer}), 401, "unauthorized")
        ok(s.request("GET", "/"))  # the console's static page carries no data
        made = ok(s.request("POST", "/v1/memories", {"text": "Written with a token"}, token=writer), 201)
        # a read-only token reads but cannot write
        assert len(ok(s.request("GET", "/v1/memories", token=reader))["memories"]) == 1
        ok(s.request("POST", "/v1/recall", {"query": "token"}, token=reader))
        refused(s.request("POST", "/v1/memories", {"text": "sneaky"}, token=reader), 403, "read_only")
        refused(s.request("DELETE", f"/v1/memories/{made['memory']['id']}", token=reader), 403, "read_only")
        assert len(ok(s.request("GET", "/v1/memories", token=writer))["memories"]) == 1
        # revoked while the server runs: refused from the next request
        tokens_mod.revoke("writer")
        refused(s.request("GET", "/v1/status", token=writer), 401, "unauthorized")
    finally:
        s.stop()


def test_a_token_for_one_store_cannot_use_another(tmp_path, project, env):
    for name in ("alpha", "beta"):
        assert cli("stores", "create", name, env=env).returncode == 0
    alpha, _ = tokens_mod.create("alpha-only", stores=("alpha",))
    s = Server(["--transport", "http", "--store", "alpha"], cwd=project, env=env, log=tmp_path / "server.log")
    try:
        ok(s.request("POST", "/v1/memories", {"text": "Alpha fact"}, token=alpha), 201)
        refused(s.request("GET", "/v1/memories?store=beta", token=alpha), 403, "forbidden_store")
        refused(s.request("POST", "/v1/memories?store=beta", {"text": "x"}, token=alpha), 403, "forbidden_store")
        # the global store is a store too: not in the token's list, so not reachable
        refused(s.request("POST", "/v1/memories", {"text": "I like tabs", "scope": "global"}, token=alpha),
                403, "forbidden_store")
        refused(s.request("POST", "/v1/recall", {"query": "fact", "scope": "all"}, token=alpha), 403, "forbidden_store")
        hits = ok(s.request("POST", "/v1/recall", {"query": "alpha fact"}, token=alpha))["hits"]
        assert [h["memory"]["store"] for h in hits] == ["alpha"]
    finally:
        s.stop()


def test_a_non_loopback_bind_refuses_to_start_without_a_token(tmp_path, project, env):
    s = Server(["--transport", "http", "--host", "0.0.0.0"], cwd=project, env=env, log=tmp_path / "server.log",
               wait=False)
    assert s.proc.wait(WAIT_S) == 2
    s.stop()
    assert "refusing to listen on 0.0.0.0 without a token" in s.log.read_text()
    secret, _ = tokens_mod.create("remote")
    s = Server(["--transport", "http", "--host", "0.0.0.0"], cwd=project, env=env, log=tmp_path / "server2.log")
    try:
        refused(s.request("GET", "/v1/status"), 401, "unauthorized")
        # not loopback: any Host is accepted, the token is the check
        ok(s.request("GET", "/v1/status", token=secret, headers={"Host": "cairn.lan:8765"}))
    finally:
        s.stop()


def test_docs_http_md_names_every_route_and_error():
    text = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    for spec in rest.ROUTES:
        assert f"### {spec.method} {spec.path}\n" in text, spec.path
        for name in spec.input.model_fields:
            assert f"| `{name}` |" in text, (spec.path, name)
    for code in rest.ERRORS:
        assert f"| `{code}` |" in text, code


def test_a_port_in_use_is_one_error_line_naming_it(tmp_path, project, env):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "cairn", "serve", "--transport", "http", "--port", str(port)],
                             cwd=project, env=env, capture_output=True, text=True, timeout=WAIT_S)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("cairn: error: "), out.stderr
    assert f"port {port}" in out.stderr and "serving" not in out.stderr


def test_an_empty_recall_and_the_status_name_the_store(server):
    status = ok(server.request("GET", "/v1/status"))
    empty = ok(server.request("POST", "/v1/recall", {"query": "how do we deploy?"}))
    assert status["store"] and empty == {"hits": [], "store": status["store"]}


def test_six_restatements_over_rest_make_one_proposal_under_one_heading(server):
    """Issue 31: the REST writer folds write-time pairs into the cluster of restatements."""
    texts = ["Run ruff check before pushing.", "Always run ruff check before you push.",
             "Before pushing, run ruff check.", "Please run ruff check prior to pushing!",
             "ruff check must pass before every push", "We run ruff check before pushing code."]
    ids = [ok(server.request("POST", "/v1/memories", {"text": t, "kind": "convention"}), 201)["memory"]["id"]
           for t in texts]
    ok(server.request("POST", "/v1/maintain", {"apply": True}))
    proposals = ok(server.request("GET", "/v1/review/proposals"))["proposals"]
    assert len(proposals) == 1 and len({p["subject"] for p in proposals}) == 1
    assert sorted(x["id"] for x in proposals[0]["sources"]) == sorted(ids)
