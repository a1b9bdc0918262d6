"""The data root: where Cairn keeps a user's stores (CAIRN_HOME, else the platform's folder; the
string itself is locations.data_root_dir), whether it can hold memories, and its owner-only folders
and files (0700 / 0600, whatever the umask).

Below the stores and the storage backends, which create their files through it. `env`: the
environment that names CAIRN_HOME (and HOME, XDG_DATA_HOME); default environment.process_env().
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from .environment import or_process
from .errors import UnsafeDataRoot
from .locations import data_root_dir


def data_root(env: Mapping[str, str] | None = None) -> Path:
    """$CAIRN_HOME, else the platform's user data folder (e.g. ~/.local/share/cairn; locations.py).
    Raises UnsafeDataRoot when it cannot hold memories (`unusable_data_root`)."""
    env = or_process(env)
    problem = unusable_data_root(env=env)
    if problem is not None:
        raise UnsafeDataRoot(problem)
    return Path(data_root_dir(env))


def unusable_data_root(env: Mapping[str, str] | None = None) -> str | None:
    """Why the data root cannot hold memories, as one sentence naming the fix, or None. CAIRN_HOME
    set but empty (it would silently mean the default), relative (it would mean a folder in
    whichever directory a command runs from), naming a file, or a folder this user cannot write; a
    missing root is fine (it is created) when its nearest existing parent is a writable folder."""
    env = or_process(env)
    explicit = env.get("CAIRN_HOME")
    fix = "set CAIRN_HOME to an absolute path of a folder of your own, or unset it for the default"
    if explicit is not None and not explicit.strip():
        return f"CAIRN_HOME is set but empty; {fix}"
    root = data_root_dir(env)
    if explicit is not None and not os.path.isabs(root):
        return f"CAIRN_HOME is a relative path ({explicit!r}); {fix}"
    path = Path(root)
    existing = next((p for p in (path, *path.parents) if os.path.lexists(p)), None)
    if existing is None:
        return None
    if not existing.is_dir():
        named = "the data root" if existing == path else f"{existing}, on the way to the data root {path},"
        return f"{named} {path if existing == path else ''} is a file, not a folder; {fix}".replace("  ", " ")
    if not os.access(existing, os.W_OK | os.X_OK):
        named = f"the data root {path}" if existing == path else f"{existing} (where the data root {path} would go)"
        return f"{named} is not writable by this user; {fix}"
    return None


# Memories are private: every folder Cairn makes is 0700 and every file 0600, whatever the umask.
DIR_MODE = 0o700


FILE_MODE = 0o600


def _uid() -> int:
    return os.geteuid()


def ensure_data_root(env: Mapping[str, str] | None = None) -> Path:
    """The data root, created 0700 if missing (a symlink to a folder is followed). Refuses a root
    owned by another user. An install made before modes were enforced (root not 0700) has every
    folder under it tightened to 0700 and every file to 0600, once. Raises UnsafeDataRoot."""
    return secure_root(data_root(env=env))


def secure_root(root: Path) -> Path:
    """`ensure_data_root` for a data root already found (data_root(env)): created 0700 if missing,
    refused when owned by another user, tightened once if older than the modes. Reads no
    environment: the storage layer, given the root by the stores above it, calls this one.
    Raises UnsafeDataRoot."""
    root = Path(root)
    try:
        root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise UnsafeDataRoot(f"the data root {root} cannot be created ({exc.strerror or exc}); set CAIRN_HOME "
                             "to an absolute path of a folder of your own, or unset it for the default") from None
    info = os.stat(root)
    if info.st_uid != _uid():
        raise UnsafeDataRoot(
            f"the data root {root} belongs to another user (uid {info.st_uid}); refusing to keep memories "
            "there: set CAIRN_HOME to a folder of your own"
        )
    if stat.S_IMODE(info.st_mode) != DIR_MODE:
        if _only_ours(root):
            os.chmod(root, DIR_MODE)
            tighten(root)
        elif _own_entries_loose(root):
            # A folder shared with the user's files keeps its mode, so it cannot say "tightened
            # already": Cairn's own top entries do, and the walk under them runs once, not per open.
            tighten(root)
    return root


# What Cairn keeps in a data root. A CAIRN_HOME pointed at a folder that also holds the user's own
# files keeps their modes: only these entries are made private there, not the folder itself.
OWN_ENTRIES = frozenset({"stores", "backups", "logs", "sessions", "paused", "cache", "capture-locks",
                         "claude-memory-locks", "tokens.json", "config.yaml"})


def _only_ours(root: Path) -> bool:
    try:
        return all(entry.name in OWN_ENTRIES for entry in os.scandir(root))
    except OSError:
        return False


def _own_entries_loose(root: Path) -> bool:
    for name in OWN_ENTRIES:
        try:
            info = os.lstat(root / name)
        except OSError:
            continue
        mode = DIR_MODE if stat.S_ISDIR(info.st_mode) else FILE_MODE
        if not stat.S_ISLNK(info.st_mode) and stat.S_IMODE(info.st_mode) != mode:
            return True
    return False


def _walk_ours(root: Path) -> Iterator[tuple[Path, int]]:
    """(path, the mode it should have) of Cairn's folders and files under `root`: all of them in a
    data root that holds only Cairn's entries, else those under OWN_ENTRIES alone. Symlinks are left out."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    ours = _only_ours(root)
    for entry in entries:
        if not ours and entry.name not in OWN_ENTRIES:
            continue
        top = Path(entry.path)
        if entry.is_symlink():
            continue
        if not entry.is_dir():
            yield top, FILE_MODE
            continue
        yield top, DIR_MODE
        for folder, dirs, files in os.walk(top):
            for name, mode in [(d, DIR_MODE) for d in dirs] + [(f, FILE_MODE) for f in files]:
                path = Path(folder) / name
                if not path.is_symlink():
                    yield path, mode


