"""Serving and wiring: serve, token, config (MCP clients), hook."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

import cairn

from ._common import _emit, cli, environ

if TYPE_CHECKING:
    pass


@cli.command()
@click.option("--transport", type=click.Choice(["stdio", "http", "mcp-http"]), default="stdio", show_default=True,
              help="stdio: MCP on stdin/stdout (what the plugin runs); http: the REST API and the console; "
                   "mcp-http: MCP over streamable HTTP at /mcp.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (http, mcp-http). Any address but loopback needs a token.")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="Port (http, mcp-http).")
@click.option("--store", "store_name", metavar="NAME",
              help="Store to serve (default: $CAIRN_STORE, else this project's). Over http a request may name "
                   "another with ?store=NAME.")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="Allow cross-origin requests from ORIGIN (e.g. http://localhost:3000); may repeat. None by default.")
@click.option("--max-body-bytes", type=click.IntRange(1024), default=1024 * 1024, show_default=True,
              help="Largest request body accepted (http, mcp-http).")
def serve(transport: str, host: str, port: int, store_name: str | None, cors_origins: tuple[str, ...],
          max_body_bytes: int) -> None:
    """Serve this store to any client: MCP over stdio or streamable HTTP, or REST JSON with the review
    console at http://HOST:PORT/ (docs/http.md). Runs until stopped (Ctrl-C, SIGTERM, or stdin EOF on stdio)."""
    if transport == "stdio":
        from ..mcp.server import main as serve_stdio

        serve_stdio(store=store_name, environ=environ())
        return
    from .. import http
    from ..tokens import TokenFile, tokens_path

    tokens = TokenFile(tokens_path(environ()))
    try:
        http.check_bind(host, tokens)
        sock = http.bind(host, port)
    except http.RefusedToStart as exc:
        raise cairn.InvalidInput(str(exc)) from None
    policy = http.Policy(bind_host=host, tokens=tokens, max_body_bytes=max_body_bytes, cors_origins=cors_origins)
    if transport == "mcp-http":
        from ..mcp.server import http_app
        from ..mcp.tools import reads_only

        app, session = http_app(store_name, max_body_bytes=max_body_bytes, environ=environ())
        policy.mcp_store = session.name
        policy.reads_only = reads_only
        where, stores = f"http://{_url_host(host)}:{port}/mcp", None
    else:
        stores = http.Stores(Path.cwd(), store_name, environ())
        stores.default.start_warmup()
        app = http.rest_app(stores)
        where = f"http://{_url_host(host)}:{port}/"
    name = policy.mcp_store or (stores.default.name if stores else "")
    click.echo(f"cairn: serving store {name} over {transport} at {where}"
               + (" (tokens required)" if tokens.tokens() or not http.is_loopback(host) else ""), err=True)
    try:
        http.run(http.guarded(app, policy), sock)
    finally:
        if stores is not None:
            stores.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@cli.group()
def token() -> None:
    """Access tokens for `cairn serve` over HTTP (stored hashed in the data root, shown once)."""


@token.command(name="create")
@click.argument("name")
@click.option("--store", "stores", multiple=True, metavar="NAME",
              help="Limit the token to this store (may repeat; `global` is the global store). Default: every store.")
@click.option("--read-only", is_flag=True, help="The token may only read.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def token_create(name: str, stores: tuple[str, ...], read_only: bool, as_json: bool) -> None:
    """Create a token called NAME and print it once: it cannot be shown again."""
    from .. import tokens

    known = {s["name"] for s in cairn.list_stores(env=environ())} | {cairn.GLOBAL_STORE}
    unknown = [s for s in stores if s not in known]
    if unknown:  # a typo would make a token that never works
        raise cairn.InvalidInput(f"no store named {', '.join(map(repr, unknown))}; the stores are: "
                                 f"{', '.join(sorted(known))} (create one with `cairn stores create NAME`)")
    secret, record = tokens.create(name, stores=stores, read_only=read_only, env=environ())

    def human() -> None:
        click.echo(secret)
        limits = ", ".join([*(["read-only"] if read_only else []), *([f"stores {', '.join(stores)}"] if stores
                                                                       else [])]) or "every store, read and write"
        click.echo(f"token {record.name} ({record.id}): {limits}. Shown once: keep it now.", err=True)

    _emit(as_json, {"token": secret, **record.to_json()}, human)


@token.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def token_list(as_json: bool) -> None:
    """The tokens on file (names and limits; never the tokens themselves)."""
    from .. import tokens

    rows = [t.to_json() for t in tokens.load(tokens.tokens_path(environ()))]

    def human() -> None:
        for r in rows:
            limits = ("read-only " if r["read_only"] else "") + (",".join(r["stores"]) or "all stores")
            click.echo(f"{r['id']}  {r['name']:<24} {limits:<30} created {r['created_at_iso']}")
        if not rows:
            click.echo("no tokens")

    _emit(as_json, {"tokens": rows}, human)


@token.command(name="revoke")
@click.argument("name_or_id")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def token_revoke(name_or_id: str, as_json: bool) -> None:
    """Revoke the token with this name or id; a running server refuses it from its next request."""
    from .. import tokens

    gone = tokens.revoke(name_or_id, env=environ())
    _emit(as_json, {**gone.to_json(), "revoked": True}, lambda: click.echo(f"revoked token {gone.name} ({gone.id})"))


@cli.command(name="config")
@click.option("--client", type=click.Choice(["claude", "opencode", "cursor", "codex", "generic"]), required=True,
              help="The MCP client to register Cairn's server with.")
@click.option("--dry-run", is_flag=True, help="Print what would be written, and where; change nothing.")
@click.option("--store", "store_name", metavar="NAME", help="Serve this store (default: the client's project's).")
@click.option("--command", "command", metavar="PATH",
              help="How the client starts cairn (default: this cairn's absolute path).")
def config_(client: str, dry_run: bool, store_name: str | None, command: str | None) -> None:
    """Register Cairn's MCP server (stdio) with a client (--client): cursor and opencode get it merged into the
    project's config file, codex into ~/.codex/config.toml; claude and generic print the command or
    snippet to use. CAIRN_HOME (when not the default folder) and CAIRN_STORE go into its env, since
    a client started from a GUI does not see your shell's. With --dry-run, only print."""
    import shutil

    from ..clients import apply, registration, server_env

    running = Path(sys.argv[0])
    command = command or shutil.which("cairn") or (str(running.absolute()) if running.name == "cairn" else "cairn")
    reg = registration(client, command=command, store=store_name, env=server_env(environ()), environ=environ())
    if reg.target is None or dry_run:
        if reg.target is not None:
            click.echo(f"# would be merged into {reg.target}", err=True)
        click.echo(reg.snippet, nl=False)
        return
    done = apply(reg)
    click.echo(f"{done}: {reg.target} ({client} runs `{command} serve --transport stdio`)")


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("event")
@click.argument("args", nargs=-1)
def hook(event: str, args: tuple[str, ...]) -> None:
    """Run a Claude Code hook (stdin: the hook's JSON): EVENT is SessionStart (SessionStart:rest,
    the brief's second part), UserPromptSubmit, PreToolUse, PostToolUse, SubagentStart, Stop,
    PreCompact or SessionEnd (hooks/hooks.json); or `pause SESSION_ID [off]`. Fails open: exit 0
    whatever happens; errors go to hooks.log."""
    from ..claude.hook_process import _log_to_file, hook_main

    try:
        _log_to_file(force=True)
    except Exception:  # noqa: BLE001 - no log file (an unwritable data root): the hook still runs, fails open
        pass
    hook_main([event, *args], hook_process=True)
