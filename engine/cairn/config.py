"""Configuration: YAML at user level, overridable per project, validated with JSON Schema.

Files, later ones overriding earlier ones key by key:
1. user: `$CAIRN_CONFIG` (which must exist), else `config.yaml` in the platform's user config folder
   (platformdirs' answer, computed without importing it: locations.py);
2. project: `.cairn.yaml` at the project root.
An unknown key or a wrong type is a ConfigError naming the key and the file.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .embedder import BACKENDS
from .environment import or_process
from .errors import ConfigError
from .locations import data_root_dir, user_config_dir

DEFAULTS: dict[str, Any] = {
    "embedding": {"model": "sentence-transformers/all-MiniLM-L6-v2", "backend": "auto", "device": "cpu",
                  "batch_size": 32, "enabled": True},
    # backend: where the project store lives (backends.py); postgres_url: the server when
    # $CAIRN_POSTGRES_URL is not set (no password in it: use PGPASSWORD or ~/.pgpass); language: the
    # text search language of a new Postgres store (a snowball stemmer, or "simple").
    "store": {"busy_timeout_ms": 10_000, "vector_backend": "auto", "backend": "sqlite", "language": "english"},
    "recall": {"k": 10, "candidates": 50, "scope": "all"},
    "list": {"limit": 50, "scope": "project"},
    "supersession": {"enabled": True},
    # brief_chars: context.BRIEF_CHARS (why that figure: docs/benchmarks.md, "The brief's budget").
    "hooks": {"enabled": True, "brief_chars": 16000, "prompt_k": 5, "prompt_chars": 1200,
              # Tool time (context.tool_context): memories per tool call, characters per call and
              # per session; the subagent's start (context.subagent_context).
              "tools": True, "tool_k": 5, "tool_chars": 1600, "tool_session_chars": 10000,
              "subagent_k": 5, "subagent_chars": 1500},
    # Captured sessions: capture on Stop/PreCompact, and search_sessions' defaults.
    # vector_days: turns older than this many days lose their vector (their text and keyword entry
    # stay); 0 keeps every vector.
    "sessions": {"capture": True, "k": 10, "window": 2, "candidates": 50, "vector_days": 0},
    # `cairn maintain`: background: a session start runs the safe band (exact duplicates) in the
    # background when the store had no run for stale_days (off by default).
    "maintenance": {"background": False, "stale_days": 7},
    # Claude Code's own auto-memory folder: sync: each session start imports what changed in it
    # (docs/claude-memory.md).
    "claude_memory": {"sync": True},
}

_INT = {"type": "integer"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "embedding": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "model": {"type": "string", "minLength": 1},
                "backend": {"enum": list(BACKENDS)},
                "device": {"type": "string"},
                "batch_size": {**_INT, "minimum": 1, "maximum": 4096},
                "enabled": {"type": "boolean"},
            },
        },
        "store": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "busy_timeout_ms": {**_INT, "minimum": 5000},
                "vector_backend": {"enum": ["auto", "sqlite-vec", "numpy"]},
                "backend": {"enum": ["sqlite", "postgres"]},
                "postgres_url": {"type": "string", "minLength": 1},
                "language": {"type": "string", "pattern": "^[a-z]+$"},
            },
        },
        "recall": {
            "type": "object", "additionalProperties": False,
            "properties": {"k": {**_INT, "minimum": 1, "maximum": 1000},
                           "candidates": {**_INT, "minimum": 1, "maximum": 10000},
                           "scope": {"enum": ["project", "global", "all"]}},
        },
        "list": {
            "type": "object", "additionalProperties": False,
            "properties": {"limit": {**_INT, "minimum": 1, "maximum": 10000},
                           "scope": {"enum": ["project", "global", "all"]}},
        },
        "supersession": {
            "type": "object", "additionalProperties": False,
            "properties": {"enabled": {"type": "boolean"}},
        },
        "hooks": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                # Two SessionStart hook outputs of under 10,000 characters each (hooks.split_brief).
                "brief_chars": {**_INT, "minimum": 0, "maximum": 19_000},
                "prompt_k": {**_INT, "minimum": 0, "maximum": 50},
                "prompt_chars": {**_INT, "minimum": 0, "maximum": 10_000},
                "tools": {"type": "boolean"},
                "tool_k": {**_INT, "minimum": 0, "maximum": 20},
                "tool_chars": {**_INT, "minimum": 0, "maximum": 10_000},
                "tool_session_chars": {**_INT, "minimum": 0, "maximum": 100_000},
                "subagent_k": {**_INT, "minimum": 0, "maximum": 20},
                "subagent_chars": {**_INT, "minimum": 0, "maximum": 10_000},
            },
        },
        "sessions": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "capture": {"type": "boolean"},
                "k": {**_INT, "minimum": 1, "maximum": 1000},
                "window": {**_INT, "minimum": 0, "maximum": 50},
                "candidates": {**_INT, "minimum": 1, "maximum": 10000},
                "vector_days": {**_INT, "minimum": 0, "maximum": 100000},
            },
        },
        "maintenance": {
            "type": "object", "additionalProperties": False,
            "properties": {"background": {"type": "boolean"}, "stale_days": {**_INT, "minimum": 1, "maximum": 3650}},
        },
        "claude_memory": {
            "type": "object", "additionalProperties": False,
            "properties": {"sync": {"type": "boolean"}},
        },
    },
}

PROJECT_FILE = ".cairn.yaml"


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """$CAIRN_CONFIG (from `env`, default environment.process_env()), else config.yaml in this
    process's user config folder (a hook's `env` names only its CAIRN_CONFIG). Raises ConfigError
    when $CAIRN_CONFIG names a file that does not exist: a typo must not silently mean "no
    settings" (an empty file is a valid config with none)."""
    env = or_process(env)
    explicit = env.get("CAIRN_CONFIG")
    if not explicit:
        return Path(user_config_dir()) / "config.yaml"
    path = Path(explicit)
    if not path.exists():
        raise ConfigError(f"CAIRN_CONFIG names {path}, which does not exist")
    return path


