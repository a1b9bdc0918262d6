"""remember says what it redacted and where (kind and character offsets), never the value: in the
engine's result, the CLI's output (human and --json), the MCP answer and the REST answer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cairn import render

from tests.serving import Server, keyword_only_env

KEY = "rk-test-8f14e45fceea167a5a36dedd4bea2543"
TEXT = f"the key for the sandbox is {KEY} until Friday"
START = TEXT.index(KEY)


def only_places(redacted: list[dict]) -> None:
    assert KEY not in json.dumps(redacted)


def test_the_engine_reports_kind_and_offsets_of_each_redaction(kw_memory):
    result = kw_memory.remember(TEXT, applies_when=["using the key Kx9!mQ2wLp7zR4"])
    assert KEY not in result.memory.text
    text_part = [r for r in result.redacted if r["field"] == "text"]
    assert [(r["start"], r["end"]) for r in text_part] == [(START, START + len(KEY))]
    assert text_part[0]["kind"]
    assert any(r["field"] == "applies_when[0]" for r in result.redacted)
    only_places(result.redacted)
    # The MCP server answers with render.remembered.
    answer = render.remembered(result)
    assert answer["redacted"] == result.redacted


def test_nothing_redacted_reports_nothing(kw_memory):
    result = kw_memory.remember("We deploy with Kamal")
    assert result.redacted == [] and "redacted" not in render.remembered(result)


@pytest.mark.parametrize("as_json", [False, True])
def test_the_cli_says_what_it_redacted(project, as_json):
    import os

    env = {**os.environ, "CAIRN_NO_WARM": "1"}
    out = subprocess.run([sys.executable, "-m", "cairn", "remember", TEXT, "--keyword-only",
                          *(["--json"] if as_json else [])], cwd=project, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert KEY not in out.stdout
    if as_json:
        redacted = json.loads(out.stdout)["redacted"]
        assert [(r["field"], r["start"], r["end"]) for r in redacted] == [("text", START, START + len(KEY))]
    else:
        assert f"at characters {START}-{START + len(KEY)} of the text" in out.stdout


def test_the_rest_answer_says_what_it_redacted(tmp_path, project):
    server = Server(["--transport", "http"], cwd=project, env=keyword_only_env(tmp_path), log=tmp_path / "server.log")
    try:
        code, _, body = server.request("POST", "/v1/memories", {"text": TEXT})
    finally:
        server.stop()
    assert code == 201, body
    assert [(r["start"], r["end"]) for r in body["redacted"]] == [(START, START + len(KEY))]
    only_places(body["redacted"])


def test_a_private_span_left_out_is_reported_where_it_stood(kw_memory, project):
    import os

    text = "note <private>my ssn 123-45-6789</private> end"
    result = kw_memory.remember(text)
    assert "123-45" not in result.memory.text
    span = (text.index("<private>"), text.index("</private>") + len("</private>"))
    assert [(r["field"], r["kind"], r["start"], r["end"]) for r in result.redacted] == [("text", "<private>", *span)]
    out = subprocess.run([sys.executable, "-m", "cairn", "remember", "other " + text, "--keyword-only"], cwd=project,
                         env={**os.environ, "CAIRN_NO_WARM": "1"}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "left out a <private> span at characters" in out.stdout and "123-45" not in out.stdout
