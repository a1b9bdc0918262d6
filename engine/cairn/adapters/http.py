"""Cairn over HTTP: a REST JSON API, the review console, and the guard both HTTP transports share.

    cairn serve --transport http       # REST at /v1/..., the console at /
    cairn serve --transport mcp-http   # the MCP tools at /mcp (cairn.adapters.mcp.server.http_app)

Starlette routes run on uvicorn. Every route is one entry of ROUTES (docs/http.md is generated from
it) naming its operation in the catalogue (cairn.operations): a pydantic model derived from that
operation's arguments checks the body or query, then one engine call runs on the store's Session
(the MCP server's: opened lazily, calls serialised, model warmed in the background). Results are the
CLI's full JSON (Memory.to_json and friends, keys in docs/cli.md). Errors are JSON, always
{"error": CODE, "message": ...} with a code from ERRORS, never a traceback.

Guard (pure ASGI, in front of either app), in this order:
- Host: on a loopback bind only 127.0.0.1, localhost and [::1] (any port) are accepted, so a page on
  a rebound DNS name cannot talk to the server (421 host_not_allowed).
- Origin: a request with an Origin header must be same-origin or from a --cors-origin (403
  origin_not_allowed); CORS headers are sent only for --cors-origin origins.
- Size: a body over max_body_bytes is refused before it is read whole (413 body_too_large).
- Token: when tokens exist, or on any bind that is not loopback, every request but the console's
  static files needs `Authorization: Bearer <token>` (401 unauthorized); a read-only token cannot
  write, a token limited to stores cannot use another (403 read_only, forbidden_store). On /mcp a
  read-only token may call only the read-only tools.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import cairn
from cairn import (
    GLOBAL_STORE, CairnError, ConfigError,
    EmbedderUnavailable, InvalidInput, InvalidMemory, InvalidStoreName, InvalidTime, MaintenanceBusy,
    MemoryNotFound, NotCurrent, ProposalClosed, ProposalNotFound, SessionNotFound,
    StoreError, StoreNotFound,
)

from cairn import operations as ops

from . import schema
from .mcp.session import Session, Unavailable
from .tokens import Token, TokenFile, verify

if TYPE_CHECKING:
    import socket

log = logging.getLogger("cairn.http")

DEFAULT_PORT = 8765
DEFAULT_MAX_BODY_BYTES = 1024 * 1024  # a memory is at most 8 KiB; a request needs far less than this
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
CONSOLE = Path(__file__).resolve().parent / "console"
STATIC = {"/": ("index.html", "text/html"), "/console.js": ("console.js", "text/javascript"),
          "/console.css": ("console.css", "text/css")}
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    (b"cache-control", b"no-store"),
]

# -- errors: stable codes ---------------------------------------------------------------------------
# code -> (HTTP status, when). Engine errors map by class (most specific first, ENGINE_ERRORS).
ERRORS: dict[str, tuple[int, str]] = {
    "invalid_json": (400, "The body is not a JSON object."),
    "invalid_request": (400, "A field of the body or query is missing, of the wrong type, out of range or unknown; "
                             "`fields` lists each problem."),
    "invalid_memory": (400, "The engine refused the memory: empty or oversized text, unknown kind or importance out "
                            "of range (also the text of an `edit` verdict)."),
    "invalid_time": (400, "A time that cannot be parsed (ISO 8601 or epoch ms)."),
    "invalid_store_name": (400, "`store` is not a store name."),
    "invalid_input": (400, "Other input the engine refused (an empty query, an unknown search mode, an `edit` "
                           "without text, a keep_id that is not a source, promoting a memory that is not cold)."),
    "unauthorized": (401, "No token, or not a valid one, where one is required: send `Authorization: Bearer TOKEN`."),
    "read_only": (403, "A read-only token asked to write."),
    "forbidden_store": (403, "The token is limited to other stores (the global store counts as one: `global`)."),
    "origin_not_allowed": (403, "A cross-origin request from an origin not given with --cors-origin."),
    "memory_not_found": (404, "No memory with that id in the store or the global store."),
    "session_not_found": (404, "No captured session with that id."),
    "store_not_found": (404, "The named store does not exist (create it with `cairn stores create`)."),
    "not_found": (404, "No such route."),
    "method_not_allowed": (405, "The route exists, with another method."),
    "proposal_not_found": (404, "No review proposal with that id in the store."),
    "not_current": (409, "The memory was already superseded or forgotten; nothing was changed."),
    "proposal_closed": (409, "The proposal was decided already, has expired, or its memories changed since it was "
                             "made (stale); nothing was changed."),
    "maintenance_busy": (409, "Another maintenance run holds the store's lease; try again later."),
    "body_too_large": (413, "The body is larger than the server's limit (--max-body-bytes)."),
    "unsupported_media_type": (415, "A body that is not `Content-Type: application/json`."),
    "host_not_allowed": (421, "On a loopback bind, a Host header other than localhost, 127.0.0.1 or [::1]."),
    "config_error": (500, "The project's config file fails its schema; the message names the key."),
    "internal_error": (500, "A bug: the server log has the traceback; the response never does."),
    "store_unavailable": (503, "The store file cannot be used as it is (corrupted, newer schema, another model's "
                               "vectors, unsafe data root): `cairn doctor` says more."),
    "embedder_unavailable": (503, "No embedding model could be loaded."),
}
ENGINE_ERRORS: list[tuple[type[Exception], str]] = [
    (InvalidMemory, "invalid_memory"), (InvalidTime, "invalid_time"), (InvalidStoreName, "invalid_store_name"),
    (ConfigError, "config_error"), (InvalidInput, "invalid_input"), (MemoryNotFound, "memory_not_found"),
    (SessionNotFound, "session_not_found"), (NotCurrent, "not_current"), (StoreNotFound, "store_not_found"),
    (ProposalNotFound, "proposal_not_found"), (ProposalClosed, "proposal_closed"),
    (MaintenanceBusy, "maintenance_busy"), (StoreError, "store_unavailable"),
    (EmbedderUnavailable, "embedder_unavailable"),
]


class ApiError(Exception):
    """An error response: a code from ERRORS, a message, and extra keys for the body."""

    def __init__(self, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.code, self.message, self.extra = code, message, extra


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "message": message, **extra}


def error_response(code: str, message: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse(error_body(code, message, **extra), status_code=ERRORS[code][0], headers=headers)


def engine_error(exc: Exception) -> ApiError:
    for cls, code in ENGINE_ERRORS:
        if isinstance(exc, cls):
            return ApiError(code, str(exc))
    return ApiError("internal_error", "unexpected engine error; see the server log")


# -- request bodies and queries: derived from the catalogue (cairn.operations) ----------------------
# The path carries ids; the query string repeats a parameter for a list (kind=fact&kind=task), named
# in the singular.
RememberBody = schema.model(ops.REMEMBER, "RememberBody", args=ops.REMEMBER.pick(exclude=("source",)))
RecallBody = schema.model(ops.RECALL, "RecallBody")
ListQuery = schema.model(ops.LIST, "ListQuery", rename={"kinds": "kind", "tags": "tag"})
ReplaceBody = schema.model(ops.REPLACE, "ReplaceBody", args=ops.REPLACE.pick(exclude=("id",)))
SessionSearchBody = schema.model(ops.SEARCH_SESSIONS, "SessionSearchBody")
SessionsQuery = schema.model(ops.LIST_SESSIONS, "SessionsQuery")
ReadSessionQuery = schema.model(ops.READ_SESSION, "ReadSessionQuery",
                                args=ops.READ_SESSION.pick(exclude=("session_id",)))
QueueQuery = schema.model(ops.REVIEW_QUEUE, "QueueQuery", rename={"states": "state", "types": "type"})
ProposalDecideBody = schema.model(ops.REVIEW_DECIDE, "ProposalDecideBody",
                                  args=ops.REVIEW_DECIDE.pick(exclude=("proposal_id",)))
MaintainBody = schema.model(ops.MAINTAIN, "MaintainBody")


class NoInput(schema.Strict):
    pass


# -- the request context and the routes ------------------------------------------------------------
@dataclass
class Call:
    """One request as a handler sees it: its checked input, path parameters and token."""

    args: Any
    path: dict[str, str]
    token: Token | None
    store: str

    def allows(self, store: str) -> bool:
        return self.token is None or self.token.allows_store(store)

    def scope(self, scope: str | None) -> str | None:
        """The scope to use: a token without the global store gets `project` by default and is
        refused `global` and `all`."""
        if self.allows(GLOBAL_STORE):
            return scope
        if scope in ("global", "all"):
            raise ApiError("forbidden_store", f"this token may not use the {GLOBAL_STORE} store (scope {scope})")
        return "project"

    def own(self, engine: cairn.Cairn, memory_id: str) -> cairn.Memory:
        """The memory, if this token may see the store that holds it. Raises MemoryNotFound, ApiError."""
        memory = engine.get(memory_id)
        # Through its JSON: adapters never read a `.store` attribute (tests/test_architecture.py).
        if memory.to_json()["store"] == GLOBAL_STORE and not self.allows(GLOBAL_STORE):
            raise ApiError("forbidden_store", f"memory {memory_id} is in the {GLOBAL_STORE} store, which this token "
                                              "may not use")
        return memory


@dataclass(frozen=True)
class RouteSpec:
    method: str
    path: str
    summary: str
    handler: Callable[[cairn.Cairn, Call], Any]
    input: type[BaseModel] = NoInput
    body: bool = False          # input read from a JSON body (else from the query string)
    status: int = 200
    returns: str = ""
    errors: tuple[str, ...] = field(default_factory=tuple)
    op: ops.Operation = field(kw_only=True)  # the operation it offers (cairn.operations)

    @property
    def write(self) -> bool:
        """Whether it may write: refused to read-only tokens."""
        return self.op.writes

    @property
    def embeds(self) -> bool:
        """Whether it may need the embedding model (then it waits for the warm-up)."""
        return self.op.embeds


def _remember(engine: cairn.Cairn, call: Call) -> Any:
    a = schema.engine_kwargs(call.args)
    call.scope(a["scope"])
    return engine.remember(**a, source="user").to_json()


def _recall(engine: cairn.Cairn, call: Call) -> Any:
    a = schema.engine_kwargs(call.args)
    hits = engine.recall(**{**a, "scope": call.scope(a["scope"])})
    return {"hits": [h.to_json() for h in hits]} if hits else {"hits": [], "store": engine.name}


def _list(engine: cairn.Cairn, call: Call) -> Any:
    a = schema.engine_kwargs(call.args)
    memories = engine.list(**{**a, "scope": call.scope(a["scope"])})
    use = engine.usage_of([m.id for m in memories]) if memories else {}
    return {"memories": [{**m.to_json(), **({"usage": use[m.id]} if m.id in use else {})} for m in memories]}


def _get(engine: cairn.Cairn, call: Call) -> Any:
    return {"memory": call.own(engine, call.path["id"]).to_json()}


def _history(engine: cairn.Cairn, call: Call) -> Any:
    call.own(engine, call.path["id"])
    return {"chain": [m.to_json() for m in engine.history(call.path["id"])]}


def _replace(engine: cairn.Cairn, call: Call) -> Any:
    call.own(engine, call.path["id"])
    return engine.replace(call.path["id"], **schema.engine_kwargs(call.args), source="user").to_json()


def _forget(engine: cairn.Cairn, call: Call) -> Any:
    call.own(engine, call.path["id"])
    return {"memory": engine.forget(call.path["id"]).to_json()}


def _promote(engine: cairn.Cairn, call: Call) -> Any:
    call.own(engine, call.path["id"])
    return engine.review.promote(call.path["id"])


def _status(engine: cairn.Cairn, call: Call) -> Any:
    return engine.status().to_json()


def _search_sessions(engine: cairn.Cairn, call: Call) -> Any:
    hits = engine.sessions.search(**schema.engine_kwargs(call.args))
    return {"results": [r.to_json() for r in cairn.merge_session_hits(hits)], "time_window": hits.window_json()}


def _list_sessions(engine: cairn.Cairn, call: Call) -> Any:
    return {"sessions": [s.to_json() for s in engine.sessions.catalog(**schema.engine_kwargs(call.args))]}


def _read_session(engine: cairn.Cairn, call: Call) -> Any:
    info, turns = engine.sessions.read(call.path["id"], **schema.engine_kwargs(call.args))
    return {"session": info.to_json(), "turns": [t.to_json() for t in turns]}


def _queue(engine: cairn.Cairn, call: Call) -> Any:
    a = schema.engine_kwargs(call.args)
    proposals = engine.review.queue(**{**a, "states": a["states"] or ("pending",)})
    return {"proposals": [p.to_json() for p in proposals], "count": len(proposals)}


def _proposal(engine: cairn.Cairn, call: Call) -> Any:
    return engine.review.show(call.path["id"])


def _decide_proposal(engine: cairn.Cairn, call: Call) -> Any:
    return engine.review.decide(call.path["id"], **schema.engine_kwargs(call.args), by="http")


def _maintain(engine: cairn.Cairn, call: Call) -> Any:
    return engine.review.maintain(**schema.engine_kwargs(call.args))


def _maintenance_status(engine: cairn.Cairn, call: Call) -> Any:
    return engine.review.status()


_MEMORY = ("memory_not_found",)
ROUTES: list[RouteSpec] = [
    RouteSpec("GET", "/v1/status", "Which store and why, counts, model, whether recall is keyword-only.", _status,
              returns="`Status` (docs/cli.md, JSON keys).", op=ops.STATUS),
    RouteSpec("POST", "/v1/memories", "Remember: store one memory (source `user`).", _remember, RememberBody,
              body=True, status=201,
              returns="`RememberResult`: `status` (created or duplicate), `memory`, `superseded`, `conflicts`, "
                      "`related` (with `instruction`).",
              errors=("invalid_memory", "invalid_time"), op=ops.REMEMBER),
    RouteSpec("GET", "/v1/memories", "List memories, newest first.", _list, ListQuery,
              returns="`{\"memories\": [Memory]}`.", errors=("invalid_time",), op=ops.LIST),
    RouteSpec("POST", "/v1/recall", "Recall: hybrid search, best first (a read, though POST).", _recall, RecallBody,
              body=True, returns="`{\"hits\": [Hit]}`.", errors=("invalid_memory", "invalid_time"), op=ops.RECALL),
    RouteSpec("GET", "/v1/memories/{id}", "One memory, whatever its status.", _get,
              returns="`{\"memory\": Memory}`.", errors=_MEMORY, op=ops.GET),
    RouteSpec("GET", "/v1/memories/{id}/history", "The supersession chain through a memory, oldest first, with "
              "valid time and transaction time.", _history, returns="`{\"chain\": [Memory]}`.", errors=_MEMORY,
              op=ops.HISTORY),
    RouteSpec("POST", "/v1/memories/{id}/replace", "Replace: supersede a memory whose fact changed.", _replace,
              ReplaceBody, body=True, returns="`RememberResult`.",
              errors=(*_MEMORY, "not_current", "invalid_memory", "invalid_time"), op=ops.REPLACE),
    RouteSpec("DELETE", "/v1/memories/{id}", "Forget: erase a memory for good (a tombstone stays in history).",
              _forget, returns="`{\"memory\": Memory}` (the tombstone).", errors=_MEMORY, op=ops.FORGET),
    RouteSpec("POST", "/v1/sessions/search", "Search the captured turns of past sessions.", _search_sessions,
              SessionSearchBody, body=True,
              returns="`{\"results\": [SessionResult], \"time_window\": {expression, since, until} or null}`: "
                      "one result per session, best first; the date window the query named, ranked first.",
              errors=("invalid_input", "invalid_time"), op=ops.SEARCH_SESSIONS),
    RouteSpec("GET", "/v1/sessions", "Captured sessions, most recently active first.", _list_sessions,
              SessionsQuery, returns="`{\"sessions\": [SessionInfo]}`.", errors=("invalid_time",),
              op=ops.LIST_SESSIONS),
    RouteSpec("GET", "/v1/sessions/{id}", "A captured session's turns, paged by position.", _read_session,
              ReadSessionQuery, returns="`{\"session\": SessionInfo, \"turns\": [Turn]}`.",
              errors=("session_not_found",), op=ops.READ_SESSION),
    RouteSpec("GET", "/v1/review/proposals", "The durable review queue (as `cairn review list`): proposals from "
              "maintenance, possible conflicts and imported guidance.", _queue, QueueQuery,
              returns="`{\"proposals\": [Proposal], \"count\"}` (docs/cli.md, JSON keys).",
              errors=("invalid_input",), op=ops.REVIEW_QUEUE),
    RouteSpec("GET", "/v1/review/proposals/{id}", "One proposal with its evidence (as `cairn review show`).",
              _proposal, returns="`{\"proposal\", \"sources\", \"stale\", \"after\"}`.",
              errors=("proposal_not_found",), op=ops.REVIEW_SHOW),
    RouteSpec("POST", "/v1/review/proposals/{id}/decide", "The user's verdict on one proposal: approve, reject or "
              "edit; compare-and-set.", _decide_proposal, ProposalDecideBody, body=True,
              returns="`{\"proposal\", \"type\", \"state\", \"verdict\"}` and what was done.",
              errors=("proposal_not_found", "proposal_closed", "invalid_input", "invalid_memory"),
              op=ops.REVIEW_DECIDE),
    RouteSpec("POST", "/v1/memories/{id}/promote", "Promote: bring a memory back from the cold tier (into hooks "
              "and default recall).", _promote, returns="`{\"promoted\": id}`.",
              errors=(*_MEMORY, "invalid_input"), op=ops.PROMOTE),
    RouteSpec("POST", "/v1/maintain", "A maintenance run (as `cairn maintain`): a dry run unless `apply`.",
              _maintain, MaintainBody, body=True,
              returns="The run's report (docs/cli.md, `maintain --json`).", errors=("maintenance_busy",),
              op=ops.MAINTAIN),
    RouteSpec("GET", "/v1/maintain/status", "The last maintenance run, the lease, the queue's counts.",
              _maintenance_status, returns="As `cairn maintain --status --json`.", op=ops.MAINTENANCE_STATUS),
]
COMMON_ERRORS = ("invalid_json", "invalid_request", "unauthorized", "read_only", "forbidden_store",
                 "store_not_found", "invalid_store_name", "body_too_large", "unsupported_media_type",
                 "store_unavailable", "internal_error")


def _validation_fields(exc: ValidationError) -> list[dict[str, str]]:
    return [{"field": ".".join(str(p) for p in e["loc"]) or "body", "problem": e["msg"]} for e in exc.errors()]


def _query_input(request: Request, model: type[BaseModel]) -> dict[str, Any]:
    """Query parameters for `model`: list fields take every value of a repeated parameter."""
    out: dict[str, Any] = {}
    for key in request.query_params:
        if key == "store":
            continue
        info = model.model_fields.get(key)
        values = request.query_params.getlist(key)
        is_list = info is not None and getattr(info.annotation, "__origin__", None) is list
        out[key] = values if is_list else values[-1]
    return out


class Stores:
    """One Session per store name this server was asked for; the default one is the server's."""

    def __init__(self, project_dir: Path, store: str | None, environ: Mapping[str, str] | None = None):
        """environ: the server's environment (its root's; default cairn.process_env())."""
        self.project_dir = project_dir
        self.environ = environ
        self.default = Session(project_dir, store=store, environ=environ)
        self._named: dict[str, Session] = {}

    def get(self, name: str | None) -> Session:
        """The session for `name` (None: the server's store). Raises InvalidStoreName, StoreNotFound."""
        if not name:
            return self.default
        if name in self._named:
            return self._named[name]
        missing = cairn.resolve(name, cwd=self.project_dir, env=self.environ).missing()
        if missing is not None:
            raise missing
        session = self._named.setdefault(name, Session(self.project_dir, store=name, environ=self.environ))
        session.start_warmup()
        return session

    def close(self) -> None:
        for session in (self.default, *self._named.values()):
            session.close()


