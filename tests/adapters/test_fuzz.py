"""Hostile input, generated: the hook's stdin, every MCP tool's arguments and the CLI's arguments.

Whatever comes in, the answer is a result or one clear error: no crash, no traceback shown, and a
refused write changes nothing (the store's counts are the same before and after). Inputs mix
hypothesis' own text with what breaks parsers and stores: FTS5 syntax, NUL bytes, lone surrogates,
invisible characters, 10 MB strings, deeply nested JSON, wrong types, store names with "../".

CAIRN_FUZZ_EXAMPLES sets the examples per surface (default 100); bench/fuzz.py runs 10,000+ each.
"""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn import Cairn

EXAMPLES = int(os.environ.get("CAIRN_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="CAIRN_FUZZ_SEED" not in os.environ,
                suppress_health_check=list(HealthCheck))
HUGE = "x" * (10 * 1024 * 1024)
HOSTILE_TEXT = [
    '"unbalanced', "deploy AND", "NOT deploy", "NEAR(deploy, fly)", "deploy*", "col:deploy", "^deploy", "(",
    ")", '"" AND OR NOT', "*", "-", "a\x00b", "\x00", "\ud800", "x\udcff", "\u200b", "\ufeff\u2060", "",
    " ", "\n", "../../etc/passwd", "..", "/", "a/b", "a\\b", "C:\\x", "%s%n", "{}", "[]", "null",
    "[mem:01JABCDEFGHJKMNPQRSTVWXYZ0]", "mem:", "\u202etxt.exe", "e\u0301", "東京に行った", "🦀" * 50,
    "x" * 8193, "é" * 5000, "deploy " * 20_000,
]
texts = st.one_of(st.text(), st.text(st.characters(codec=None, exclude_categories=())), st.sampled_from(HOSTILE_TEXT))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), texts)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(texts, inner, max_size=4)),
                           max_leaves=12)


def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


# As deep as the MCP server's JSON-RPC layer lets through (stdio.MAX_DEPTH); deeper lines are answered
# -32600 before any tool sees them (test_mcp_robustness.py).
DEEP = _deep(60)


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture
def keyword_only(fuzz_home, monkeypatch, cairn_home) -> Path:
    """A project with a few memories, embedding off (the fuzzing is about input, not ranking)."""
    config = cairn_home.parent / "keyword-only.yaml"
    config.write_text("embedding:\n  enabled: false\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    from tests.conftest import git_init

    project = git_init(cairn_home.parent / "fuzz-project")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))
    monkeypatch.chdir(project)
    with Cairn.open(cwd=project, embedder=None) as memory:
        for text in ("We deploy with Kamal on Fridays", "Tests run with pytest -q", "Alice prefers tabs"):
            memory.remember(text)
    return project


def _counts(project: Path) -> dict[str, int]:
    with Cairn.open(cwd=project, embedder=None) as memory:
        return memory.counts()


# -- the hook's stdin ---------------------------------------------------------------------------------------
payloads = st.one_of(
    st.fixed_dictionaries({}, optional={"prompt": json_values, "session_id": json_values, "cwd": json_values,
                                        "source": json_values, "hook_event_name": json_values}),
    json_values,
)
hook_stdin = st.one_of(payloads.map(lambda p: json.dumps(p).encode("utf-8", "surrogatepass")),
                       st.binary(max_size=200), st.just(b"[" * 100_000))


def run_hook(event: str, stdin: bytes) -> tuple[int, str, str]:
    """`cairn hook EVENT` in-process: (exit code, stdout, stderr)."""
    from cairn.adapters.claude.hook_process import hook_main

    out, err = io.StringIO(), io.StringIO()
    real_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with redirect_stdout(out), redirect_stderr(err):
            hook_main([event])
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    finally:
        sys.stdin = real_stdin
    raise AssertionError("hook_main returned without exiting")


