"""Which backend holds a store, and opening it: SQLite (a file in the data root) or Postgres.

A store is on Postgres when
- the data root holds its marker `stores/NAME.postgres` (written by `cairn stores create NAME
  --postgres URL` or `cairn migrate-store`), or
- it is the project store and the config says `store.backend: postgres` (the global store, the
  user's own, follows only its marker).
The server is named by $CAIRN_POSTGRES_URL, else the config's `store.postgres_url`: a libpq URL or
conninfo. The URL is never written to the marker, a store, a log or status output; passwords belong
in the libpq environment (PGPASSWORD) or a password file (~/.pgpass, PGPASSFILE), not in the URL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..environment import or_process
from ..errors import ConfigError, StoreError
from ..home import data_root, private_dir, write_private
from .paths import GLOBAL_STORE, stores_dir, validate_store_name
from ..timeutil import now_ms

if TYPE_CHECKING:
    from ..storage.protocol import StoreBackend

URL_ENV = "CAIRN_POSTGRES_URL"
BACKENDS = ("sqlite", "postgres")


def marker_path(name: str, env: Mapping[str, str] | None = None) -> Path:
    """The data root's record that store `name` lives on Postgres (no URL in it). env: the
    environment naming the data root (default: environment.process_env()), as for every function
    here that takes one."""
    return stores_dir(env=env) / f"{validate_store_name(name)}.postgres"


def write_marker(name: str, schema: str, env: Mapping[str, str] | None = None) -> Path:
    """Record that store `name` lives on Postgres in `schema`. Returns the marker's path."""
    path = marker_path(name, env=env)
    private_dir(path.parent, env=env)
    write_private(path, json.dumps({"backend": "postgres", "schema": schema, "created_at": now_ms()}).encode(),
                  env=env)
    return path


def marker_schema(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The schema the data root's marker names for store `name` (None: no marker, or one written
    before markers were read). A renamed store keeps the schema it was created with: `cairn stores
    rename` renames only this machine's entry, never the shared schema other machines open."""
    try:
        schema = json.loads(marker_path(name, env=env).read_text()).get("schema")
    except (OSError, ValueError, AttributeError):
        return None
    return schema if isinstance(schema, str) and schema else None


def postgres_names(env: Mapping[str, str] | None = None) -> list[str]:
    """Stores the data root marks as on Postgres, by name."""
    folder = stores_dir(env=env)
    return sorted(p.stem for p in folder.glob("*.postgres")) if folder.is_dir() else []


def backend_of(name: str, config: Mapping[str, Any], *, project: bool, env: Mapping[str, str] | None = None) -> str:
    """"sqlite" or "postgres" for store `name`. project: it is the store the config was loaded for."""
    if marker_path(name, env=env).exists():
        return "postgres"
    if project and name != GLOBAL_STORE:
        return config["store"].get("backend", "sqlite")
    return "sqlite"


def postgres_url(config: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> str:
    """$CAIRN_POSTGRES_URL (from `env`, default environment.process_env()), else config
    `store.postgres_url`. Raises ConfigError when neither is set."""
    env = or_process(env)
    url = env.get(URL_ENV) or (config or {}).get("store", {}).get("postgres_url")
    if not url:
        raise ConfigError(f"this store is on Postgres: set {URL_ENV} (or store.postgres_url in the config) "
                          "to the server's URL; put the password in PGPASSWORD or ~/.pgpass")
    return url


def open_store(name: str, path: Path, config: Mapping[str, Any], *, create: bool, project: bool,
               meta: dict[str, str] | None = None, backend: str | None = None,
               url: str | None = None, busy_timeout_ms: int | None = None,
               env: Mapping[str, str] | None = None) -> StoreBackend:
    """Open store `name` on its backend (backend_of, unless `backend` is given). path: its SQLite
    file (unused on Postgres). url: the Postgres URL (default: postgres_url(config, env)).
    busy_timeout_ms: SQLite's lock wait (default: the config's store.busy_timeout_ms; hooks pass a
    shorter one). env: the environment naming the data root (which holds the markers, and whose
    owner-only modes a file in it gets) and CAIRN_POSTGRES_URL (default: environment.process_env()).
    Raises StoreNotFound, StoreCorrupted, SchemaTooNew, StoreError, ConfigError, UnsafeDataRoot."""
    backend = backend or backend_of(name, config, project=project, env=env)
    if backend == "postgres":
        from ..storage.postgres import PgStore

        return PgStore.open(url or postgres_url(config, env=env), name=name, create=create, meta=meta,
                            language=config["store"].get("language", "english"), schema=marker_schema(name, env=env))
    if backend != "sqlite":
        raise StoreError(f"unknown store backend {backend!r}; expected one of: {', '.join(BACKENDS)}")
    from ..storage.sqlite import SqliteStore

    busy = config["store"]["busy_timeout_ms"] if busy_timeout_ms is None else busy_timeout_ms
    root = None if str(path) == ":memory:" else data_root(env=env)
    return SqliteStore.open(path, name=name, create=create, meta=meta, busy_timeout_ms=busy,
                            vector_backend=config["store"]["vector_backend"], data_root=root)