def _endpoint(spec: RouteSpec, stores: Stores) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        token: Token | None = request.scope.get("state", {}).get("cairn_token")
        try:
            if spec.write and token is not None and token.read_only:
                raise ApiError("read_only", f"token {token.name!r} is read-only; {spec.method} {spec.path} writes")
            if spec.body:
                if not request.headers.get("content-type", "").lower().startswith("application/json"):
                    raise ApiError("unsupported_media_type", "send the body as Content-Type: application/json")
                try:
                    raw = json.loads(await request.body())
                except (ValueError, UnicodeDecodeError):
                    raise ApiError("invalid_json", "the body is not valid JSON") from None
                if not isinstance(raw, dict):
                    raise ApiError("invalid_json", "the body must be a JSON object")
            else:
                raw = _query_input(request, spec.input)
            try:
                args = spec.input.model_validate(raw)
            except ValidationError as exc:
                raise ApiError("invalid_request", f"invalid {'body' if spec.body else 'query'} for "
                               f"{spec.method} {spec.path}", fields=_validation_fields(exc)) from None
            session = await run_in_threadpool(stores.get, request.query_params.get("store"))
            name = session.name
            if token is not None and not token.allows_store(name):
                raise ApiError("forbidden_store", f"token {token.name!r} may not use store {name!r}")
            call = Call(args=args, path=dict(request.path_params), token=token, store=name)
            result = await run_in_threadpool(session.call, lambda engine: spec.handler(engine, call),
                                             embeds=spec.embeds)
        except ApiError as exc:
            return error_response(exc.code, exc.message, **exc.extra)
        except Unavailable as exc:
            return error_response(engine_error(exc.cause).code if exc.cause else "store_unavailable", str(exc))
        except CairnError as exc:
            err = engine_error(exc)
            return error_response(err.code, err.message)
        except Exception:
            log.exception("%s %s failed", spec.method, spec.path)
            return error_response("internal_error", "unexpected error; see the server log")
        return JSONResponse(result, status_code=spec.status)

    return handle


