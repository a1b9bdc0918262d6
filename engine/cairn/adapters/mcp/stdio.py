"""The MCP server's stdin, read so that every line gets an answer and the process ends with its client.

The mcp SDK's stdio transport drops a line it cannot validate without replying, so a client waits
forever for the answer to a malformed request. Here each line is checked first, as JSON-RPC 2.0
asks (https://www.jsonrpc.org/specification#error_object), and a bad one is answered at once:
- not UTF-8, not JSON: -32700 Parse error, id null;
- JSON that is not a valid request, notification or response (no "jsonrpc": "2.0", a `method`
  that is not a string, `params` that is not an object, an id that is neither a string nor an
  integer, a lone surrogate in a string, nesting too deep): -32600 Invalid Request, with the id
  when it can be read, else null.
Only lines that pass reach the SDK. The stream also reports end of input, so the server can exit
promptly even while a tool call is still running in a worker thread.

The SDK's own stdio transport diverts fd 0 to the null device while it serves (so a child process
never reads the client's bytes); `claim_stdin` does the same for the stream read here.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

PARSE_ERROR = types.PARSE_ERROR
INVALID_REQUEST = types.INVALID_REQUEST
MAX_DEPTH = 64  # far deeper than any MCP message; deeper JSON is refused before it can exhaust a stack


def claim_stdin() -> BinaryIO:
    """The client's stdin as a private binary stream; fd 0 then reads the null device."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    return os.fdopen(private, "rb", buffering=0 if sys.platform == "win32" else -1)


def _depth_ok(value: Any, limit: int = MAX_DEPTH) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= c <= "\udfff" for c in item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _readable_id(message: Any) -> str | int | None:
    if isinstance(message, dict):
        ident = message.get("id")
        if isinstance(ident, str) and not _has_lone_surrogate(ident) or isinstance(ident, int) and not isinstance(
                ident, bool):
            return ident
    return None


def check_line(raw: bytes) -> tuple[str | None, types.JSONRPCError | None]:
    """One line from the client: (the line to pass on, None) or (None, the error to answer).
    (None, None) for a blank line, which JSON-RPC ignores."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, _error(None, PARSE_ERROR, f"Parse error: the line is not valid UTF-8 (byte {exc.start})")
    if not line.strip():
        return None, None
    try:
        message = json.loads(line)
    except RecursionError:
        return None, _error(None, INVALID_REQUEST, f"Invalid Request: nested deeper than {MAX_DEPTH} levels")
    except ValueError as exc:
        return None, _error(None, PARSE_ERROR, f"Parse error: {getattr(exc, 'msg', exc)}")
    ident = _readable_id(message)
    problem = _problem(message)
    if problem is None:
        try:
            types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        except Exception as exc:  # pydantic's ValidationError: the SDK would drop it without a word
            first: dict[str, Any] = getattr(exc, "errors", lambda: [{}])()[0]
            where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "message"
            problem = f"{where}: {first.get('msg', 'not a JSON-RPC 2.0 message')}"
    if problem is not None:
        return None, _error(ident, INVALID_REQUEST, f"Invalid Request: {problem}")
    return line, None


def _problem(message: Any) -> str | None:
    """What makes `message` an invalid JSON-RPC 2.0 message for MCP, or None."""
    if not isinstance(message, dict):
        return "expected a JSON object (MCP sends no batches)"
    if not _depth_ok(message):
        return f"nested deeper than {MAX_DEPTH} levels"
    if message.get("jsonrpc") != "2.0":
        return 'missing "jsonrpc": "2.0"'
    if _has_lone_surrogate(message):
        return "a string holds a lone surrogate (not valid Unicode)"
    if "id" in message and _readable_id(message) is None and not ("error" in message and message["id"] is None):
        return "id must be a string or an integer"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "method must be a string"
        if "params" in message and not isinstance(message["params"], dict):
            return "params must be an object"
    elif "result" not in message and "error" not in message:
        return "neither a request (method) nor a response (result or error)"
    return None


def _error(ident: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message))


class CheckedStdin:
    """An async iterable of the client's valid lines (what the SDK's stdio_server reads as stdin).

    Each invalid line is answered on the server's write stream, given by `answer_on` once the
    transport is up; on end of input `on_eof` is called (the server then exits promptly)."""

    def __init__(self, source: BinaryIO, on_eof: Callable[[], None] = lambda: None):
        self._source = anyio.wrap_file(source)
        self._on_eof = on_eof
        self._write: MemoryObjectSendStream[SessionMessage] | None = None
        self._ready = anyio.Event()

    def answer_on(self, write_stream: MemoryObjectSendStream[SessionMessage]) -> None:
        self._write = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        try:
            while True:
                raw = await self._source.readline()
                if not raw:
                    break
                line, error = check_line(raw)
                if line is not None:
                    yield line
                elif error is not None:
                    await self._ready.wait()
                    assert self._write is not None
                    try:
                        await self._write.send(SessionMessage(error))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        break  # the server is shutting down
        finally:
            self._on_eof()


async def serve(server: Server, on_eof: Callable[[], None]) -> None:
    """Run the low-level MCP `server` on this process's stdio, every line checked (CheckedStdin).

    The SDK's own stdio_server runs the transport: only its stdin is replaced, so stdout keeps the
    SDK's framing and its diversion of fd 1 (stray prints go to stderr)."""
    stdin = CheckedStdin(claim_stdin(), on_eof)
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
        stdin.answer_on(write_stream)
        await server.run(read_stream, write_stream, server.create_initialization_options())