def check_hook(event: str, stdin: bytes, home: Path) -> None:
    log = home / "logs" / "hooks.log"
    before = log.stat().st_size if log.exists() else 0
    code, out, err = run_hook(event, stdin)
    assert code == 0 and err == ""
    if out:
        output = json.loads(out)
        assert output["hookSpecificOutput"]["hookEventName"] == event
    if log.exists():  # failing open is right for unreadable input, never for a bug of ours
        new = log.read_text(errors="replace")[before:]
        for bad in ("TypeError", "AttributeError", "KeyError", "IndexError", "UnicodeEncodeError"):
            assert bad not in new, new[-3000:]


@FUZZ
@given(event=st.sampled_from(["UserPromptSubmit", "SessionStart", "Stop", "", "../x"]), stdin=hook_stdin)
def test_hook_stdin_never_breaks_the_prompt(keyword_only, cairn_home, event, stdin):
    before = _counts(keyword_only)
    check_hook(event, stdin, cairn_home)
    assert _counts(keyword_only) == before


# -- every MCP tool's arguments -----------------------------------------------------------------------------
TOOL_ARGS: dict[str, dict[str, Any]] = {
    "memory_remember": {"text": texts, "kind": texts, "tags": json_values, "importance": json_values,
                        "valid_from": json_values, "scope": texts},
    "memory_recall": {"query": texts, "k": json_values, "as_of": json_values, "kinds": json_values,
                      "tags": json_values, "scope": json_values, "include_superseded": json_values},
    "memory_replace": {"id": texts, "text": texts, "valid_from": json_values},
    "memory_keep_both": {"id": texts, "others": json_values},
    "memory_forget": {"id": texts},
    "memory_history": {"id": texts},
    "memory_list": {"kinds": json_values, "tags": json_values, "limit": json_values, "scope": json_values,
                    "include_superseded": json_values},
    "memory_status": {},
    "memory_review": {"action": st.sampled_from(["queue", "decide", "propose", "maintain", "maintenance_status"])
                      | texts, "types": json_values, "state": json_values, "limit": json_values,
                      "proposal_id": texts, "verdict": texts, "text": json_values, "keep_id": json_values,
                      "memory_id": json_values, "kind": texts, "tags": json_values, "applies_when": json_values,
                      "context": json_values, "origin": json_values, "paths": json_values,
                      "apply": json_values},
    "memory_sessions": {"session_id": json_values, "offset": json_values, "limit": json_values,
                        "since": json_values, "until": json_values},
}
WRITES = {"memory_remember", "memory_replace", "memory_keep_both", "memory_forget", "memory_review"}


def _arguments(tool: str) -> st.SearchStrategy[Any]:
    fields = TOOL_ARGS[tool]
    typed = st.fixed_dictionaries({}, optional=fields) if fields else st.just({})
    # Always an object: what is not one is refused by the JSON-RPC layer (test_mcp_robustness.py).
    return st.one_of(typed, typed, st.dictionaries(texts, json_values, max_size=4),
                     st.just({"query": DEEP, "text": DEEP, "id": DEEP}))


@pytest.fixture
def mcp_server(keyword_only):
    from cairn.adapters.mcp.server import build_server
    from cairn.adapters.mcp.session import Session

    session = Session(keyword_only, embedder_for=lambda config: None)
    yield build_server(session)
    session.close()


def call_tool(server, tool: str, arguments: Any) -> tuple[bool, str]:
    """(ok, text) of one tool call in-process; a ToolError is (False, its message)."""
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

    async def go():
        return await server.call_tool(tool, arguments)

    try:
        result = anyio.run(go)
    except UnexpectedToolError:
        raise
    except ToolError as exc:
        return False, str(exc)
    if hasattr(result, "content"):  # a CallToolResult: the SDK's own answer (e.g. an argument it refused)
        return not result.is_error, result.content[0].text
    content = result[0] if isinstance(result, tuple) else result
    return True, content[0].text


def check_tool(server, project: Path, tool: str, arguments: Any) -> None:
    before = _counts(project)
    ok, text = call_tool(server, tool, arguments)
    assert text and "Traceback" not in text and "\n" not in text.strip(), text[:500]
    if ok:
        json.loads(text)
    elif tool in WRITES:
        assert _counts(project) == before, text