def _static(name: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
    async def page(request: Request) -> Response:
        return FileResponse(CONSOLE / name, media_type=media_type)

    return page


def rest_app(stores: Stores) -> Starlette:
    """The REST API (ROUTES) and the console's static files, with JSON errors for unknown routes."""
    routes = [Route(s.path, _endpoint(s, stores), methods=[s.method]) for s in ROUTES]
    routes += [Route(path, _static(name, media), methods=["GET"]) for path, (name, media) in STATIC.items()]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "internal_error")
        return error_response(code, f"{request.method} {request.url.path}: {ERRORS[code][1]}")

    async def crash(request: Request, exc: Exception) -> Response:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response("internal_error", "unexpected error; see the server log")

    return Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: crash})


# -- the guard ------------------------------------------------------------------------------------------
def is_loopback(host: str) -> bool:
    """Whether binding `host` listens on this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The name part of a Host header: `localhost:8765` -> `localhost`, `[::1]:80` -> `[::1]`."""
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass
class Policy:
    """What the guard enforces. bind_host: the address served (loopback decides the Host check and
    whether tokens are required). cors_origins: origins allowed cross-origin (none by default).
    mcp_store: the store /mcp serves (for token store limits), None for the REST app."""

    bind_host: str
    tokens: TokenFile
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    cors_origins: tuple[str, ...] = ()
    mcp_store: str | None = None
    # reads_only(tool, arguments as sent): whether a read-only token may make this MCP tool call
    # (cairn.adapters.mcp.tools.reads_only for /mcp); none may by default.
    reads_only: Callable[[object, Any], bool] = field(default=lambda tool, arguments: False)

    @property
    def loopback(self) -> bool:
        return is_loopback(self.bind_host)