@functools.cache
def _validator() -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(SCHEMA)
    cls.check_schema(SCHEMA)
    return cls(SCHEMA)


@functools.cache
def _schema_bytes() -> bytes:
    return json.dumps(SCHEMA, sort_keys=True).encode()


def _cache_path(raw: bytes) -> Path:
    """Where a file with these bytes, once validated against this SCHEMA, is kept as JSON (in this
    process's data root)."""
    digest = hashlib.sha256(_schema_bytes() + b"\0" + raw).hexdigest()
    return Path(data_root_dir()) / "cache" / f"config-{digest[:32]}.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from None
    if not raw:
        return {}  # an empty file: no settings, and no YAML parser to import
    # PyYAML and jsonschema cost ~100-200 ms to import, more than a cold hook's whole budget: a
    # file already validated (same bytes, same schema) is read back from the data root's cache.
    cache = _cache_path(raw)
    try:
        cached = json.loads(cache.read_bytes())
        if isinstance(cached, dict):
            return cached
    except (OSError, ValueError):
        pass
    data = _parse(path, raw)
    _keep(cache, data)
    return data


def _keep(cache: Path, data: dict[str, Any]) -> None:
    """Write the validated settings to `cache` (0600 in a 0700 folder, atomically); best effort."""
    if not cache.parent.parent.is_dir():
        return  # no data root yet: its creation (home.ensure_data_root) decides its modes
    try:
        encoded = json.dumps(data).encode()
        cache.parent.mkdir(mode=0o700, exist_ok=True)
        partial = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(encoded)
        os.replace(partial, cache)
    except (OSError, TypeError, ValueError):  # a read-only data root, a value JSON cannot hold
        return
    _prune(cache.parent, keep=cache)


CACHE_MAX_AGE_S = 30 * 86400  # an entry not rewritten for 30 days is dropped; if still used, it is
# validated once more and written again. Only a miss writes, so hits stay one read.


def _prune(folder: Path, *, keep: Path) -> None:
    """Remove cached configs (and writers' leftover partial files) older than CACHE_MAX_AGE_S, so
    that every edit of a config file does not leave an entry behind forever; best effort."""
    cutoff = time.time() - CACHE_MAX_AGE_S
    try:
        entries = list(folder.glob("config-*"))
    except OSError:
        return
    for entry in entries:
        try:
            if entry != keep and entry.stat().st_mtime < cutoff:
                entry.unlink()
        except OSError:  # another process pruned it first, or it is not ours to remove
            pass


def _parse(path: Path, raw: bytes) -> dict[str, Any]:
    """The YAML in `raw`, validated against SCHEMA. Raises ConfigError naming the file and key."""
    import jsonschema
    import yaml

    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from None
    data = {} if data is None else data
    # best_match picks the error jsonschema.validate would raise, without re-checking SCHEMA against
    # the metaschema on every call (that check was ~60 ms of each load).
    error = jsonschema.exceptions.best_match(_validator().iter_errors(data))
    if error is not None:
        key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        if error.validator == "additionalProperties":
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            key = ".".join([*map(str, error.absolute_path), extra[0]]) if extra else key
            raise ConfigError(f"{path}: unknown key {key!r}") from None
        raise ConfigError(f"{path}: key {key!r}: {error.message}") from None
    return data


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_config(project_root: Path | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Defaults, then the user file, then the project's `.cairn.yaml`. env: the environment whose
    $CAIRN_CONFIG counts (a hook's, forwarded to the warm process); default
    environment.process_env(). Raises ConfigError."""
    config = copy.deepcopy(DEFAULTS)
    candidates = [user_config_path(env=env)]
    if project_root is not None:
        candidates.append(project_root / PROJECT_FILE)
    for path in candidates:
        if path.is_file():
            config = _merge(config, _read(path))
    return config
