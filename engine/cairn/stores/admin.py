"""Store administration: create, list, rename, delete, migrate (across backends), back up and restore
the stores of the data root.

These open a store by its name, without an engine (`Cairn`), and hold it only for the operation.
Each takes `env`: the environment naming the data root, the user config and CAIRN_POSTGRES_URL
(default: environment.process_env()); a composition root passes its own.
The engine imports `scrubbed_rows` from here: an import into a store on Postgres scrubs as a migration
does.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..config import load_config
from ..errors import CairnError, InvalidInput, MemoryNotFound, StoreBusy, StoreCorrupted, StoreError, StoreNotFound
from ..home import data_root, private_dir
from ..models import Memory, Proposal, TurnDraft, session_keys
from ..storage.db import BUSY_TIMEOUT_MS, DatabaseError
from ..storage.migrations import MIGRATIONS
from ..storage.protocol import StoreBackend as Store  # either backend, typed by the storage contract
from ..storage.sqlite import SqliteStore
from .backends import marker_path, marker_schema, open_store, postgres_names, write_marker
from .paths import backups_dir, store_path, stores_dir, validate_store_name
from ..text import is_blank
from ..timeutil import END_OF_TIME, now_ms

log = logging.getLogger(__name__)

Progress = Callable[[Iterable[Any], int], Iterable[Any]]  # (items, total) -> items, e.g. a tqdm wrapper


def no_progress(items: Iterable[Any], total: int) -> Iterable[Any]:
    """A Progress that shows nothing."""
    return items


def list_stores(*, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every store of the data root: its store files and the stores it marks as on Postgres (the
    server from $CAIRN_POSTGRES_URL or the user config): {name, path, backend, project_root, and
    its counts}, or {name, path, backend, error} for one that cannot be opened. Opens nothing for
    writing, creates nothing."""
    rows: list[dict[str, Any]] = []
    postgres = set(postgres_names(env=env))
    config: dict[str, Any] | None = None
    for name in sorted({p.stem for p in stores_dir(env=env).glob("*.db")} | postgres):
        backend = "postgres" if name in postgres else "sqlite"
        path = store_path(name, env=env)
        try:
            if backend == "postgres":
                config = config if config is not None else load_config(env=env)
                store = open_store(name, path, config, create=False, project=False, backend="postgres", env=env)
            else:
                store = _open_sqlite(path, name, create=False, env=env)
        except CairnError as exc:
            rows.append({"name": name, "path": str(path), "backend": backend, "error": str(exc)})
            continue
        try:
            rows.append({"name": name, "path": str(store.path), "backend": backend,
                         "project_root": store.get_meta("project_root"), **store.counts()})
        finally:
            store.close()
    return rows


