"""The `cairn` command line: a thin layer over the engine API.

Every command takes --store NAME (else $CAIRN_STORE, else the project of the working directory)
and --json (stable keys, documented in docs/cli.md). Errors: one line on stderr, exit code 2.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .engine import SCOPES, Cairn
from .errors import CairnError
from .models import KINDS, SOURCES, Memory
from .paths import choose_store, data_root, stores_dir
from .store import Store
from .timeutil import format_date


def _emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human()


def _progress(items, total):
    from tqdm import tqdm

    return tqdm(items, total=total, file=sys.stderr, unit="batch", disable=not sys.stderr.isatty() and total < 2)


def store_options(fn: Callable) -> Callable:
    """--store, --create and --json on every command; opens the engine as `memory`."""

    @click.option("--store", "store_name", metavar="NAME", help="Store to use (default: $CAIRN_STORE, else this project's).")
    @click.option("--create", is_flag=True, help="Create the named store if it does not exist.")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
    @functools.wraps(fn)
    def wrapper(store_name: str | None, create: bool, as_json: bool, **kwargs: Any) -> None:
        embedder = None if kwargs.pop("keyword_only", False) else "auto"
        with Cairn.open(store_name, create=create, embedder=embedder, check_model=fn.__name__ != "reembed") as memory:
            fn(memory, as_json=as_json, **kwargs)

    return wrapper


def _memory_line(m: Memory) -> str:
    status = "" if m.status == "current" else f" ({m.status}{' by ' + m.superseded_by if m.superseded_by else ''})"
    tags = f" #{' #'.join(m.tags)}" if m.tags else ""
    text = m.text if m.text is not None else "[forgotten]"
    return f"{m.id}  [{m.kind}] {format_date(m.valid_from)}{status}{tags}\n    {text}"


def _split_tags(values: tuple[str, ...]) -> list[str]:
    return [t for v in values for t in v.split(",") if t.strip()]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cairn-memory")
@click.option("-v", "--verbose", is_flag=True, help="Log to stderr.")
def cli(verbose: bool) -> None:
    """Cairn: local-first, long-term memory for Claude Code."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="cairn: %(levelname)s: %(message)s")


@cli.command()
@click.argument("text")
@click.option("--kind", type=click.Choice(KINDS), default="fact", show_default=True)
@click.option("--tags", "tags", multiple=True, help="Comma-separated; may repeat.")
@click.option("--importance", type=int, default=3, show_default=True, help="1 (trivia) to 5 (critical).")
@click.option("--source", type=click.Choice(SOURCES), default="user", show_default=True)
@click.option("--valid-from", help="When it became true (ISO 8601; default: now).")
@click.option("--valid-to", help="When it stops being true (ISO 8601; default: open).")
@click.option("--replaces", metavar="ID", help="Supersede this memory.")
@click.option("--scope", type=click.Choice(["project", "global"]), default="project", show_default=True)
@click.option("--no-detect", is_flag=True, help="Do not supersede similar memories automatically.")
@click.option("--keyword-only", is_flag=True, help="Do not load the embedding model (embedded later).")
@store_options
def remember(memory: Cairn, as_json: bool, text: str, tags, no_detect: bool, scope: str, **fields) -> None:
    """Store TEXT as a memory ("-" reads it from stdin)."""
    if text == "-":
        text = sys.stdin.read()
    draft = {k: v for k, v in fields.items() if v is not None}
    from .engine import Draft

    result = memory.remember_many([Draft(text=text, tags=tuple(_split_tags(tags)), **draft)], scope=scope,
                                  detect=False if no_detect else None)[0]

    def human() -> None:
        verb = "already remembered as" if result.status == "duplicate" else "remembered"
        click.echo(f"{verb} {result.memory.id}")
        for old in result.superseded:
            click.echo(f"superseded {old}")
        for c in result.conflicts:
            click.echo(f"possible conflict with {c['id']}: {c['reason']} (review with /cairn:review-memory)")

    _emit(as_json, result.to_json(), human)


@cli.command()
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS))
@click.option("--tag", "tags", multiple=True)
@click.option("--since", help="Only memories valid from this time on.")
@click.option("--until", help="Only memories valid from before this time.")
@click.option("--as-of", help="What was true at this time (valid time).")
@click.option("--known-at", help="What the store knew at this time (transaction time).")
@click.option("--include-superseded", is_flag=True)
@click.option("--scope", type=click.Choice(SCOPES), default="project", show_default=True)
@click.option("--keyword-only", is_flag=True, help="BM25 only; do not load the embedding model.")
@store_options
def recall(memory: Cairn, as_json: bool, query: str, tags, **options) -> None:
    """Ranked memories for QUERY, each with why it ranked."""
    hits = memory.recall(query, tags=_split_tags(tags), **options)

    def human() -> None:
        if not hits:
            click.echo("no memories match")
        for n, hit in enumerate(hits, 1):
            click.echo(f"{n}. {_memory_line(hit.memory)}\n    score {hit.score:.4f}: {hit.why()}")

    _emit(as_json, [h.to_json() for h in hits], human)