class Guard:
    """ASGI middleware in front of the REST or MCP app: Host, Origin, body size, token (see the module)."""

    def __init__(self, app: ASGIApp, policy: Policy):
        self.app, self.policy = app, policy

    async def _refuse(self, send: Send, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(error_body(code, message)).encode()
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *SECURITY_HEADERS, *((k.encode(), v.encode()) for k, v in (headers or {}).items())]
        await send({"type": "http.response.start", "status": ERRORS[code][0], "headers": raw})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan: the MCP app starts its session manager
            return
        policy = self.policy
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if policy.loopback and _host_name(host).lower() not in LOOPBACK_NAMES:
            return await self._refuse(send, "host_not_allowed", f"Host {host!r} is not this machine's loopback "
                                                                "name; use http://127.0.0.1:PORT")
        origin = headers.get("origin")
        cross = origin is not None and origin not in (f"http://{host}", f"https://{host}")
        if cross and origin not in policy.cors_origins:
            return await self._refuse(send, "origin_not_allowed", f"cross-origin request from {origin!r} refused "
                                                                  "(allow an origin with --cors-origin)")
        path, method = scope["path"], scope["method"]
        if method == "OPTIONS" and cross:  # a CORS preflight carries no token; CORS middleware answers it
            return await self.app(scope, receive, send)
        body, receive = await self._read_body(scope, receive, headers)
        if body is None:
            return await self._refuse(send, "body_too_large", f"the body is over {policy.max_body_bytes} bytes")
        token = None
        tokens = policy.tokens.tokens()
        static = method == "GET" and path in STATIC and policy.mcp_store is None
        if (tokens or not policy.loopback) and not static:
            scheme, _, presented = headers.get("authorization", "").partition(" ")
            token = verify(presented.strip(), tokens) if scheme.lower() == "bearer" and presented.strip() else None
            if token is None:
                return await self._refuse(send, "unauthorized", "send Authorization: Bearer TOKEN (create one with "
                                                                "`cairn token create NAME`)",
                                          {"www-authenticate": 'Bearer realm="cairn"'})
            if policy.mcp_store is not None:
                if not token.allows_store(policy.mcp_store):
                    return await self._refuse(send, "forbidden_store", f"token {token.name!r} may not use store "
                                                                       f"{policy.mcp_store!r}")
                if token.read_only and self._writes(body):
                    return await self._refuse(send, "read_only", f"token {token.name!r} is read-only; only the "
                                                                 "read-only tools may be called")
        scope.setdefault("state", {})["cairn_token"] = token
        await self.app(scope, receive, send)

    def _writes(self, body: bytes) -> bool:
        """Whether an MCP message (or batch) calls a tool that is not read-only; unreadable counts as one."""
        if not body:
            return False
        try:
            data = json.loads(body)
        except ValueError:
            return True
        messages = data if isinstance(data, list) else [data]
        for m in messages:
            if not isinstance(m, dict):
                return True
            if m.get("method") == "tools/call":
                params = m.get("params")
                if not isinstance(params, dict):
                    params = {}
                if not self.policy.reads_only(params.get("name"), params.get("arguments")):
                    return True
        return False

    async def _read_body(self, scope: Scope, receive: Receive, headers: dict[str, str]
                         ) -> tuple[bytes | None, Receive]:
        """The whole body (None when over the limit) and a receive that replays it to the app."""
        limit = self.policy.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return None, receive
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None, receive
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return body, replay


