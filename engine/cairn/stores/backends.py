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
from ..home import private_dir, write_private
from .paths import GLOBAL_STORE, stores_dir, validate_store_name
from ..timeutil import now_ms

if TYPE_CHECKING:
    from ..storage.protocol import StoreBackend

URL_ENV = "CAIRN_POSTGRES_URL"
BACKENDS = ("sqlite", "postgres")


def marker_path(name: str) -> Path:
    """The data root's record that store `name` lives on Postgres (no URL in it)."""
    return stores_dir() / f"{validate_store_name(name)}.postgres"


def write_marker(name: str, schema: str) -> Path:
    path = marker_path(name)
    private_dir(path.parent)
    write_private(path, json.dumps({"backend": "postgres", "schema": schema, "created_at": now_ms()}).encode())
    return path


def marker_schema(name: str) -> str | None:
    """The schema the data root's marker names for store `name` (None: no marker, or one written
    before markers were read). A renamed store keeps the schema it was created with: `cairn stores
    rename` renames only this machine's entry, never the shared schema other machines open."""
    try:
        schema = json.loads(marker_path(name).read_text()).get("schema")
    except (OSError, ValueError, AttributeError):
        return None
    return schema if isinstance(schema, str) and schema else None


def postgres_names() -> list[str]:
    """Stores the data root marks as on Postgres, by name."""
    folder = stores_dir()
    return sorted(p.stem for p in folder.glob("*.postgres")) if folder.is_dir() else []


def backend_of(name: str, config: Mapping[str, Any], *, project: bool) -> str:
    """"sqlite" or "postgres" for store `name`. project: it is the store the config was loaded for."""
    if marker_path(name).exists():
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
               url: str | None = None, busy_timeout_ms: int | None = None) -> StoreBackend:
    """Open store `name` on its backend (backend_of, unless `backend` is given). path: its SQLite
    file (unused on Postgres). url: the Postgres URL (default: postgres_url(config)). busy_timeout_ms:
    SQLite's lock wait (default: the config's store.busy_timeout_ms; hooks pass a shorter one).
    Raises StoreNotFound, StoreCorrupted, SchemaTooNew, StoreError, ConfigError."""
    backend = backend or backend_of(name, config, project=project)
    if backend == "postgres":
        from ..storage.postgres import PgStore

        return PgStore.open(url or postgres_url(config), name=name, create=create, meta=meta,
                            language=config["store"].get("language", "english"), schema=marker_schema(name))
    if backend != "sqlite":
        raise StoreError(f"unknown store backend {backend!r}; expected one of: {', '.join(BACKENDS)}")
    from ..storage.sqlite import SqliteStore

    busy = config["store"]["busy_timeout_ms"] if busy_timeout_ms is None else busy_timeout_ms
    return SqliteStore.open(path, name=name, create=create, meta=meta, busy_timeout_ms=busy,
                      vector_backend=config["store"]["vector_backend"])
