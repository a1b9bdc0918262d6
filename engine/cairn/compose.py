"""The composition root: what an entry point decides once per request or session.

Every entry point (a CLI command, a hook event, the warm process, an MCP session) calls `resolve`
once: it picks the store (explicit name > $CAIRN_STORE > git toplevel > working directory, one
`git rev-parse` at most) and loads the config for that project. `Cairn.open(resolved=...)` then
opens it without deciding anything again, and `embedder_from_config` is the one place an embedder
is built from settings.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import PROJECT_FILE, load_config, user_config_path
from .environment import or_process
from .errors import StoreNotFound
from .locations import data_root_dir
from .stores.paths import GLOBAL_STORE, StoreChoice, choose_store, store_path

if TYPE_CHECKING:
    from .embedder import Embedder


@dataclass(frozen=True)
class Resolved:
    """Which store and why (`choice`), the merged config for its project (`config`), and the
    environment it was resolved in (`env`: the one naming the data root, which holds the global
    store and the Postgres markers, and CAIRN_POSTGRES_URL; None: environment.process_env(), read
    when used). Whatever opens the stores it names passes `env` on, so a composition root's
    environment reaches every store it opens. `env` is left out of the repr: it may hold secrets."""

    choice: StoreChoice
    config: dict[str, Any]
    env: Mapping[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def store_exists(self) -> bool:
        """Whether the chosen store exists, as far as a stat can tell: its SQLite file, or a store
        on Postgres (marked in the data root, or the project's config says `store.backend:
        postgres`), which is presumed to: only opening it asks the server (StoreNotFound then, for
        a named store; a project store is made on the server at its first open, as every machine
        of the team opens the same one)."""
        from .stores.backends import backend_of

        return self.choice.path.exists() or backend_of(self.choice.name, self.config, project=True,
                                                       env=self.env) == "postgres"

    def missing(self) -> StoreNotFound | None:
        """The error for a store that was named (--store, ?store=, CAIRN_STORE) and does not exist,
        or None: it exists, or it is a project's own store or the global store, which a first write
        creates. Every caller that must not create a store raises this one, so all say the same."""
        choice = self.choice
        if self.store_exists or not choice.explicit or choice.name == GLOBAL_STORE:
            return None
        return StoreNotFound(f"store {choice.name!r} does not exist (chosen by {choice.reason}); create it with "
                             f"`cairn stores create {choice.name}`")

    def global_instead(self) -> Resolved | None:
        """The user's global store, with this project's config: what a project whose own store does
        not exist yet still has (the session brief shows its preferences in every project). None
        when the global store does not exist either, or when it is the chosen store."""
        from .stores.backends import backend_of

        if self.choice.name == GLOBAL_STORE:
            return None
        path = store_path(GLOBAL_STORE, env=self.env)
        if not path.exists() and backend_of(GLOBAL_STORE, self.config, project=False, env=self.env) != "postgres":
            return None
        choice = StoreChoice(GLOBAL_STORE, path, "the global store (this project has no store yet)",
                             explicit=True, project_root=None)
        return Resolved(choice, self.config, self.env)


def resolve(store: str | None = None, *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
            config: dict[str, Any] | None = None) -> Resolved:
    """Choose the store and load its project's config (unless `config` is given). env: the
    environment that names CAIRN_STORE, CAIRN_CONFIG and the data root (default:
    environment.process_env()); the answer keeps it (`Resolved.env`).

    Raises InvalidStoreName, ConfigError, UnsafeDataRoot."""
    choice = choose_store(store, cwd=cwd, env=env)
    return Resolved(choice, config if config is not None else load_config(choice.project_root, env=env), env)


class ResolveCache:
    """`resolve` for a long-lived process (the warm process answers every prompt): the first answer
    for a (store, working directory, $CAIRN_STORE, $CAIRN_CONFIG, data root) is kept with everything it was
    derived from, and given again while none of that changed:
    - the working directory's real path, and each `.git` from it up to the filesystem root (absent,
      or which folder or file it is, and a .git file's content): `git rev-parse` answers from those;
    - the content of the user config file and of the project's `.cairn.yaml` (read each time: a few
      microseconds for a small file, while parsing and validating it costs milliseconds).
    So a new or edited config, a `git init` or a changed CAIRN_STORE take effect on the very next
    call. Thread-safe. Raises what `resolve` raises (nothing is kept then)."""

    def __init__(self, max_entries: int = 256):
        self.max_entries = max_entries
        self._entries: dict[tuple, tuple[tuple, Resolved]] = {}
        self._lock = threading.Lock()

    def resolve(self, store: str | None = None, *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                config: dict[str, Any] | None = None) -> Resolved:
        """As `resolve`; the config given back is the caller's own copy."""
        if config is not None:
            return resolve(store, cwd=cwd, env=env, config=config)
        env = dict(or_process(env))
        cwd = Path.cwd() if cwd is None else Path(cwd)
        # The data root is in the key: a store's path is in it (a string from the environment alone).
        key = (store, str(cwd), env.get("CAIRN_STORE") or None, env.get("CAIRN_CONFIG") or None, data_root_dir(env))
        git = None if store is not None or env.get("CAIRN_STORE") else _git_stamp(cwd)
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] == (git, *_config_stamp(entry[1].choice, env)):
            return Resolved(entry[1].choice, copy.deepcopy(entry[1].config), env)
        # Each stamp is taken before what it stands for is read: a change in between makes the
        # next call's stamp differ, so it is resolved again rather than served stale.
        choice = choose_store(store, cwd=cwd, env=env)
        stamp = (git, *_config_stamp(choice, env))
        resolved = Resolved(choice, load_config(choice.project_root, env=env), env)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (stamp, resolved)
            while len(self._entries) > self.max_entries:
                del self._entries[next(iter(self._entries))]
        return Resolved(choice, copy.deepcopy(resolved.config), env)


def _read_bytes(path: str | Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:  # missing, a folder, unreadable: load_config decides what that means
        return None


def _config_stamp(choice: StoreChoice, env: Mapping[str, str]) -> tuple[bytes | None, bytes | None]:
    user = _read_bytes(user_config_path(env=env))
    project = None if choice.project_root is None else _read_bytes(choice.project_root / PROJECT_FILE)
    return user, project


def _git_stamp(cwd: Path) -> tuple:
    """What `git rev-parse --show-toplevel` in `cwd` depends on in the file system: the real path,
    and each ancestor's `.git` (absent; a folder, by inode; a file, by inode and content)."""
    here = os.path.realpath(cwd)
    out: list[Any] = [here]
    while True:
        dot_git = os.path.join(here, ".git")
        try:
            info = os.stat(dot_git)
        except OSError:
            out.append(None)
        else:
            is_dir = os.path.isdir(dot_git)
            out.append((info.st_dev, info.st_ino, is_dir, None if is_dir else _read_bytes(dot_git)))
        parent = os.path.dirname(here)
        if parent == here:
            return tuple(out)
        here = parent


def embedder_from_config(config: dict[str, Any], *, threads: int | None = None,
                         short_lived: bool = False) -> Embedder | None:
    """The embedder the config asks for (not loaded yet), or None when embedding is disabled.

    threads: intra-op threads (the warm process uses 1; None keeps the library's default).
    short_lived: for a process that embeds a few texts and exits (embedder.make_embedder).
    Raises ConfigError when the configured backend cannot run the configured model."""
    emb = config["embedding"]
    if not emb["enabled"]:
        return None
    from .embedder import make_embedder
    from .errors import ConfigError

    try:
        return make_embedder(emb["model"], backend=emb["backend"], device=emb["device"],
                             batch_size=emb["batch_size"], threads=threads, short_lived=short_lived)
    except ValueError as exc:
        raise ConfigError(f"embedding: {exc}") from None