class SecurityHeaders:
    """Headers on every response: no sniffing, no referrer, a CSP that allows only this origin."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *((k, v) for k, v in SECURITY_HEADERS if k not in present)]
            await send(message)

        await self.app(scope, receive, with_headers)


def guarded(app: ASGIApp, policy: Policy) -> ASGIApp:
    """`app` behind the guard, with security headers, and CORS only for the configured origins."""
    if policy.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app = CORSMiddleware(app, allow_origins=list(policy.cors_origins),
                             allow_methods=["GET", "POST", "DELETE"],
                             allow_headers=["authorization", "content-type", "mcp-session-id",
                                            "mcp-protocol-version"])
    return Guard(SecurityHeaders(app), policy)


class RefusedToStart(Exception):
    """The server will not start as asked; the message says why and what to do."""


def check_bind(host: str, tokens: TokenFile) -> None:
    """Refuse a bind that is not loopback while no token exists. Raises RefusedToStart."""
    if not is_loopback(host) and not tokens.tokens():
        raise RefusedToStart(f"refusing to listen on {host} without a token: anyone who can reach it could read and "
                             "change memory. Create one with `cairn token create NAME`, or bind 127.0.0.1")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port, bound before anything says it is serving. Raises
    RefusedToStart naming the port when it is in use (or the address cannot be bound)."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a port in TIME_WAIT is free
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise RefusedToStart(f"port {port} on {host} is already in use by another process; stop it or "
                                 "choose another port with --port") from None
        raise RefusedToStart(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def run(app: ASGIApp, sock: socket.socket) -> None:
    """Serve `app` on the socket `bind` returned, with uvicorn, until SIGINT or SIGTERM."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", server_header=False, date_header=False,
                            proxy_headers=False, timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