@cli.command()
@click.argument("memory_id")
@store_options
def history(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """The supersession chain through MEMORY_ID, oldest first, with valid and transaction times."""
    chain = memory.history(memory_id)

    def human() -> None:
        for m in chain:
            d = m.to_json()
            click.echo(_memory_line(m))
            click.echo(f"    valid {d['valid_from_iso']} .. {d['valid_to_iso'] or 'open'}; "
                       f"recorded {d['recorded_at_iso']}, retired {d['retired_at_iso'] or '-'}")

    _emit(as_json, [m.to_json() for m in chain], human)


@cli.command()
@click.argument("memory_id")
@store_options
def forget(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """Erase MEMORY_ID: its text, vector and index entries; a tombstone remains."""
    tomb = memory.forget(memory_id)
    _emit(as_json, tomb.to_json(), lambda: click.echo(f"forgot {tomb.id}"))


@cli.command()
@click.argument("memory_id")
@store_options
def show(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """One memory, whatever its status."""
    m = memory.get(memory_id)
    _emit(as_json, m.to_json(), lambda: click.echo(_memory_line(m)))


@cli.command(name="list")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS))
@click.option("--tag", "tags", multiple=True)
@click.option("--as-of", help="What was true at this time (valid time).")
@click.option("--include-superseded", is_flag=True)
@click.option("--scope", type=click.Choice(SCOPES), default="project", show_default=True)
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True)
@store_options
def list_(memory: Cairn, as_json: bool, tags, **options) -> None:
    """Memories, newest first."""
    items = memory.list(tags=_split_tags(tags), **options)
    _emit(as_json, [m.to_json() for m in items], lambda: [click.echo(_memory_line(m)) for m in items])


@cli.command()
@store_options
def status(memory: Cairn, as_json: bool) -> None:
    """Which store and why, counts, size, vector backend and model."""
    info = memory.status()

    def human() -> None:
        c = info["counts"]
        click.echo(f"store     {info['store']}  ({info['path']})")
        click.echo(f"chosen by {info['chosen_by']}")
        click.echo(f"memories  {c['current']} current, {c['superseded']} superseded, {c['forgotten']} forgotten"
                   + (f", {c['awaiting_embedding']} awaiting embedding" if c["awaiting_embedding"] else ""))
        click.echo(f"size      {info['bytes']:,} bytes")
        click.echo(f"vectors   {info['vector_backend'] or 'unavailable'}; model {info['embedding_model'] or 'none'}")
        if info["keyword_only"]:
            click.echo(f"recall is KEYWORD-ONLY: {info['keyword_only_reason'] or 'no embedding model'}")

    _emit(as_json, info, human)


@cli.command(name="export")
@click.argument("output", type=click.File("w", encoding="utf-8"), default="-")
@store_options
def export_(memory: Cairn, as_json: bool, output) -> None:
    """Write every memory (tombstones included) as JSON Lines to OUTPUT (default stdout)."""
    count = memory.export(output)
    click.echo(json.dumps({"exported": count}) if as_json else f"exported {count} memories", err=output.name == "<stdout>")


@cli.command(name="import")
@click.argument("source", type=click.File("rb"))
@store_options
def import_(memory: Cairn, as_json: bool, source) -> None:
    """Read JSON Lines written by `cairn export`; all or nothing."""
    counts = memory.import_(source, progress=_progress)
    _emit(as_json, counts, lambda: click.echo(f"imported {counts['imported']}, skipped {counts['skipped']} existing"))


@cli.command()
@store_options
def reembed(memory: Cairn, as_json: bool) -> None:
    """Re-embed every memory with the configured model (after changing models)."""
    count = memory.reembed(progress=_progress)
    _emit(as_json, {"reembedded": count, "model": memory.embedder.model_name},
          lambda: click.echo(f"re-embedded {count} memories with {memory.embedder.model_name}"))


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def stores(ctx: click.Context, as_json: bool) -> None:
    """List stores (with `create NAME`: make a named store)."""
    if ctx.invoked_subcommand:
        return
    rows = []
    for path in sorted(stores_dir().glob("*.db")):
        try:
            store = Store.open(path, name=path.stem, create=False)
        except CairnError as exc:
            rows.append({"name": path.stem, "path": str(path), "error": str(exc)})
            continue
        with_counts = {"name": path.stem, "path": str(path), "project_root": store.get_meta("project_root"),
                       **store.counts()}
        store.close()
        rows.append(with_counts)
    current = choose_store(None).name

    def human() -> None:
        click.echo(f"data root {data_root()}")
        for r in rows:
            mark = "*" if r["name"] == current else " "
            detail = r.get("error") or f"{r['current']} current  {r.get('project_root') or ''}"
            click.echo(f"{mark} {r['name']:<40} {detail}")

    _emit(as_json, {"data_root": str(data_root()), "current": current, "stores": rows}, human)


@stores.command(name="create")
@click.argument("name")
def stores_create(name: str) -> None:
    """Create the named store NAME (for CAIRN_STORE / --store)."""
    from .paths import store_path, validate_store_name

    path = store_path(validate_store_name(name))
    Store.open(path, name=name, create=True).close()
    click.echo(f"created store {name} ({path})")


def main(argv: list[str] | None = None) -> None:
    """Entry point: CairnError -> one line on stderr, exit 2."""
    try:
        cli.main(args=argv, prog_name="cairn", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("cairn: aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        # One line, like every other error; usage errors point at the command's --help.
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        click.echo(f"cairn: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except CairnError as exc:
        click.echo(f"cairn: error: {exc}", err=True)
        sys.exit(2)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