def tighten(root: Path) -> list[Path]:
    """Set Cairn's folders under `root` to 0700 and its files to 0600 (_walk_ours: the user's own
    files in a shared folder and symlinks are left alone). Returns the paths changed."""
    changed = []
    for path, mode in _walk_ours(root):
        try:
            if stat.S_IMODE(os.lstat(path).st_mode) != mode:
                os.chmod(path, mode)
                changed.append(path)
        except OSError:  # removed meanwhile
            continue
    return changed


def loose_modes(root: Path) -> list[Path]:
    """Cairn's folders under `root` (the root itself when it holds only Cairn's entries) not 0700
    and its files not 0600."""
    out = [root] if root.is_dir() and _only_ours(root) and stat.S_IMODE(os.stat(root).st_mode) != DIR_MODE else []
    for path, mode in _walk_ours(root):
        try:
            if stat.S_IMODE(os.lstat(path).st_mode) != mode:
                out.append(path)
        except OSError:
            continue
    return out


def private_dir(path: Path, env: Mapping[str, str] | None = None, *, root: Path | None = None) -> Path:
    """Create `path` (a folder of the data root, or the root itself) 0700, tightening it if it
    exists; checks the data root first. root: that data root when the caller already has it (then
    `env` is not read); else data_root(env). Raises UnsafeDataRoot."""
    root = secure_root(root) if root is not None else ensure_data_root(env=env)
    path = Path(path)
    if path != root:
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        if stat.S_IMODE(os.stat(path).st_mode) != DIR_MODE:
            os.chmod(path, DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty with mode 0600 if missing, else make it 0600. Returns it."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        pass
    if stat.S_IMODE(os.stat(path).st_mode) != FILE_MODE:  # an older file, or a umask like 0277
        os.chmod(path, FILE_MODE)
    return Path(path)


def write_private(path: Path, data: bytes, env: Mapping[str, str] | None = None) -> None:
    """Write `data` to `path` atomically (a 0600 temporary file renamed over it); its folder is
    created private (in the data root of `env`)."""
    path = Path(path)
    private_dir(path.parent, env=env)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
