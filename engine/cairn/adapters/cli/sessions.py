"""Captured sessions: sessions search/list/show, import-sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

import cairn
from cairn import operations as ops

from ._common import _emit, _progress, argument, cli, option, store_options

if TYPE_CHECKING:
    from cairn import Cairn


@cli.group()
def sessions() -> None:
    """Captured conversations (Stop and PreCompact hooks, `import-sessions`): search, list, read."""


def _short(text: str, width: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _turn_line(turn: cairn.Turn, mark: str = "") -> str:
    when = cairn.format_time(turn.at) or "-"
    who = turn.speaker or turn.role
    return f"{mark}[{turn.session_id} #{turn.position} {who} {when[:16].replace('T', ' ')}] {_short(turn.text)}"


@sessions.command(name="search")
@argument(ops.SEARCH_SESSIONS.arg("query"))
@option(ops.SEARCH_SESSIONS.arg("mode"))
@option(ops.SEARCH_SESSIONS.arg("k"), "-k")
@option(ops.SEARCH_SESSIONS.arg("window"))
@option(ops.SEARCH_SESSIONS.arg("since"))
@option(ops.SEARCH_SESSIONS.arg("until"))
@option(ops.SEARCH_SESSIONS.arg("reference"))
@store_options(read_only=True, use_warm=True)
def sessions_search(memory: Cairn, as_json: bool, query: str, **options: Any) -> None:
    """Captured turns for QUERY, one result per session, best first: its best turns (marked >) with
    the turns around them, turns far less relevant than the best dropped. A time expression in
    QUERY ("last week", "in March", "3 days ago") ranks the turns of its window first; the JSON
    says which window in each result's "time_window"."""
    hits = memory.sessions.search(query, **options)
    results = cairn.merge_session_hits(hits)
    window = hits.window_json()

    def human() -> None:
        if window is not None:
            click.echo(f"time window: {window['expression']!r} = {window['since'][:10]} .. {window['until'][:10]} "
                       "(until excluded), ranked first")
        if not results:
            click.echo("no captured turns match")
        for n, result in enumerate(results, 1):
            click.echo(f"{n}. session {result.session_id} ({result.mode}, score {result.score:.4f})")
            last = None
            for turn in result.turns:
                if last is not None and turn.position > last + 1:
                    click.echo("     …")
                mark = "  >  " if turn.position in result.best else "     "
                when = (cairn.format_time(turn.at) or "-")[:16].replace("T", " ")
                click.echo(f"{mark}#{turn.position} {turn.speaker or turn.role} {when}  {_short(turn.text)}")
                last = turn.position

    _emit(as_json, [r.to_json() for r in results], human)


@sessions.command(name="list")
@option(ops.LIST_SESSIONS.arg("limit"))
@option(ops.LIST_SESSIONS.arg("since"))
@option(ops.LIST_SESSIONS.arg("until"))
@store_options(read_only=True)
def sessions_list(memory: Cairn, as_json: bool, **options: Any) -> None:
    """Captured sessions, most recently active first."""
    rows = memory.sessions.catalog(**options)

    def human() -> None:
        if not rows:
            click.echo("no captured sessions")
        for info in rows:
            when = (cairn.format_time(info.started_at) or "-")[:16].replace("T", " ")
            click.echo(f"{info.session_id}  {when}  {info.turn_count:>4} turns  {info.git_branch or '-'}  "
                       f"{_short(info.title or '', 80)}")

    _emit(as_json, [r.to_json() for r in rows], human)


@sessions.command(name="show")
@argument(ops.READ_SESSION.arg("session_id"))
@option(ops.READ_SESSION.arg("offset"))
@option(ops.READ_SESSION.arg("limit"))
@store_options(read_only=True)
def sessions_show(memory: Cairn, as_json: bool, session_id: str, offset: int, limit: int) -> None:
    """SESSION_ID's turns in order, paged (--offset, --limit)."""
    info, turns = memory.sessions.read(session_id, offset=offset, limit=limit)

    def human() -> None:
        click.echo(f"session {info.session_id}: {info.turn_count} turns, branch {info.git_branch or '-'}")
        for turn in turns:
            click.echo(_turn_line(turn))

    _emit(as_json, {"session": info.to_json(), "turns": [t.to_json() for t in turns]}, human)


@cli.command(name="import-sessions")
@click.option("--all", "all_projects", is_flag=True,
              help="Every project's transcripts, each into its own project's store (by the cwd they record).")
@click.option("--root", type=click.Path(file_okay=False, path_type=str),
              help="Claude Code's projects folder (default: $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects).")
@click.option("--locomo", "locomo", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Instead: import LoCoMo conversation JSON files (for the benchmark).")
@store_options
def import_sessions(memory: Cairn, as_json: bool, all_projects: bool, root: str | None,
                    locomo: tuple[str, ...]) -> None:
    """Capture existing Claude Code transcripts of this project (or --all). Resumable: each transcript
    continues where an earlier capture or import stopped; running it twice adds nothing."""
    from ..claude.transcripts import import_claude_transcripts

    if locomo:
        totals: dict[str, Any] = {"sessions": 0, "turns_added": 0}
        for path in locomo:
            done = memory.sessions.import_locomo(path)
            totals = {k: totals[k] + done[k] for k in totals}
    else:
        totals = import_claude_transcripts(memory, root=root, all_projects=all_projects, progress=_progress)

    def human() -> None:
        def counted(by_kind: dict[str, int]) -> str:
            return f"{sum(by_kind.values())} ({', '.join(f'{k} {n}' for k, n in sorted(by_kind.items()))})"

        if "files" in totals:
            click.echo(f"read {totals['files']} transcripts: {totals['turns_added']} turns added"
                       + (f", lines skipped {counted(totals['skipped'])}" if totals["skipped"] else "")
                       + (f", secrets redacted {counted(totals['redactions'])}" if totals["redactions"] else "")
                       + (f", {totals['private_spans']} private spans removed" if totals.get("private_spans") else ""))
        else:
            click.echo(f"imported {totals['sessions']} sessions, {totals['turns_added']} turns added")

    _emit(as_json, totals, human)