@pytest.mark.parametrize("tool", sorted(TOOL_ARGS))
@FUZZ
@given(data=st.data())
def test_mcp_tool_arguments_get_a_result_or_one_clear_error(mcp_server, keyword_only, tool, data):
    check_tool(mcp_server, keyword_only, tool, data.draw(_arguments(tool), label="arguments"))


# -- the CLI ------------------------------------------------------------------------------------------------
STORE_NAMES = ["../x", "a/b", "..", ".hidden", "/etc/passwd", "a\\b", "x" * 200, "ok-name", "\x00", "\udcff",
               "global", ""]
cli_args = st.one_of(
    st.tuples(st.just("remember"), texts).map(list),
    st.tuples(st.just("remember"), texts, st.sampled_from(["--kind", "--tags", "--importance", "--valid-from",
                                                           "--replaces", "--scope"]), texts).map(list),
    st.tuples(st.just("recall"), texts).map(list),
    st.tuples(st.just("recall"), texts, st.sampled_from(["-k", "--kind", "--tag", "--since", "--as-of",
                                                         "--scope"]), texts).map(list),
    st.tuples(st.sampled_from(["show", "history", "forget"]), texts).map(list),
    st.tuples(st.sampled_from(["list", "recall x", "status", "remember x", "export"]),
              st.sampled_from(STORE_NAMES) | texts).map(lambda a: [*a[0].split(), "--store", a[1]]),
    st.tuples(st.sampled_from(["create", "delete", "rename"]), st.sampled_from(STORE_NAMES) | texts)
    .map(lambda a: ["stores", a[0], a[1], *(["--yes"] if a[0] == "delete" else ["y"] if a[0] == "rename" else [])]),
    st.lists(texts, max_size=4),
)
cli_stdin = st.one_of(st.just(b""), st.binary(max_size=100), texts.map(lambda t: t.encode("utf-8", "surrogatepass")))


def run_cli(args: list[str], stdin: bytes) -> tuple[int, str, str]:
    """`cairn ARGS` in-process, as a user runs it (cli.main: errors as one line): (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    from cairn.adapters.cli import main

    runner = CliRunner()
    with runner.isolation(input=stdin) as (out, err, _):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        return code, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")


def check_cli(args: list[str], stdin: bytes, project: Path) -> None:
    before = _counts(project)
    code, _, err = run_cli(args, stdin)
    assert "Traceback" not in err, err[-3000:]
    assert code in (0, 1, 2), (code, err)
    if code != 0:
        assert err.startswith("cairn:") or err.startswith("Usage:") or "Error:" in err, err[-1000:]
        assert _counts(project) == before, err


@FUZZ
@given(args=cli_args, stdin=cli_stdin)
def test_cli_arguments_get_output_or_one_clear_error(keyword_only, args, stdin):
    check_cli(args, stdin, keyword_only)


# -- 10 MB inputs, once per surface (too big to shrink or print as hypothesis examples) ---------------------
def test_ten_megabyte_inputs_are_refused_or_cut_on_every_surface(keyword_only, cairn_home, mcp_server):
    check_hook("UserPromptSubmit", json.dumps({"prompt": HUGE, "session_id": HUGE}).encode(), cairn_home)
    for tool, arguments in [("memory_remember", {"text": HUGE}), ("memory_recall", {"query": HUGE}),
                            ("memory_replace", {"id": HUGE, "text": HUGE}), ("memory_forget", {"id": HUGE}),
                            ("memory_review", {"action": "propose", "text": HUGE}),
                            ("memory_review", {"action": "decide", "proposal_id": HUGE, "verdict": "approve"})]:
        check_tool(mcp_server, keyword_only, tool, arguments)
    for args in (["remember", HUGE], ["recall", HUGE], ["show", HUGE], ["list", "--store", HUGE]):
        check_cli(args, b"", keyword_only)
    check_cli(["remember", "-"], HUGE.encode(), keyword_only)
