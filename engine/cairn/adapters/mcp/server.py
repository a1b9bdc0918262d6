"""Cairn's MCP server: the memory tools Claude Code (or any MCP client) calls, over the cairn engine API.

    python mcp/server.py                    # the plugin's launcher: main(), stdio
    cairn serve --transport stdio           # the same main()
    cairn serve --transport mcp-http        # the same tools over streamable HTTP (http_app), at /mcp

stdin/stdout carry JSON-RPC on stdio; logs go to stderr.

The tools are the rows of tools.TOOLS, their arguments declared in the catalogue (cairn.operations):
each is checked against the schema the model sees, then one engine API call runs and its result is
rendered by cairn.render. Defaults (k, scope, limit) come from the config.

- initialize is answered at once; the embedding model is loaded by a daemon thread that starts
  after the handshake, and nothing imports sentence-transformers before that.
- The store is the one the engine picks for CLAUDE_PROJECT_DIR (else the working directory):
  explicit > CAIRN_STORE > git toplevel > folder. A store that cannot be opened does not stop the
  server: every tool answers with the reason, and memory_status says what is wrong.
- The process ends with its client: at stdin EOF, SIGINT or SIGTERM it closes the store and exits
  at once, whatever a worker thread is still doing.
"""

from __future__ import annotations

import inspect
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

import cairn
from cairn import CairnError, render

from .. import schema
from . import stdio
from .session import Session, Unavailable
from .tools import READ_ONLY_TOOLS, TOOLS, WRITE_TOOLS, ToolSpec  # noqa: F401 - READ_ONLY_TOOLS: for `cairn serve`

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

log = logging.getLogger("cairn.mcp")

INSTRUCTIONS = """\
Cairn is this project's long-term memory: decisions, conventions, preferences and facts kept \
across sessions (see the cairn-memory skill).
- memory_recall before answering about past decisions, conventions or the user's preferences, or \
deciding what may be settled. Cite memories used as [mem:ID].
- memory_remember a decision with its reason, a convention, a preference or a non-obvious fact, as \
one self-contained statement; not what code or git records; never a secret.
- A changed fact: memory_replace(old id, new text).
- Judge each `related` memory a remember or replace returns: changed by the new one: \
memory_replace(its id, same text); both hold: memory_keep_both(new id, [its id]); a restatement, \
or unsure: nothing (the user reviews it).
- Times are ISO 8601."""