def _open_sqlite(path: Path, name: str, *, create: bool, env: Mapping[str, str] | None,
                 busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> SqliteStore:
    """The SQLite store file `path`, opened as a file of the data root of `env`."""
    return SqliteStore.open(path, name=name, create=create, busy_timeout_ms=busy_timeout_ms,
                            data_root=data_root(env=env))


def delete_store(name: str, *, env: Mapping[str, str] | None = None) -> Path:
    """Delete the store NAME: its database file and its -wal/-shm files, or on Postgres its schema
    and the data root's marker. Returns the path. Raises InvalidStoreName, StoreNotFound."""
    path = store_path(validate_store_name(name), env=env)
    marker = marker_path(name, env=env)
    if marker.exists():
        from ..storage.postgres import PgStore

        store = open_store(name, path, load_config(env=env), create=False, project=False, backend="postgres",
                           env=env)
        try:
            assert isinstance(store, PgStore)
            store.drop()
        finally:
            store.close()
        marker.unlink()
        return marker
    if not path.exists():
        raise StoreNotFound(f"store {name!r} does not exist ({path})")
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return path


def rename_store(old: str, new: str, *, env: Mapping[str, str] | None = None) -> Path:
    """Rename the store OLD to NEW: its files and its recorded name. Returns the new path. A store
    on Postgres is shared: only this data root's entry is renamed (the marker NEW.postgres names the
    same schema), so this machine calls it NEW while the team's other machines keep their names;
    no server is contacted. Raises InvalidStoreName, StoreNotFound, StoreError (NEW exists)."""
    source, target = store_path(validate_store_name(old), env=env), store_path(validate_store_name(new), env=env)
    if marker_path(new, env=env).exists():
        raise StoreError(f"store {new!r} already exists (on Postgres); delete or rename it first")
    if marker_path(old, env=env).exists():
        from ..storage.postgres import schema_for

        if target.exists():
            raise StoreError(f"store {new!r} already exists ({target}); delete or rename it first")

        write_marker(new, marker_schema(old, env=env) or schema_for(old), env=env)
        marker_path(old, env=env).unlink()
        return marker_path(new, env=env)
    if not source.exists():
        raise StoreNotFound(f"store {old!r} does not exist ({source})")
    if target.exists():
        raise StoreError(f"store {new!r} already exists ({target}); delete or rename it first")
    store = _open_sqlite(source, old, create=False, env=env)
    try:
        store.set_meta("name", new)
    finally:
        store.close()  # the last connection checkpoints the WAL into the database file
    for suffix in ("-wal", "-shm", ""):  # the database file last: its name is what marks the store
        if Path(str(source) + suffix).exists():
            Path(str(source) + suffix).rename(str(target) + suffix)
    return target


def create_store(name: str, *, postgres: str | None = None,
                 env: Mapping[str, str] | None = None) -> tuple[Path | str, bool]:
    """Create the named store (for --store / CAIRN_STORE). Returns (path, whether it was created
    now: False when it already existed).

    postgres: a Postgres server's URL (libpq URL or conninfo): the store is made there (a schema
    of its own) and the data root records that store NAME lives on Postgres, without the URL;
    later opens take the URL from $CAIRN_POSTGRES_URL or the config's store.postgres_url. The
    "path" returned is then `postgres:<schema>`. Raises InvalidStoreName, StoreError (no server)."""
    path = store_path(validate_store_name(name), env=env)
    if postgres is not None:
        from ..storage.postgres import PgStore, schema_for

        existed = PgStore.exists(postgres, name)
        store = open_store(name, path, load_config(env=env), create=True, project=False, backend="postgres",
                           url=postgres, env=env)
        try:
            write_marker(name, schema_for(name), env=env)
            return store.path, not existed
        finally:
            store.close()
    existed = path.exists()
    _open_sqlite(path, name, create=True, env=env).close()
    return path, not existed


def _store_spec(spec: str, env: Mapping[str, str] | None) -> tuple[str, str]:
    """"NAME", "sqlite:NAME" or "postgres:NAME" -> (backend, name); a bare NAME is on the backend
    the data root records for it. Raises InvalidStoreName."""
    backend, _, name = spec.rpartition(":")
    if backend and backend not in ("sqlite", "postgres"):
        raise InvalidInput(f"{spec!r}: a store is NAME, sqlite:NAME or postgres:NAME")
    validate_store_name(name)
    return backend or ("postgres" if marker_path(name, env=env).exists() else "sqlite"), name


def migrate_store(source: str, target: str, *, progress: Progress = no_progress,
                  env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Copy store `source` into the new store `target`, across backends, losslessly: every memory
    with its history (both times, supersession links, tombstones, asserted valid_to), tags, vectors
    (copied, not recomputed), the recorded model and fingerprint, the project root, the review
    verdicts and the captured sessions (their turns' vectors are queued and recomputed). Into
    Postgres, `<private>` spans and secrets are scrubbed on the way (as `remember` does). Specs: NAME,
    sqlite:NAME or postgres:NAME (the server from $CAIRN_POSTGRES_URL or the config). A target on
    Postgres is then marked in the data root, so NAME opens there from now on; a target in SQLite
    removes that mark. The review queue comes along (every proposal, in its state). The source is
    left as it was. Returns {"source", "target", "path", "memories", "vectors", "dismissals",
    "proposals", "sessions", "turns"}.
    Raises InvalidInput, StoreNotFound, StoreError (the target exists and holds memories or sessions)."""
    (src_backend, src_name), (dst_backend, dst_name) = _store_spec(source, env), _store_spec(target, env)
    if (src_backend, src_name) == (dst_backend, dst_name):
        raise InvalidInput("source and target are the same store")
    config = load_config(env=env)
    src = open_store(src_name, store_path(src_name, env=env), config, create=False, project=False,
                     backend=src_backend, env=env)
    try:
        dst = open_store(dst_name, store_path(dst_name, env=env), config, create=True, project=False,
                         backend=dst_backend, env=env)
        try:
            if dst.counts()["total"] or dst.session_totals()["sessions"]:
                raise StoreError(f"target store {target!r} already holds memories; migrate into a new store")
            copied = _copy_store(src, dst, progress)
            dst_path = str(dst.path)
        finally:
            dst.close()
    finally:
        src.close()
    if dst_backend == "postgres":
        from ..storage.postgres import schema_for

        write_marker(dst_name, schema_for(dst_name), env=env)
    else:
        marker_path(dst_name, env=env).unlink(missing_ok=True)
    return {"source": source, "target": target, "path": dst_path, **copied}


def scrubbed_rows(dst: Store, rows: list[tuple[Memory, int]]) -> tuple[list[tuple[Memory, int]], set[str]]:
    """Rows about to be copied or imported into `dst` (Cairn.import_ too), and the ids of those whose text changed. Into
    a store on Postgres (shared with a team) each text is scrubbed as `remember` scrubs it (a store
    written before `remember` did, or an export edited by hand, may hold `<private>` spans or
    secrets): those spans and secrets never reach the server. A text that was all private arrives
    as a tombstone (forgotten now). Into SQLite, rows are kept as they are (a restore of one's own
    data)."""
    if getattr(dst, "backend", "sqlite") != "postgres":
        return rows, set()
    live = [(i, m.text) for i, (m, _) in enumerate(rows) if m.text is not None]
    out, changed, now = list(rows), set(), now_ms()
    from ..privacy.scrub import scrub_many  # only a write scrubs (see memories/writes.py)

    for (i, text), clean in zip(live, scrub_many([t for _, t in live])):
        cleaned = clean.text.strip()
        if cleaned == text:
            continue
        memory, asserted = rows[i]
        if is_blank(cleaned):
            memory = replace(memory, text=None, tags=(), forgotten_at=memory.forgotten_at or now,
                             retired_at=min(memory.retired_at or END_OF_TIME, now))
        else:
            memory = replace(memory, text=cleaned)
        out[i] = (memory, asserted)
        changed.add(memory.id)
    return out, changed


def _copy_store(src: Store, dst: Store, progress: Progress = no_progress) -> dict[str, int]:
    """Copy everything of `src` into the empty store `dst` (either backend): memories with their
    history, tags, vectors (copied, not recomputed), the recorded model, fingerprint and project
    root, review verdicts, the review queue (_copy_proposals), and captured sessions (catalog
    rows, turns, how far each transcript was read; the turns' index keys are rebuilt as a one-shot
    import builds them, their vectors are queued for embedding). Into Postgres, texts are scrubbed
    first (scrubbed_rows); a changed one's vector is not copied but recomputed. Returns
    {"memories", "vectors", "dismissals", "proposals", "sessions", "turns"}."""
    rows, scrubbed = scrubbed_rows(dst, list(src.iter_rows()))
    imported, _ = dst.import_rows(rows)
    live = [m.id for m, _ in rows if m.text is not None and m.id not in scrubbed]  # scrubbed: re-embedded
    vectors = 0
    with dst.bulk_vectors():  # Postgres: the HNSW index built once, after the copy
        for start in progress(range(0, len(live), 2000), (len(live) + 1999) // 2000):
            chunk = live[start : start + 2000]
            seqs, targets = src.seqs_of(chunk), dst.seqs_of(chunk)
            found = src.vectors_of([seqs[i] for i in chunk])
            vectors += dst.fill_backlog({targets[i]: found[seqs[i]] for i in chunk
                                         if seqs[i] in found and i in targets})
    for key in ("embedding_model", "embedding_fingerprint", "project_root", "maintenance_last_run"):
        value = src.get_meta(key)
        if value is not None:
            dst.set_meta(key, value)
    dismissals = src.dismissals()
    for first, second, at in dismissals:
        dst.dismiss_pair(first, second, at)
    proposals = _copy_proposals(src, dst)
    sessions = turns = 0
    for info in src.sessions(2**62):
        stored = src.session_turns(info.session_id, 0, 2**62)
        drafts = [TurnDraft(uuid=t.uuid, role=t.role, text=t.text, at=t.at, speaker=t.speaker,
                            git_branch=t.git_branch, cwd=t.cwd, meta=t.meta) for t in stored]
        keyed = [{**asdict(d), "key": key, "vector": None} for d, key in zip(drafts, session_keys(drafts, 0))]
        path, read_bytes, last_uuid = src.session_progress(info.session_id)
        dst.add_turns(info.session_id, source=info.source, transcript_path=path, title=info.title, turns=keyed,
                      read_bytes=read_bytes, last_uuid=last_uuid, skipped=info.skipped, redactions=info.redactions,
                      private_spans=info.private_spans, trailing_meta={}, rekey={})
        sessions += 1
        turns += len(keyed)
    return {"memories": imported, "vectors": vectors, "dismissals": len(dismissals), "proposals": proposals,
            "sessions": sessions, "turns": turns}


def _copy_proposals(src: Store, dst: Store) -> int:
    """Copy the review queue, every state, as it is (ids, source stamps, decisions and results):
    the stamps stay valid, since the memories are copied with every time they carry. Into Postgres
    the texts a proposal carries (payload "texts", "text", "draft", and its subject) are scrubbed
    as the memories' texts are (scrubbed_rows). Returns how many were copied."""
    proposals = src.proposals()
    if getattr(dst, "backend", "sqlite") == "postgres":
        proposals = [_scrubbed_proposal(p) for p in proposals]
    return len(dst.add_proposals([(p, p.open_key) for p in proposals]))


def _scrubbed_proposal(p: Proposal) -> Proposal:
    """The proposal with `<private>` spans and secrets scrubbed from the texts it carries."""
    payload = dict(p.payload)
    texts = list(payload.get("texts") or [])
    # (where, text): where is an index into texts, or a payload key, or None for the subject
    found: list[tuple[int | str | None, str]] = [(i, t) for i, t in enumerate(texts) if isinstance(t, str)]
    found += [(key, payload[key]) for key in ("text", "draft") if isinstance(payload.get(key), str)]
    if p.subject is not None:
        found.append((None, p.subject))
    subject = p.subject
    from ..privacy.scrub import scrub_many  # only a write scrubs (see memories/writes.py)

    for (where, _), clean in zip(found, scrub_many([t for _, t in found])):
        if where is None:
            subject = clean.text.strip()
        elif isinstance(where, int):
            texts[where] = clean.text.strip()
        else:
            payload[where] = clean.text.strip()
    if "texts" in payload:
        payload["texts"] = texts
    return replace(p, subject=subject, payload=payload)


_BACKUP_TIME = "%Y%m%dT%H%M%S"


def _stamp() -> str:
    """UTC time to the millisecond, sortable as text: 20250102T030405678Z."""
    ms = now_ms()
    return time.strftime(_BACKUP_TIME, time.gmtime(ms / 1000)) + f"{ms % 1000:03d}Z"


def backups_of(name: str, *, env: Mapping[str, str] | None = None) -> list[Path]:
    """The backup files `cairn backup` made of store NAME, oldest first."""
    pattern = re.compile(rf"^{re.escape(name)}-\d{{8}}T\d{{9}}Z\.db$")
    folder = backups_dir(env=env)
    return sorted(p for p in folder.glob("*.db") if pattern.match(p.name)) if folder.is_dir() else []


def backup_store(name: str, *, keep: int | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Back up store NAME into <data root>/backups/NAME-<UTC time>.db (0600) with SQLite's online
    backup API: a consistent copy, safe while sessions write. A store on Postgres is copied into such
    a file too (no pg_dump: everything `migrate-store` copies, read in one repeatable-read snapshot
    while the team goes on writing), which `cairn restore` restores as a local store. keep: then
    delete all but the `keep` newest backups of that store. Returns {"store", "path", "bytes",
    "counts", "removed": [paths]}. Raises InvalidStoreName, StoreNotFound, StoreCorrupted,
    StoreError, ConfigError (a Postgres store and no server URL)."""
    if keep is not None and keep < 1:
        raise InvalidInput("keep must be at least 1")
    path = store_path(validate_store_name(name), env=env)
    if marker_path(name, env=env).exists():
        target, counts = _backup_postgres(name, env)
    else:
        store = _open_sqlite(path, name, create=False, env=env)
        try:
            target = private_dir(backups_dir(env=env), env=env) / f"{name}-{_stamp()}.db"
            store.backup_to(target)
            counts = store.counts()
        finally:
            store.close()
    removed = [str(p) for p in backups_of(name, env=env)[:-keep]] if keep else []
    for old in removed:
        Path(old).unlink(missing_ok=True)
    return {"store": name, "path": str(target), "bytes": target.stat().st_size, "counts": counts, "removed": removed}


def _backup_postgres(name: str, env: Mapping[str, str] | None) -> tuple[Path, dict[str, int]]:
    """Copy Postgres store NAME into a new SQLite backup file: (its path, the store's counts)."""
    src = open_store(name, store_path(name, env=env), load_config(env=env), create=False, project=False,
                     backend="postgres", env=env)
    try:
        target = private_dir(backups_dir(env=env), env=env) / f"{name}-{_stamp()}.db"
        tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
        try:
            dst = _open_sqlite(tmp, name, create=True, env=env)
            try:
                with src.snapshot():
                    _copy_store(src, dst)
                    counts = src.counts()
                if dst.integrity() != "ok":
                    raise StoreError(f"the backup of {name!r} failed its integrity check")
            finally:
                dst.close()
            os.replace(tmp, target)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    finally:
        src.close()
    return target, counts


def restore_store(source: str | Path, *, name: str | None = None, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
                  bring_back_forgotten: bool = False, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Make store NAME (default: the name recorded in the backup) hold exactly what the backup file
    `source` holds: memories, history, tombstones, review verdicts.

    The backup is checked first (a Cairn store, schema not newer than this Cairn, integrity ok).
    The store it replaces is kept aside as <data root>/backups/NAME-replaced-<UTC time>.db. A
    readable store is overwritten in place in one transaction, so a process holding it open (the
    warm process, an MCP server) reads the restored content from its next query on; an unreadable
    one is moved aside (with its -wal) and the backup copied in its place. An older schema is
    migrated. A memory forgotten in the store after the backup was taken stays forgotten (it is
    erased again from the restored store, as forget erases) unless bring_back_forgotten.
    Returns {"store", "path", "source", "replaced_kept_at" (None when there was no store),
    "schema_version", "counts", "forgotten": [{"id", "kind", "forgotten_at"} of each such memory],
    "forgotten_brought_back": bring_back_forgotten}.
    A store that another process keeps locked for longer than busy_timeout_ms is busy, not
    unreadable: StoreBusy, and nothing is moved or changed.
    Raises InvalidInput (no such file), InvalidStoreName, SchemaTooNew, StoreCorrupted, StoreBusy."""
    source = Path(source)
    name = _backup_name(source, name, env)
    target = store_path(name, env=env)
    aside: Path | None = None
    forgotten: dict[str, Memory] = {}  # forgotten in the store being replaced (unknown when unreadable)
    if target.exists():
        aside = private_dir(backups_dir(env=env), env=env) / f"{name}-replaced-{_stamp()}.db"
        forgotten = _restore_over(target, aside, source, name, busy_timeout_ms, env)
    if not target.exists():
        private_dir(target.parent, env=env)
        copy = SqliteStore.open_file_copy(source, target)
        copy.close()
    back, counts = _settle_restored(target, name, forgotten, bring_back_forgotten, env)
    return {"store": name, "path": str(target), "source": str(source),
            "replaced_kept_at": str(aside) if aside else None, "schema_version": len(MIGRATIONS), "counts": counts,
            "forgotten": [{"id": m.id, "kind": m.kind, "forgotten_at": m.forgotten_at} for m in back],
            "forgotten_brought_back": bring_back_forgotten}


def _backup_name(source: Path, name: str | None, env: Mapping[str, str] | None) -> str:
    """The store name a restore of the backup file `source` writes: `name`, else the one the backup
    records. Raises InvalidInput (no such file), StoreCorrupted (its integrity check fails),
    InvalidStoreName, StoreError (a store on Postgres)."""
    if not source.is_file():
        raise InvalidInput(f"no backup file {source}")
    info = SqliteStore.inspect_file(source)
    if info["integrity"] != "ok":
        raise StoreCorrupted(f"{source} fails its integrity check ({info['integrity']}); not restored")
    name = validate_store_name(name or str(info["name"] or source.stem.rsplit("-", 1)[0]))
    if marker_path(name, env=env).exists():
        raise StoreError(
            f"store {name!r} is on Postgres, shared with the team: a backup is not restored over it. Restore "
            f"it as a local store (`cairn restore {source} --store {name}-restored`), check it, then copy it "
            f"to the server with `cairn migrate-store sqlite:{name}-restored postgres:NEW-NAME`")
    return name


def _restore_over(target: Path, aside: Path, source: Path, name: str, busy_timeout_ms: int,
                  env: Mapping[str, str] | None) -> dict[str, Memory]:
    """Restore `source` over the existing store file `target`, kept aside first as `aside`: a readable
    store is backed up there and overwritten in place, an unreadable one's files are moved there
    (and `target` is then gone). Returns the memories forgotten in it ({id: tombstone}; none known
    when unreadable). Raises StoreBusy, with nothing moved or changed."""
    live: SqliteStore | None = None
    forgotten: dict[str, Memory] = {}
    try:
        live = _open_sqlite(target, name, create=False, busy_timeout_ms=busy_timeout_ms, env=env)
        live.backup_to(aside)
        forgotten = {m.id: m for m, _ in live.iter_rows() if m.forgotten_at is not None}
    except StoreBusy:
        # Locked, not broken: moving a file aside under a writer would lose its writes.
        if live is not None:
            live.close()
        Path(aside).unlink(missing_ok=True)
        raise StoreBusy(f"store {name} is busy: another process has held its lock for over "
                        f"{busy_timeout_ms / 1000:g} s; nothing was restored. Try again once it is "
                        "done (`cairn doctor` shows the warm process).") from None
    except (StoreError, DatabaseError) as exc:
        # Unreadable (the usual reason to restore): nothing can be copied out of it, so its files
        # are kept aside as they are, and the backup is copied into a new file.
        log.warning("restore %s: the store cannot be read (%s); moving its files aside", name, exc)
        if live is not None:
            live.close()
            live = None
        for suffix in ("", "-wal"):
            if Path(f"{target}{suffix}").exists():
                os.replace(f"{target}{suffix}", f"{aside}{suffix}")
        Path(f"{target}-shm").unlink(missing_ok=True)
    if live is not None:
        try:
            live.restore_from(source)
        except StoreBusy:
            Path(aside).unlink(missing_ok=True)
            raise StoreBusy(f"store {name} is busy: another process holds its write lock; nothing "
                            "was restored. Try again once it is done.") from None
        finally:
            live.close()
    return forgotten


def _settle_restored(target: Path, name: str, forgotten: dict[str, Memory], bring_back_forgotten: bool,
                     env: Mapping[str, str] | None) -> tuple[list[Memory], dict[str, int]]:
    """Open the restored store `target` (which migrates an older schema), record its name, and erase
    again each memory of `forgotten` it holds unforgotten, unless bring_back_forgotten. Returns
    (those memories' tombstones, the store's counts)."""
    restored = _open_sqlite(target, name, create=False, env=env)  # migrates an older schema
    back: list[Memory] = []
    try:
        if restored.get_meta("name") != name:
            restored.set_meta("name", name)
        for memory_id, tombstone in forgotten.items():
            try:
                if restored.get(memory_id).forgotten_at is None:
                    back.append(tombstone)
            except MemoryNotFound:
                continue
        if back and not bring_back_forgotten:
            with restored.transaction():
                for tombstone in back:
                    restored.erase(restored.seq_of(tombstone.id), tombstone.forgotten_at or now_ms())
            if not restored.flush_to_disk():
                log.warning("restore %s: a reader kept the WAL in use; the next checkpoint empties it", name)
        counts = restored.counts()
    finally:
        restored.close()
    return back, counts

__all__ = ["backup_store", "backups_of", "create_store", "delete_store", "list_stores", "migrate_store", "rename_store",
           "restore_store"]
