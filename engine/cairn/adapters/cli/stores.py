"""Commands on whole stores: status, export and import, reembed, stores, migrate-store, backup, restore, doctor."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

import cairn

from . import _common
from ._common import _TIMINGS, _count, _emit, _progress, cli, store_options
from ..warm import client as warm

if TYPE_CHECKING:
    from cairn import Cairn


@cli.command()
@click.option("--timings", is_flag=True, help="Also print where this call spent its time.")
@store_options(read_only=True, check_model=False)
def status(memory: Cairn, as_json: bool, timings: bool) -> None:
    """Which store and why, counts, size, vector backend and model.

    Whether recall is keyword-only is checked, not assumed: the embedding model is asked for one
    vector (by the warm process when it is up, else loaded in this process: a read-only command
    starts nothing and creates nothing), so a status may take a second."""
    info = _status_info(memory, timings)
    _emit(as_json, info, lambda: _print_status(info))


def _status_info(memory: Cairn, timings: bool) -> dict[str, Any]:
    """status's JSON: Status.to_json and "exists", "most_cited" (when Claude cited memories),
    "already_loaded", "timings_ms" (with timings)."""
    started = time.perf_counter()
    memory.embed(["cairn status"])  # a model that cannot load sets the keyword-only reason
    _TIMINGS["model (warm process or load)"] = time.perf_counter() - started
    if timings:
        started = time.perf_counter()
        memory.recall("where does the time go", k=10)
        _TIMINGS["sample search"] = time.perf_counter() - started
    info = {**memory.status().to_json(), "exists": memory.exists}
    if memory.exists and (info.get("usage") or {}).get("citations"):
        top = memory.most_cited(3)
        use = memory.usage_of(top)
        info["most_cited"] = [{"id": m.id, "text": cairn.render.shorten(m.text or "", 80), **use.get(m.id, {})}
                              for m in (memory.get(i) for i in top) if m.text is not None]
    if memory.exists:
        from ..claude.loaded import already_loaded

        # What the hooks leave out because Claude Code loads it itself (CLAUDE.md, rules, MEMORY.md).
        project = Path(memory.choice.project_root or Path.cwd())
        info["already_loaded"] = len(already_loaded(memory, project, dict(_common.environ())))
    if timings:
        info["timings_ms"] = {name: round(1000 * s, 1) for name, s in _TIMINGS.items()}
    return info


def _print_status(info: dict[str, Any]) -> None:
    """status for a person: one line per topic."""
    c = info["counts"]
    if not info["exists"]:
        click.echo(f"store     {info['store']} does not exist yet ({info['path']}); "
                   "it is created by the first write")
    else:
        click.echo(f"store     {info['store']}  ({info['path']})")
    click.echo(f"chosen by {info['chosen_by']}")
    click.echo(f"memories  {c['current']} current, {c['cold']} cold, {c['superseded']} superseded, "
               f"{c['forgotten']} forgotten"
               + (f", {c['awaiting_embedding']} awaiting embedding" if c["awaiting_embedding"] else ""))
    click.echo(f"size      {info['bytes']:,} bytes")
    click.echo(f"vectors   {info['vector_backend'] or 'unavailable'}; model {info['embedding_model'] or 'none'}")
    stored = info["store_embedding_model"]
    if stored and info["embedding_model"] and stored != info["embedding_model"]:
        # status opens such a store anyway (check_model off) to say so, not to fail on it
        click.echo(f"MISMATCH  the store's vectors come from {stored}: writes and vector recall are "
                   f"refused until `cairn reembed` re-embeds it with {info['embedding_model']}")
    ses = info.get("sessions") or {}
    if ses.get("sessions"):
        click.echo(f"sessions  {ses['sessions']} captured, {_count(ses['turns'], 'turn')}"
                   + (f"; secrets redacted {sum(ses['redactions'].values())} "
                      f"({', '.join(f'{k} {v}' for k, v in sorted(ses['redactions'].items()))})"
                      if ses["redactions"] else "")
                   + (f"; {_count(ses['private_spans'], 'private span')} removed" if ses["private_spans"] else "")
                   + (f"; lines skipped {sum(ses['skipped'].values())}" if ses["skipped"] else ""))
    use = info.get("usage") or {}
    if use.get("injections"):
        click.echo(f"usage     {_count(use['injected_memories'], 'memory', 'memories')} injected "
                   f"{_count(use['injections'], 'time')}; {use['cited_memories']} cited by Claude, "
                   f"{_count(use['citations'], 'citation')} (reset with `cairn reset-usage`)")
        for row in info.get("most_cited") or []:
            click.echo(f"          {row['id']} {cairn.render.usage(row)}: {row['text']}")
    if info.get("already_loaded"):
        click.echo(f"skipped   {info['already_loaded']} memories are not injected: Claude Code already loads "
                   "them (CLAUDE.md, .claude/rules, its MEMORY.md)")
    if info["keyword_only"]:
        click.echo(f"recall is KEYWORD-ONLY: {info['keyword_only_reason'] or 'no embedding model'}")
    for name, ms in info.get("timings_ms", {}).items():
        click.echo(f"time      {name:<30} {ms:8.1f} ms")


@cli.command(name="export")
@click.argument("output", default="-")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "claude-memory"]), default="jsonl", show_default=True,
              help="jsonl: every memory, tombstones included, for `cairn import`. claude-memory: the current "
                   "memories as Claude Code auto-memory files and a MEMORY.md index, into the folder OUTPUT.")
@click.option("--into-claude-memory", "into_live", is_flag=True,
              help="With --format claude-memory: write into this project's live auto-memory folder "
                   "(never done otherwise; existing files are kept).")
@store_options(read_only=True)
def export_(memory: Cairn, as_json: bool, output: str, fmt: str, into_live: bool) -> None:
    """Write every memory (tombstones included) as JSON Lines to OUTPUT (default stdout), or with
    --format claude-memory the current memories as Claude Code memory files into the folder OUTPUT
    (see docs/claude-memory.md)."""
    if fmt == "claude-memory":
        from ..claude.auto_memory import export, native_memory

        native = native_memory(Path.cwd(), dict(_common.environ()))
        if into_live:
            folder = native.folder
        elif output == "-":
            raise click.UsageError("--format claude-memory needs a folder: cairn export --format claude-memory DIR")
        else:
            folder = Path(output).expanduser()
            if folder.resolve() == native.folder.resolve():
                raise click.UsageError(f"{folder} is this project's live Claude Code memory folder; "
                                       "add --into-claude-memory to write into it")
        if folder.exists() and not folder.is_dir():
            raise click.UsageError(f"{folder} is not a folder")
        memories = memory.list(limit=1_000_000, scope="project", order=cairn.Order.IMPORTANCE)
        if into_live:  # what came from that folder is there already
            state = memory.source_state("claude-memory")
            files = state.get("files", {}) if state.get("folder") == str(folder) else {}
            came = {e.get("id") for e in files.values()}
            memories = [m for m in memories if m.id not in came]
        done = export(memories, folder, live=into_live)
        _emit(as_json, done, lambda: click.echo(
            f"exported {_count(done['files'], 'memory', 'memories')} to {done['folder']} "
            f"({done['indexed']} in MEMORY.md"
            + (f", {done['not_indexed']} past its cap" if done["not_indexed"] else "") + ")"))
        return
    if into_live:
        raise click.UsageError("--into-claude-memory goes with --format claude-memory")
    with click.open_file(output, "w", encoding="utf-8") as out:
        count = memory.export(out)
    click.echo(json.dumps({"exported": count}) if as_json else f"exported {_count(count, 'memory', 'memories')}",
               err=output == "-")


@cli.command(name="import-claude-memory")
@store_options
def import_claude_memory(memory: Cairn, as_json: bool) -> None:
    """Import this project's Claude Code auto-memory folder (wherever its settings put it): one
    memory per file; an edited file replaces its memory (history kept), a deleted file retires it.
    Incremental: only what changed since the last run is read. A session start runs it in the
    background when claude_memory.sync is on. Files that cannot be imported are listed with why."""
    from ..claude.auto_memory import native_memory
    from ..claude.auto_memory_sync import sync, sync_lock

    native = native_memory(Path.cwd(), dict(_common.environ()))
    with sync_lock(memory, wait=True):
        done = sync(memory, native)

    def human() -> None:
        click.echo(f"{native.folder}: {done['created']} imported, {done['superseded']} updated, "
                   f"{done['retired']} retired, {done['unchanged']} unchanged, {done['duplicates']} already "
                   f"remembered, {len(done['failed'])} not importable")
        for name, reason in sorted(done["failed"].items()):
            click.echo(f"  {name}: {reason}")

    _emit(as_json, done, human)


@cli.command(name="import")
@click.argument("source", type=click.File("rb"))
@store_options
def import_(memory: Cairn, as_json: bool, source: IO[bytes]) -> None:
    """Read JSON Lines written by `cairn export`; all or nothing."""
    counts = memory.import_(source, progress=_progress)
    _emit(as_json, counts, lambda: click.echo(f"imported {counts['imported']}, skipped {counts['skipped']} existing"))


@cli.command()
@store_options(check_model=False)
def reembed(memory: Cairn, as_json: bool) -> None:
    """Re-embed every memory and captured turn with the configured model (after changing models)."""
    count = memory.reembed(progress=_progress)
    while memory.sessions.embed_backlog(2048):  # the turns reembed queued; an interrupted run leaves the rest queued
        pass
    embedder = memory.embedder
    assert embedder is not None  # reembed raised EmbedderUnavailable without one
    _emit(as_json, {"reembedded": count, "model": embedder.model_name},
          lambda: click.echo(f"re-embedded {_count(count, 'memory', 'memories')} with {embedder.model_name}"))


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
@click.pass_context
def stores(ctx: click.Context, as_json: bool) -> None:
    """List stores (`*` marks this folder's); `stores create NAME` makes a named store."""
    if ctx.invoked_subcommand:
        return
    env = _common.environ()
    rows = cairn.list_stores(env=env)
    current = cairn.resolve(env=env).choice.name
    root = cairn.data_root(env=env)

    def human() -> None:
        click.echo(f"data root {root}")
        for r in rows:
            mark = "*" if r["name"] == current else " "
            detail = r.get("error") or f"{r['current']} current  {r.get('project_root') or ''}"
            click.echo(f"{mark} {r['name']:<40} {detail}")

    _emit(as_json, {"data_root": str(root), "current": current, "stores": rows}, human)


@stores.command(name="delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def stores_delete(name: str, yes: bool, as_json: bool) -> None:
    """Delete the store NAME and every memory in it (its .db, -wal and -shm files). Asks first on a
    terminal; without one, --yes is required."""
    rows = {r["name"]: r for r in cairn.list_stores(env=_common.environ())}
    if name not in rows:
        raise cairn.InvalidInput(f"store {name!r} does not exist (see `cairn stores`)")
    if not yes:
        if not _common._interactive():  # looked up at call time: tests stand in for a terminal
            raise cairn.InvalidInput(f"deleting store {name!r} needs confirmation: pass --yes")
        current = rows[name].get("current")
        what = f"{_count(current, 'current memory', 'current memories')}" if current is not None else "its memories"
        click.confirm(f"Delete store {name!r} and {what}? This cannot be undone", abort=True, err=True)
    path = cairn.delete_store(name, env=_common.environ())
    _emit(as_json, {"name": name, "path": str(path), "deleted": True},
          lambda: click.echo(f"deleted store {name} ({path})"))


@stores.command(name="rename")
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def stores_rename(old: str, new: str, as_json: bool) -> None:
    """Rename the store OLD to NEW (its files and its recorded name); refuses when NEW exists. A store
    on Postgres is shared: only this machine's name for it changes (the team's other machines keep
    theirs), and no server is contacted."""
    root = next((s.get("project_root") for s in cairn.list_stores(env=_common.environ()) if s["name"] == old), None)
    path = cairn.rename_store(old, new, env=_common.environ())

    def human() -> None:
        click.echo(f"renamed store {old} to {new} ({path})")
        if root:  # a project finds its store by the folder's name: this one no longer will
            click.echo(f"note: {root} will no longer find it by its folder; set CAIRN_STORE={new} there "
                       f"(a direnv .envrc), or rename it back to {old}", err=True)

    _emit(as_json, {"old": old, "name": new, "path": str(path), "project_root": root}, human)


@stores.command(name="create")
@click.argument("name")
@click.option("--postgres", "postgres_url", metavar="URL", help="Create it on this PostgreSQL server (a team "
              "store); later commands find the server in $CAIRN_POSTGRES_URL or store.postgres_url. The URL is "
              "never stored: keep the password in PGPASSWORD or ~/.pgpass.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def stores_create(name: str, postgres_url: str | None, as_json: bool) -> None:
    """Create the named store NAME (for CAIRN_STORE / --store), in the data root or on Postgres."""
    path, created = cairn.create_store(name, postgres=postgres_url, env=_common.environ())
    _emit(as_json, {"name": name, "path": str(path), "created": created},
          lambda: click.echo(f"{'created' if created else 'already exists:'} store {name} ({path})"))


@cli.command(name="migrate-store")
@click.argument("source")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def migrate_store(source: str, target: str, as_json: bool) -> None:
    """Copy store SOURCE into the new store TARGET across backends, history and vectors included.

    Each is NAME, sqlite:NAME or postgres:NAME (the server from $CAIRN_POSTGRES_URL or
    store.postgres_url). A Postgres TARGET becomes where NAME opens from then on; SOURCE is left as
    it was. The review queue and captured sessions are copied too (the turns' vectors are
    recomputed)."""
    done = cairn.migrate_store(source, target, progress=_progress, env=_common.environ())
    _emit(as_json, done, lambda: click.echo(
        f"copied {_count(done['memories'], 'memory', 'memories')} ({done['vectors']} vectors, "
        f"{done['dismissals']} review verdicts, "
        f"{done['proposals']} review proposals) and {done['sessions']} sessions ({done['turns']} turns) "
        f"from {source} to {target} ({done['path']})"))


@cli.command()
@click.option("--store", "store_name", metavar="NAME", help="Store to back up (default: $CAIRN_STORE, else this "
              "project's).")
@click.option("--all", "all_stores", is_flag=True, help="Back up every store in the data root.")
@click.option("--keep", type=click.IntRange(1), metavar="N", help="Then keep only the N newest backups of each.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def backup(store_name: str | None, all_stores: bool, keep: int | None, as_json: bool) -> None:
    """Copy a store into <data root>/backups/NAME-<UTC time>.db, consistent while sessions write
    (SQLite's online backup API). A store on Postgres is copied into such a file too (one consistent
    snapshot, no pg_dump), restorable as a local store. A backup keeps memories forgotten after it
    was made."""
    if all_stores and store_name:
        raise cairn.InvalidInput("--store and --all exclude each other")
    if all_stores:
        names = [r["name"] for r in cairn.list_stores(env=_common.environ()) if "error" not in r]
    else:
        names = [cairn.resolve(store_name, env=_common.environ()).choice.name]
    done = [cairn.backup_store(name, keep=keep, env=_common.environ()) for name in names]

    def human() -> None:
        if not done:
            click.echo("no stores to back up")
        for b in done:
            click.echo(f"backed up {b['store']} ({_count(b['counts']['total'], 'memory', 'memories')}, "
                       f"{b['bytes']:,} bytes) to {b['path']}")
            for old in b["removed"]:
                click.echo(f"  removed old backup {old}")

    _emit(as_json, {"backups": done}, human)


@cli.command()
@click.argument("backup_file", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--store", "store_name", metavar="NAME", help="Store to restore into (default: the one the backup "
              "was made of).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
@click.option("--bring-back-forgotten", is_flag=True, help="Also restore memories forgotten after the backup was "
              "taken (by default they stay forgotten).")
def restore(backup_file: str, store_name: str | None, as_json: bool, bring_back_forgotten: bool) -> None:
    """Make a store hold exactly what the backup FILE holds, except what was forgotten since. Refuses a
    backup from a newer Cairn or one that fails its integrity check, and a store on Postgres (restore it
    under another name, then `migrate-store` it); the replaced store is kept in <data root>/backups/.
    Memories forgotten after the backup was taken stay forgotten (named in a warning) unless
    --bring-back-forgotten."""
    done = cairn.restore_store(backup_file, name=store_name, bring_back_forgotten=bring_back_forgotten,
                               env=_common.environ())

    def human() -> None:
        c = done["counts"]
        click.echo(f"restored {done['store']} from {done['source']}: {c['current']} current, "
                   f"{c['superseded']} superseded, {c['forgotten']} forgotten")
        if done["replaced_kept_at"]:
            click.echo(f"the replaced store is kept at {done['replaced_kept_at']}")

    _emit(as_json, done, human)
    if done["forgotten"]:
        named = ", ".join(f"{m['id']} ({m['kind']}, forgotten {cairn.format_time(m['forgotten_at'])})"
                          for m in done["forgotten"])
        n = _count(len(done["forgotten"]), "memory", "memories")
        click.echo(f"cairn: warning: the backup holds {n} forgotten after it was taken: {named}; "
                   + ("brought back (--bring-back-forgotten)" if done["forgotten_brought_back"]
                      else "kept forgotten (pass --bring-back-forgotten to restore them)"), err=True)


def _warm_check() -> cairn.Check:
    environ = _common.environ()
    if not warm.is_running(environ):
        return cairn.Check("warm process", "ok", "not running (started on demand by the next hook or recall)")
    reply = warm.request({"op": "ping"}, timeout=5, environ=environ)
    if reply is not None:
        return cairn.Check("warm process", "ok", f"pid {reply.get('pid')}, model {reply.get('model')}")
    if not warm.socket_path(environ).exists():
        return cairn.Check("warm process", "ok", "starting (loading its model)")
    log = cairn.data_root(env=environ) / "logs" / "service.log"
    return cairn.Check("warm process", "warn", f"running but not answering on {warm.socket_path(environ)}",
                       f"stop it; it is restarted on demand (see {log})")


def _config_check() -> tuple[Any, dict[str, Any] | None]:
    """The settings this directory's project uses (user config, then its .cairn.yaml), as a check,
    and those settings (None when they do not load): a bad file turns memory off in the hooks."""
    try:
        resolved = cairn.resolve(None, env=_common.environ())
    except cairn.ConfigError as exc:
        return cairn.Check("config", "fail", str(exc), "fix that key; until then the hooks recall nothing here"), None
    except cairn.CairnError:  # e.g. CAIRN_STORE names no store: the store checks say so
        return cairn.Check("config", "ok", "settings load"), None
    return cairn.Check("config", "ok", f"settings for store {resolved.choice.name} load"), resolved.config


def _auto_memory_check(config: dict[str, Any] | None) -> cairn.Check:
    from ..claude.auto_memory_sync import doctor_check

    try:
        with cairn.Cairn.open(read_only=True, embedder=None, check_model=False,
                              env=_common.environ()) as memory:
            return doctor_check(memory, Path.cwd(), config)
    except cairn.CairnError as exc:  # the store checks above say what is wrong with it
        return doctor_check(None, Path.cwd(), config) if isinstance(exc, cairn.StoreNotFound) else cairn.Check(
            "Claude Code auto memory", "warn", f"sync state unknown: {exc}")


@cli.command()
@click.option("--fix", is_flag=True, help="Repair what can be: indexes, file modes, pending migrations.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def doctor(fix: bool, as_json: bool) -> None:
    """Check the installation and every store. The checks: this directory's settings (user config and the
    project's .cairn.yaml), versions, sqlite-vec, the model those settings name and each store's
    fingerprint, schema, integrity, index consistency (a store on Postgres: the server reachable,
    pgvector, schema version, index consistency and validity), warm process, file modes, and whether
    Claude Code runs Cairn's hooks in this project, and whether a hook ran for an event Cairn does
    not answer. Loads the model (a few seconds). Exit 1 when a check fails (and --fix did not repair
    it)."""
    from ..claude.doctor import hook_events_check, hooks_check, settings_project

    config_check, config = _config_check()
    try:
        engine_checks = cairn.doctor(fix=fix, config=config, env=_common.environ())
    except cairn.ConfigError:  # the user-level file is broken: the config check names it
        engine_checks = []
    if any(c.name == "data root" and c.status == "fail" for c in engine_checks):
        # Nothing under an unusable data root can be checked; its failing check says why.
        checks = [config_check, *engine_checks, hooks_check(settings_project(Path.cwd()))]
    else:
        checks = [config_check, *engine_checks, _warm_check(), hooks_check(settings_project(Path.cwd())),
                  _auto_memory_check(config),
                  hook_events_check(cairn.data_root(env=_common.environ()) / "logs" / "hooks.log")]
    failed = [c for c in checks if c.status == "fail" and not c.fixed]

    def human() -> None:
        for c in checks:
            click.echo(f"{c.status.upper():<4}  {c.name}: {c.detail}" + ("  [fixed]" if c.fixed else ""))
            if c.fix and c.status != "ok" and not c.fixed:
                click.echo(f"      fix: {c.fix}")
        click.echo(f"{len(failed)} failed" if failed else "all checks passed" if not any(
            c.status == "warn" for c in checks) else "no check failed (see the warnings)")

    _emit(as_json, {"ok": not failed, "checks": [c.to_json() for c in checks]}, human)
    if failed:
        sys.exit(1)