def _compact(schema: Any) -> Any:
    """The JSON schema pydantic writes, less what every session pays for and the model learns
    nothing from. The server still checks each argument against the full type (schema.annotated),
    and refuses a bad one with a sentence naming it. Left out:
    - the titles of every property ("Text", "Kind");
    - for an optional argument whose default is None, its `anyOf [..., null]` and `"default": null`
      (an absent argument says the same, and an explicit null is still accepted);
    - defaults of [] and false: an absent list or flag means none and no, as everywhere;
    - the lengths of a string (an id's 64, a time's 40, a text's 8,192 bytes): limits that keep a
      request a request, not meaning;
    - a list's maxItems when it is the number of choices.
    Numeric bounds, item counts, choices and every type stay (some clients refuse an enum without
    its type: Gemini's function declarations)."""
    if isinstance(schema, list):
        return [_compact(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _compact(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    variants = out.get("anyOf")
    if isinstance(variants, list) and "default" in out and out["default"] is None:
        kept = [v for v in variants if v != {"type": "null"}]
        if len(kept) == 1 and len(variants) == 2:
            del out["anyOf"], out["default"]
            out = {**kept[0], **out}
    if "default" in out and (out["default"] == [] or out["default"] is False):
        del out["default"]
    items = out.get("items")
    if isinstance(items, dict) and "enum" in items and out.get("maxItems") == len(items["enum"]):
        del out["maxItems"]  # no more than every choice: the enum says it
    if out.get("type") == "string":
        out.pop("minLength", None)
        out.pop("maxLength", None)
    return out


def _describe(name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "arguments"
        given = error.get("input")
        shown = f" (got {given!r})" if isinstance(given, (int, float, str)) and len(repr(given)) <= 40 else ""
        problems.append(f"{field}: {error['msg']}{shown}")
    return f"invalid arguments for {name}: " + "; ".join(problems)


class CairnServer(MCPServer):
    """MCPServer whose tool errors read as one plain sentence: the engine's message, or which
    argument is wrong and why, without the SDK's "Error executing tool" prefix and pydantic's URLs.
    A refused write says that nothing was changed (engine writes are all-or-nothing)."""

    on_stdin_eof: Callable[[], None] = staticmethod(lambda: None)

    async def run_stdio_async(self) -> None:
        # The SDK's transport with a checked stdin: every malformed line is answered (stdio.py).
        await stdio.serve(self._lowlevel_server, self.on_stdin_eof)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
                        ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: the SDK keeps its text on the server and logs the traceback
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                message = _describe(name, cause)
            elif isinstance(cause, ToolError):
                message = str(cause)
            else:
                raise
            if name in WRITE_TOOLS:
                message += "; nothing was changed"
            raise ToolError(message) from cause


def _status(session: Session) -> dict[str, Any]:
    """memory_status: answered even when the store cannot be opened, or is busy (the tool says so)."""
    base = {"project_dir": str(session.project_dir) if session.project_dir else None,
            "model_warmup": session.warm_state}
    try:
        status = session.try_call(lambda engine: engine.status().to_json(), timeout=2.0)
    except Unavailable as exc:
        env = {k: session.environ[k] for k in ("CAIRN_STORE", "CAIRN_HOME") if session.environ.get(k)}
        return {"ok": False, "error": str(exc), **base, **env}
    if status is None:
        try:
            base["store"] = session.name
        except CairnError:
            pass
        return {"ok": True, "busy": "another call holds the store (probably waiting for the embedding model to "
                                    "load); ask again shortly", **base}
    keep = ("store", "path", "chosen_by", "counts", "vector_backend", "embedding_model", "model_loaded",
            "keyword_only", "keyword_only_reason", "store_embedding_model")
    return {"ok": True, **{k: status[k] for k in keep if status.get(k) is not None}, **base}


def _tool(spec: ToolSpec, session: Session) -> Tool:
    """The SDK tool for one row of TOOLS: a function whose signature is the row's arguments, each
    typed from the catalogue (cairn.adapters.schema), so the SDK checks them and shows their schema."""
    params = [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY, annotation=schema.annotated(a, help=a.brief),
                                default=inspect.Parameter.empty if a.required else schema.default(a))
              for a in spec.args]

    def call(**arguments: Any) -> str:
        if spec.run is None:
            return render.dumps(_status(session))
        run = spec.run
        try:
            return render.dumps(session.call(lambda engine: run(engine, dict(arguments)),
                                             embeds=spec.embeds_for(arguments), writes=spec.writes_for(arguments)))
        except (Unavailable, CairnError) as exc:
            raise ToolError(str(exc)) from None

    call.__name__ = spec.name
    call.__doc__ = spec.description
    call.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = {**{p.name: p.annotation for p in params}, "return": str}
    made = Tool.from_function(call, title=spec.title, annotations=spec.annotations, structured_output=False)
    made.parameters = _compact(made.parameters)
    return made


def build_server(session: Session) -> CairnServer:
    """The MCP server over `session`: one tool per row of TOOLS, the model warmed after the handshake."""

    async def warm_after_handshake(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "initialize":  # the client has its answer: now the model may take the CPU
            session.start_warmup()
        return result

    return CairnServer("cairn", version=cairn.__version__, instructions=INSTRUCTIONS,
                       tools=[_tool(spec, session) for spec in TOOLS], middleware=[warm_after_handshake],
                       log_level="WARNING")


PLUGIN_ROOT = Path(__file__).resolve().parents[4]  # engine/cairn/adapters/mcp/server.py -> the plugin


def process_environ() -> Mapping[str, str]:
    """This process's environment: the MCP server's one read of it (main, http_app), passed down."""
    return os.environ


def project_dir(environ: Mapping[str, str]) -> Path | None:
    """CLAUDE_PROJECT_DIR, else the working directory (an unexpanded "${...}" counts as unset).
    None when neither names the project: the working directory is the plugin's own folder (some
    clients start servers there), whose store would be shared by every project and seen by none of
    their hooks."""
    value = environ.get("CLAUDE_PROJECT_DIR", "")
    if value and "${" not in value and Path(value).is_dir():
        return Path(value)
    if value:
        log.warning("CLAUDE_PROJECT_DIR=%r is not a folder; using the working directory", value)
    cwd = Path.cwd().resolve()
    plugin_roots = {PLUGIN_ROOT, *([Path(environ["CLAUDE_PLUGIN_ROOT"]).resolve()]
                                   if environ.get("CLAUDE_PLUGIN_ROOT") else [])}
    if any(cwd == root or cwd.is_relative_to(root) for root in plugin_roots):
        log.warning("started in the plugin's folder %s without CLAUDE_PROJECT_DIR: the project is unknown", cwd)
        return None
    return cwd


EOF_GRACE_S = 1.0  # after stdin closes, how long running calls may still finish (then exit)
PARENT_POLL_S = 0.25


def _start(target: Callable[[], object], name: str) -> None:
    threading.Thread(target=target, name=name, daemon=True).start()


def _watch_parent(stop: Callable[[int], None]) -> None:
    """Exit when the client that started us dies (even by SIGKILL, when stdin may stay open because
    another process shares the pipe): we are then re-parented, so getppid() changes."""
    parent = os.getppid()
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            log.warning("the client (pid %d) is gone; exiting", parent)
            stop(0)
            return


def _log_to_stderr(environ: Mapping[str, str]) -> None:
    level = environ.get("CAIRN_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=logging.getLevelNamesMapping().get(level, logging.WARNING),
                        format="cairn-mcp %(levelname)s %(name)s: %(message)s")


def main(store: str | None = None, *, defer_review: bool = False, environ: Mapping[str, str] | None = None) -> None:
    """Serve over stdio until the client closes stdin: the plugin's launcher (mcp/server.py) and
    `cairn serve --transport stdio` both run this. store: an explicitly chosen store name (None:
    CAIRN_STORE, else the project of CLAUDE_PROJECT_DIR or the working directory). defer_review:
    the plugin's launcher, whose SessionEnd hook queues what the session's writes left unresolved
    (Session). environ: the process's environment (default: process_environ())."""
    environ = process_environ() if environ is None else environ
    _log_to_stderr(environ)
    session = Session(project_dir(environ), store=store, defer_review=defer_review, environ=environ)

    def stop(code: int) -> None:
        # os._exit: a worker thread blocked on stdin or in a model load must not keep the process alive.
        session.close(timeout=0.5)
        logging.shutdown()
        sys.stderr.flush()
        os._exit(code)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop(0))
    server = build_server(session)
    # At stdin EOF the SDK waits for running tool calls (one may wait on the model): give them a
    # moment, then go, so the client never waits for us.
    def leave_after_grace() -> None:
        time.sleep(EOF_GRACE_S)
        stop(0)

    server.on_stdin_eof = lambda: _start(leave_after_grace, "cairn-eof")
    _start(lambda: _watch_parent(stop), "cairn-parent")
    code = 0
    try:
        server.run("stdio")  # returns at stdin EOF
    except Exception:
        log.exception("the MCP server stopped")
        code = 1
    stop(code)


def http_app(store: str | None = None, *, max_body_bytes: int,
             environ: Mapping[str, str] | None = None) -> tuple[Any, Session]:
    """The same tools over MCP's streamable HTTP transport, at /mcp: (the ASGI app, its session).
    Host, Origin, token and size checks are the caller's (cairn.adapters.http.Guard wraps this
    app); the SDK's own Host check is off because the guard knows the bound address and tokens.
    environ: the process's environment (default: process_environ())."""
    from mcp.server.transport_security import TransportSecuritySettings

    environ = process_environ() if environ is None else environ
    _log_to_stderr(environ)
    session = Session(project_dir(environ), store=store, environ=environ)
    app = build_server(session).streamable_http_app(
        streamable_http_path="/mcp", max_request_body_size=max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return app, session


if __name__ == "__main__":
    main()
