"""A fake Anthropic Messages API on 127.0.0.1 for driving the real Claude Code CLI offline.

The server answers ``POST /v1/messages`` (any query string) with SSE streaming, or with plain
JSON when the request says ``"stream": false``. What the fake model says is decided by a
*script*: a callable that gets the parsed request body and returns a :class:`Text`, a
:class:`ToolUse`, or a list of them (one content block each). :func:`steps` builds a stateless
script from a list of replies: the next reply is the first one not yet visible in ``messages``.

Every request is recorded (:attr:`FakeAnthropicAPI.requests`) so tests can assert on exactly what
Claude Code sent; the ``find_*`` helpers search those bodies.
"""

from __future__ import annotations

import json
import re
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Text:
    """A text content block; a reply made only of text ends the turn (``end_turn``)."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """A tool_use content block. The id defaults to a fresh, stable ``toolu_e2e_...`` id."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: f"toolu_e2e_{uuid.uuid4().hex[:20]}")


Block = Text | ToolUse
Reply = Block | Sequence[Block]
Script = Callable[[dict[str, Any]], Reply]

DONE_TEXT = "(fake model: script finished)"


# --------------------------------------------------------------------------- scripts


def assistant_blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield every content block of every assistant message in a request body (str → text block)."""
    for msg in body.get("messages", []):
        if msg.get("role") != "assistant":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            yield {"type": "text", "text": content}
        elif isinstance(content, list):
            yield from (b for b in content if isinstance(b, dict))


def step_done(body: dict[str, Any], step: Reply) -> bool:
    """True if ``step`` (a block, or a list of blocks) already appears in the body's assistant messages.

    A :class:`ToolUse` is matched by its id; a :class:`Text` by its text appearing inside an
    assistant text block, so give every scripted text reply a unique marker. A list step counts
    as done when any of its blocks is found.
    """
    seen = list(assistant_blocks(body))
    for want in _blocks(step):
        for block in seen:
            if isinstance(want, ToolUse) and block.get("type") == "tool_use" and block.get("id") == want.id:
                return True
            if isinstance(want, Text) and block.get("type") == "text" and want.text in block.get("text", ""):
                return True
    return False


def steps(*replies: Reply, final: Reply | None = None) -> Script:
    """Return a stateless script replying with the first of ``replies`` not yet in ``messages``.

    Each reply is a block or a list of blocks (e.g. ``[Text("looking"), ToolUse(...)]``). When
    every step has been played the script replies ``final`` (default: a text :data:`DONE_TEXT`).
    Being stateless, it is unaffected by retries, side requests or a second session.
    """
    last = final or Text(DONE_TEXT)

    def script(body: dict[str, Any]) -> Reply:
        for step in replies:
            if not step_done(body, step):
                return step
        return last

    return script


# --------------------------------------------------------------------------- wire format


def _blocks(reply: Reply) -> list[Block]:
    return [reply] if isinstance(reply, (Text, ToolUse)) else list(reply)


def _block_json(block: Block) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}


def _stop_reason(blocks: list[Block]) -> str:
    return "tool_use" if any(isinstance(b, ToolUse) for b in blocks) else "end_turn"


def message_json(reply: Reply, model: str) -> dict[str, Any]:
    """Return the complete (non-streaming) Message object for a reply."""
    blocks = _blocks(reply)
    return {
        "id": f"msg_e2e_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_block_json(b) for b in blocks],
        "stop_reason": _stop_reason(blocks),
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }


def sse_events(reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield the ``(event type, data)`` pairs of a streamed reply, in wire order."""
    blocks = _blocks(reply)
    start = message_json([], model) | {"stop_reason": None}
    start["usage"] = start["usage"] | {"output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(blocks):
        if isinstance(block, Text):
            head: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block.text}
        else:
            head = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.input)}
        yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": head}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": _stop_reason(blocks), "stop_sequence": None},
                            "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


