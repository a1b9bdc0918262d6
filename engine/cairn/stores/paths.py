"""Where stores live, and which store a working directory belongs to.

Order of selection: explicit name (--store) > $CAIRN_STORE (what a direnv .envrc sets per folder)
> the git toplevel of the working directory > the working directory itself.
- A linked worktree maps to its main repository, through the common git dir.
- A submodule is its own project (its common git dir is inside the superproject's .git/modules).
A project store's file name is a readable slug plus a hash of the full real path, so two
repositories both called "api" never share memory.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..environment import or_process
from ..errors import InvalidStoreName
from ..home import data_root

GLOBAL_STORE = "global"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SLUG_UNSAFE = re.compile(r"[^a-z0-9]+")


def stores_dir(env: Mapping[str, str] | None = None) -> Path:
    """<data root>/stores, the data root of `env` (default: environment.process_env()). Raises UnsafeDataRoot."""
    return data_root(env=env) / "stores"


def backups_dir(env: Mapping[str, str] | None = None) -> Path:
    """<data root>/backups, the data root of `env` (default: environment.process_env()). Raises UnsafeDataRoot."""
    return data_root(env=env) / "backups"


def validate_store_name(name: str) -> str:
    """A store name is letters, digits, '.', '_' and '-', not starting with a dot; never a path.
    Raises InvalidStoreName."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise InvalidStoreName(
            f"invalid store name {name!r}: use letters, digits, '.', '_' and '-' (no path separators, no '..')"
        )
    return name


def store_path(name: str, env: Mapping[str, str] | None = None) -> Path:
    """The SQLite file of store `name` in the data root of `env` (default: environment.process_env()).
    Raises InvalidStoreName, UnsafeDataRoot."""
    return stores_dir(env=env) / f"{validate_store_name(name)}.db"


@dataclass(frozen=True)
class StoreChoice:
    """Which store, and why. project_root: the folder it was derived from (None for named stores)."""

    name: str
    path: Path
    reason: str
    explicit: bool
    project_root: Path | None


def project_root(cwd: Path) -> tuple[Path, str]:
    """The project folder for `cwd` and how it was found ("git toplevel", "git worktree", "directory")."""
    cwd = Path(os.path.realpath(cwd))
    if ".git" in cwd.parts:  # inside a repository's .git folder (a git hook, an editor on COMMIT_EDITMSG)
        cwd = Path(*cwd.parts[:cwd.parts.index(".git")])
    try:
        out = subprocess.run(
            ["git", "-C", str(cwd), "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return cwd, "directory"
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) < 2 or not lines[0]:
        return cwd, "directory"
    toplevel, common = Path(os.path.realpath(lines[0])), Path(os.path.realpath(lines[1]))
    if common.name == ".git" and common.parent != toplevel:
        return common.parent, "git worktree of main repository"
    return toplevel, "git toplevel"


def project_store_name(root: Path) -> str:
    """`<slug>-<10 hex of sha256(realpath)>`: readable and injective in practice."""
    real = os.path.realpath(root)
    slug = _SLUG_UNSAFE.sub("-", Path(real).name.lower()).strip("-")[:40] or "root"
    return f"{slug}-{hashlib.sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


def choose_store(explicit: str | None = None, *, cwd: Path | None = None,
                 env: Mapping[str, str] | None = None) -> StoreChoice:
    """Pick the store by the documented order. env: the environment whose CAIRN_STORE and data root
    count (default: environment.process_env()). Raises InvalidStoreName."""
    env = or_process(env)
    if explicit is not None:
        return StoreChoice(validate_store_name(explicit), store_path(explicit, env=env), "--store option", True, None)
    if env.get("CAIRN_STORE"):
        name = env["CAIRN_STORE"]
        return StoreChoice(validate_store_name(name), store_path(name, env=env), "CAIRN_STORE environment variable",
                           True, None)
    root, how = project_root(cwd or Path.cwd())
    name = project_store_name(root)
    return StoreChoice(name, store_path(name, env=env), f"{how} {root}", False, root)
