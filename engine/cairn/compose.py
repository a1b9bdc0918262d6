"""The composition root: what an entry point decides once per request or session.

Every entry point (a CLI command, a hook event, the warm process, an MCP session) calls `resolve`
once: it picks the store (explicit name > $CAIRN_STORE > git toplevel > working directory, one
`git rev-parse` at most) and loads the config for that project. `Cairn.open(resolved=...)` then
opens it without deciding anything again, and `embedder_from_config` is the one place an embedder
is built from settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import load_config
from .paths import StoreChoice, choose_store

if TYPE_CHECKING:
    from .embedder import Embedder


@dataclass(frozen=True)
class Resolved:
    """Which store and why (`choice`), and the merged config for its project (`config`)."""

    choice: StoreChoice
    config: dict[str, Any]


def resolve(store: str | None = None, *, cwd: Path | None = None, env: dict[str, str] | None = None,
            config: dict[str, Any] | None = None) -> Resolved:
    """Choose the store and load its project's config (unless `config` is given). env: the
    environment that names CAIRN_STORE and CAIRN_CONFIG (default: this process's).

    Raises InvalidStoreName, ConfigError."""
    choice = choose_store(store, cwd=cwd, env=env)
    return Resolved(choice, config if config is not None else load_config(choice.project_root, env=env))


def embedder_from_config(config: dict[str, Any], *, threads: int | None = None) -> Embedder | None:
    """The embedder the config asks for (not loaded yet), or None when embedding is disabled.

    threads: intra-op threads (the warm process uses 1; None keeps the library's default).
    Raises ConfigError when the configured backend cannot run the configured model."""
    emb = config["embedding"]
    if not emb["enabled"]:
        return None
    from .embedder import make_embedder
    from .errors import ConfigError

    try:
        return make_embedder(emb["model"], backend=emb["backend"], device=emb["device"],
                             batch_size=emb["batch_size"], threads=threads)
    except ValueError as exc:
        raise ConfigError(f"embedding: {exc}") from None