# --------------------------------------------------------------------------- server


@dataclass
class RecordedRequest:
    """One HTTP request received: ``body`` is the parsed JSON (None if empty or not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one response per connection, closed after it

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
        pass

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        rec = RecordedRequest(self.command, self.path, dict(self.headers.items()), body)
        api = self.server.api
        with api._lock:
            api.requests.append(rec)
        return rec

    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        rec = self._record()
        route = self.path.split("?", 1)[0].rstrip("/")
        if route == "/v1/messages" and isinstance(rec.body, dict):
            self._messages(rec.body)
        elif route == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": len(json.dumps(rec.body)) // 4})
        else:
            self._send_json(200, {})

    def do_GET(self) -> None:  # noqa: N802
        self._record()
        self._send_json(200, {})

    do_HEAD = do_GET

    def _messages(self, body: dict[str, Any]) -> None:
        api = self.server.api
        model = str(body.get("model", "claude-fake"))
        try:
            reply = api.script(body)
        except Exception as exc:  # a broken script is a test bug: report it, fail the request
            with api._lock:
                api.errors.append("".join(traceback.format_exception(exc)))
            self._send_json(500, {"type": "error", "error": {"type": "api_error", "message": repr(exc)}})
            return
        with api._lock:
            api.replies.append(reply)
        if not body.get("stream"):
            self._send_json(200, message_json(reply, model))
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for event, data in sse_events(reply, model):
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False
    api: FakeAnthropicAPI


class FakeAnthropicAPI:
    """A fake Messages API bound to 127.0.0.1 on an ephemeral port.

    Use as a context manager or call :meth:`start` / :meth:`stop`. ``script`` may be replaced at
    any time (``api.script = steps(...)``). Attributes: ``requests`` (every request, in order),
    ``replies`` (what the script returned), ``errors`` (tracebacks of script failures).
    """

    def __init__(self, script: Script | Sequence[Reply] | None = None) -> None:
        self.script: Script = self._as_script(script)
        self.requests: list[RecordedRequest] = []
        self.replies: list[Reply] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @staticmethod
    def _as_script(script: Script | Sequence[Reply] | None) -> Script:
        if script is None:
            return steps()
        if callable(script):
            return script
        return steps(*script)

    def set_script(self, script: Script | Sequence[Reply]) -> None:
        """Replace the script; a list of replies is wrapped with :func:`steps`."""
        self.script = self._as_script(script)

    # lifecycle -------------------------------------------------------------

    def start(self) -> FakeAnthropicAPI:
        """Bind 127.0.0.1:0, serve in a daemon thread, and return self."""
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.api = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="fake-anthropic-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and join the thread (idempotent)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAnthropicAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (server must be started)."""
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the value for ANTHROPIC_BASE_URL."""
        return f"http://127.0.0.1:{self.port}"

    # queries ---------------------------------------------------------------

    def message_bodies(self) -> list[dict[str, Any]]:
        """Return the parsed bodies of all ``POST /v1/messages`` requests, in order."""
        with self._lock:
            reqs = list(self.requests)
        return [r.body for r in reqs
                if r.method == "POST" and r.path.split("?", 1)[0].rstrip("/") == "/v1/messages"
                and isinstance(r.body, dict)]

    def find_text(self, needle: str) -> list[tuple[int, str, str]]:
        """Return ``(request index, location, text)`` for every text in a messages body containing ``needle``.

        ``location`` is like ``system[0]``, ``messages[2].content[1]`` or
        ``messages[3].content[0].content[0]`` (inside a tool_result). Request index counts
        only ``/v1/messages`` bodies.
        """
        return [(i, loc, text) for i, body in enumerate(self.message_bodies())
                for loc, text in iter_texts(body) if needle in text]

    def hook_context(self, event: str) -> list[str]:
        """Return what follows ``"<event> hook additional context: "`` in each text carrying it.

        Claude Code 2.1.328 puts hook context in a ``role: "system"`` message. On the first turn,
        SessionStart and UserPromptSubmit context share one text with other system content (the
        environment block, the skills list, the date), separated by blank lines, so each string
        returned *starts with* the hook's additionalContext but may run on: compare with
        ``startswith`` or use :meth:`has_hook_context`. Deduplicated, in order of first appearance.
        Tool and subagent events carry their matcher in the label ("PreToolUse:Read hook additional
        context: ...", "SubagentStart:general-purpose ..."): ``event`` matches them all.
        """
        marker = hook_marker(event)
        found: list[str] = []
        for _, _, text in self.find_text(" hook additional context: "):
            for chunk in marker.split(text)[2::2]:  # [before, matcher, context, matcher, context, ...]
                if chunk not in found:
                    found.append(chunk)
        return found

    def has_hook_context(self, event: str, context: str) -> bool:
        """True if some request carried ``context`` as ``event``'s hook additionalContext."""
        return any(chunk.startswith(context) for chunk in self.hook_context(event))

    def find_tool_result(self, tool_use_id: str) -> dict[str, Any] | None:
        """Return the first tool_result block answering ``tool_use_id`` (None if never sent)."""
        for body in self.message_bodies():
            for msg in body.get("messages", []):
                content = msg.get("content")
                for block in content if isinstance(content, list) else []:
                    if (isinstance(block, dict) and block.get("type") == "tool_result"
                            and block.get("tool_use_id") == tool_use_id):
                        return block
        return None

    def tool_names(self, index: int = -1) -> list[str]:
        """Return the names in ``tools[]`` of the messages request at ``index`` (default: last)."""
        return [t.get("name", "") for t in self.message_bodies()[index].get("tools", [])]


def hook_marker(event: str) -> re.Pattern[str]:
    """The label Claude Code 2.1.328 puts before a hook's additionalContext: ``"<event> hook additional
    context: "``, or for an event with a matcher ``"<event>:<tool or agent type> hook additional
    context: "`` (PreToolUse, PostToolUse, SubagentStart). The matcher is the pattern's only group."""
    return re.compile(rf"(?<![\w:]){re.escape(event)}(?::([\w.-]+))? hook additional context: ")


def hook_contexts_in(body: dict[str, Any], event: str) -> list[tuple[int, str, str]]:
    """``(message index, matcher, context)`` for each ``event`` hook context in a request body's
    messages, in order; matcher is "" for an event without one. A context runs to the end of its
    text: cut it where Claude Code's own system text begins if the event shares its message."""
    marker = hook_marker(event)
    found: list[tuple[int, str, str]] = []
    for loc, text in iter_texts(body):
        if not loc.startswith("messages["):
            continue
        index = int(loc[len("messages["):loc.index("]")])
        parts = marker.split(text)  # [before, matcher, context, matcher, context, ...]
        found += [(index, parts[i] or "", parts[i + 1]) for i in range(1, len(parts) - 1, 2)]
    return found


def tool_result_text(block: dict[str, Any]) -> str:
    """Return the text of a tool_result block (its string content, or its text parts joined)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def iter_texts(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Yield ``(location, text)`` for every text in a messages body: system, messages, tool results."""
    system = body.get("system")
    if isinstance(system, str):
        yield "system", system
    elif isinstance(system, list):
        for i, block in enumerate(system):
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                yield f"system[{i}]", block["text"]
    for m, msg in enumerate(body.get("messages", [])):
        content = msg.get("content")
        if isinstance(content, str):
            yield f"messages[{m}].content", content
            continue
        for b, block in enumerate(content or []):
            loc = f"messages[{m}].content[{b}]"
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                yield loc, block["text"]
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, str):
                    yield f"{loc}.content", inner
                for c, part in enumerate(inner if isinstance(inner, list) else []):
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        yield f"{loc}.content[{c}]", part["text"]
