"""Claude Code's own auto memory, beside Cairn's: where it lives, importing it, exporting to it, and
what of it (and of CLAUDE.md) a session has already loaded.

The format is the one the pinned CLI (@anthropic-ai/claude-code 2.1.328) writes and reads, taken from
its binary (docs/claude-memory.md quotes the strings):
- the folder: `autoMemoryDirectory` from the settings (local, then user; "supports ~/"; the CLI ignores
  it in a checked-in .claude/settings.json), else `<claude dir>/projects/<sanitized project>/memory/`,
  the project being the git top level of the session's folder, sanitised as transcripts' folders are;
- on or off: CLAUDE_CODE_DISABLE_AUTO_MEMORY (1/true/yes/on: off; 0/false/no/off: on whatever the
  settings say), CLAUDE_CODE_SIMPLE (--bare: off), else the setting `autoMemoryEnabled`, default on;
- one markdown file per memory, frontmatter `name`, `description`, `metadata.type` (user, feedback,
  project, reference), then the body;
- MEMORY.md, the index loaded into every session: `- [Title](file.md) — hook` lines, of which the
  CLI loads the first INDEX_MAX_LINES lines and INDEX_MAX_BYTES bytes.

Kinds: a native type maps onto Cairn's kinds by what the CLI says each holds (TYPE_KIND); an export
writes the reverse (KIND_TYPE) and keeps the exact kind, tags and importance in `metadata.cairn_*`,
so export then import gives the same memories.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import stat as stat_mod
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from cairn import (
    IMPORTANCE_RANGE, KINDS, CairnError, InvalidMemory, MemoryNotFound, NotCurrent, data_root, private_dir,
    private_file,
)

if TYPE_CHECKING:
    from cairn import Cairn, Memory

log = logging.getLogger(__name__)

SOURCE = "claude-memory"  # the memories' source, and the name of the import's recorded state
LOG_NAME = "claude-memory.log"  # in <data root>/logs: the background sync's log
INDEX = "MEMORY.md"
# The CLI's MEMORY.md cap (binary: `MW=200,bce=25000`): past these the index is cut when loaded.
INDEX_MAX_LINES = 200
INDEX_MAX_BYTES = 25_000
INDEX_LINE_CHARS = 150  # "each entry should be one line, under ~150 characters" (the CLI's own prompt)
MAX_FILE_BYTES = 64 * 1024  # a larger file is refused whole; the CLI asks for files under 4 KB
NATIVE_TYPES = ("user", "feedback", "project", "reference")  # binary: pZo=["user","feedback","project","reference"]
# What the CLI's prompt says each type holds: user: the user's role, goals, knowledge and how they
# like to work; feedback: guidance on how to approach the work (what to avoid, what to keep doing);
# project: ongoing work, goals, incidents; reference: where information lives outside the repo.
TYPE_KIND = {"user": "preference", "feedback": "convention", "project": "fact", "reference": "fact"}
KIND_TYPE = {"preference": "user", "convention": "feedback", "decision": "project", "fact": "project",
             "task": "project", "insight": "feedback"}
TAG = "claude-memory"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_INDEX_LINK = re.compile(r"\]\(([^)\s]+\.md)\)")


class NativeMemoryError(CairnError):
    """A native memory file that cannot be imported; the message says why."""


# -- where, and whether it is on -------------------------------------------------------------------
@dataclass(frozen=True)
class NativeMemory:
    """Claude Code's auto memory for one project. enabled: whether the CLI reads and writes it;
    reason: why (the switch that decided); folder: where its files are; setting: where the folder
    came from ("default" or the settings file)."""

    project: Path
    folder: Path
    enabled: bool
    reason: str
    setting: str = "default"


def _settings(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _claude_home(env: dict[str, str]) -> Path:
    """Claude Code's user folder for a hook's environment: $CLAUDE_CONFIG_DIR, else $HOME/.claude."""
    base = env.get("CLAUDE_CONFIG_DIR")
    return Path(base) if base else Path(env.get("HOME") or Path.home()) / ".claude"


def git_top(folder: Path) -> Path:
    """The nearest ancestor of `folder` holding .git (the CLI keys auto memory by the git root), else `folder`."""
    folder = folder.resolve()
    return next((p for p in (folder, *folder.parents) if (p / ".git").exists()), folder)


def native_memory(cwd: Path, env: dict[str, str] | None = None) -> NativeMemory:
    """Where Claude Code keeps the auto memory of the project holding `cwd`, and whether it is on
    (see the module's docstring for the rules, read from the pinned CLI)."""
    from .claude import encoded_project

    env = dict(os.environ) if env is None else env
    home = _claude_home(env)
    project = git_top(cwd)
    user = _settings(home / "settings.json")
    local = _settings(project / ".claude" / "settings.local.json")
    shared = _settings(project / ".claude" / "settings.json")
    folder, setting = home / "projects" / encoded_project(project) / "memory", "default"
    for name, data in ((".claude/settings.local.json", local), ("user settings.json", user)):
        value = data.get("autoMemoryDirectory")
        if isinstance(value, str) and value.strip():
            raw = value.strip()
            folder = Path(env.get("HOME") or Path.home()) / raw[2:] if raw.startswith("~/") else Path(raw)
            setting = name
            break
    switch = (env.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY") or "").strip().lower()
    if switch in _TRUE:
        enabled, reason = False, "CLAUDE_CODE_DISABLE_AUTO_MEMORY is set"
    elif switch in _FALSE:
        enabled, reason = True, f"CLAUDE_CODE_DISABLE_AUTO_MEMORY={switch}"
    elif (env.get("CLAUDE_CODE_SIMPLE") or "").strip():
        enabled, reason = False, "CLAUDE_CODE_SIMPLE (--bare) is set"
    else:
        enabled, reason = True, "on by default"
        for name, data in ((".claude/settings.local.json", local), (".claude/settings.json", shared),
                           ("user settings.json", user)):
            if isinstance(data.get("autoMemoryEnabled"), bool):
                enabled = data["autoMemoryEnabled"]
                reason = f"autoMemoryEnabled is {str(enabled).lower()} in {name}"
                break
    return NativeMemory(project=project, folder=folder, enabled=enabled, reason=reason, setting=setting)


# -- reading one file -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NativeFile:
    """One parsed native memory file: what becomes a Cairn memory."""

    name: str           # the file's name in the folder ("deploy-with-kamal.md")
    slug: str           # frontmatter `name`
    text: str           # description and body
    kind: str
    tags: tuple[str, ...]
    importance: int
    mtime_ms: int


_PLAIN_VALUE = re.compile(r"^([ \t]*[A-Za-z_][\w-]*:[ \t]+)(?![\"'|>])(.*?)[ \t]*$", re.M)


def _quote_value(match: re.Match[str]) -> str:
    return match.group(1) + json.dumps(match.group(2), ensure_ascii=False)


def _frontmatter(raw: str) -> tuple[dict[str, Any], str]:
    """The YAML frontmatter as a mapping and the body after it. Raises NativeMemoryError."""
    match = _FRONTMATTER.match(raw)
    if match is None:
        if raw.startswith("---"):
            raise NativeMemoryError("its frontmatter is not closed by a --- line")
        return {}, raw
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        # The CLI parses again with plain values quoted (`description: Use X: not Y` is common in
        # files Claude writes); so does this, and only a block that still fails is refused.
        try:
            data = yaml.safe_load(_PLAIN_VALUE.sub(_quote_value, match.group(1)))
        except yaml.YAMLError:
            raise NativeMemoryError(f"its frontmatter is not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise NativeMemoryError("its frontmatter is not a mapping of keys to values")
    return data, raw[match.end():]


def _text(description: str, body: str) -> str:
    """The memory's text: the description, then the body; only the body when it already starts
    with the description (an exported file), only the description when the body is empty."""
    description, body = description.strip(), body.strip()
    if not body:
        return description
    if not description or " ".join(body.split()).startswith(" ".join(description.rstrip("\u2026").split())):
        return body
    return f"{description}\n\n{body}"


def read_file(folder: Path, name: str) -> tuple[NativeFile, os.stat_result]:
    """Read and parse `folder/name`. Raises NativeMemoryError naming why it cannot be imported:
    unreadable, a symlink leading out of the folder, not a regular file, over MAX_FILE_BYTES,
    not UTF-8, broken frontmatter, no text."""
    path = folder / name
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise NativeMemoryError(f"it cannot be resolved ({exc.__class__.__name__})") from None
    if not real.is_relative_to(folder.resolve()):
        raise NativeMemoryError(f"it is a symlink to {real}, outside the memory folder")
    try:
        info = real.stat()
        if not stat_mod.S_ISREG(info.st_mode):
            raise NativeMemoryError("it is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise NativeMemoryError(f"it is {info.st_size} bytes; the limit is {MAX_FILE_BYTES} "
                                    "(the CLI keeps memory files under 4 KB)")
        data = real.read_bytes()
    except PermissionError:
        raise NativeMemoryError("it cannot be read (permission denied)") from None
    except OSError as exc:
        raise NativeMemoryError(f"it cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    if len(data) > MAX_FILE_BYTES:
        raise NativeMemoryError(f"it is over {MAX_FILE_BYTES} bytes")
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NativeMemoryError(f"it is not UTF-8 (byte {exc.start} is {data[exc.start]:#04x})") from None
    front, body = _frontmatter(raw)
    metadata = front.get("metadata") if isinstance(front.get("metadata"), dict) else {}
    description = front.get("description")
    if description is not None and not isinstance(description, str):
        raise NativeMemoryError("its description is not a string")
    text = _text(description or "", body)
    if not text:
        raise NativeMemoryError("it holds no text (no description, empty body)")
    native_type = metadata.get("type", front.get("type"))  # older files carried `type` at the top level
    kind = metadata.get("cairn_kind")
    if kind not in KINDS:
        kind = TYPE_KIND.get(native_type if isinstance(native_type, str) else "", "fact")
    tags = metadata.get("cairn_tags")
    tags = tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()
    importance = metadata.get("cairn_importance")
    low, high = IMPORTANCE_RANGE
    if isinstance(importance, bool) or not isinstance(importance, int) or not low <= importance <= high:
        importance = 3
    slug = front.get("name") if isinstance(front.get("name"), str) else name.removesuffix(".md")
    return NativeFile(name=name, slug=slug, text=text, kind=kind, tags=tuple(sorted({TAG, *tags})),
                      importance=importance, mtime_ms=info.st_mtime_ns // 1_000_000), info


def memory_files(folder: Path) -> dict[str, os.stat_result]:
    """The memory files of a folder with their lstat: every *.md at its top level but MEMORY.md
    (team/ and other subfolders are the CLI's own business). {} when the folder does not exist."""
    out: dict[str, os.stat_result] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    for entry in entries:
        if entry.name.endswith(".md") and entry.name != INDEX and not entry.name.startswith("."):
            with contextlib.suppress(OSError):
                out[entry.name] = entry.stat(follow_symlinks=True) if entry.is_symlink() else entry.stat()
    return out


# -- sync -------------------------------------------------------------------------------------------
def _stamp(info: os.stat_result) -> list[int]:
    return [info.st_mtime_ns, info.st_size]


def pending(memory: Cairn, native: NativeMemory) -> dict[str, list[str]]:
    """What a sync would do, from the files' stat alone (no file is read): {"new", "changed",
    "deleted"} file names. The fast path of every session start."""
    state = memory.source_state(SOURCE)
    files = state.get("files", {}) if state.get("folder") == str(native.folder) else {}
    found = memory_files(native.folder)
    out: dict[str, list[str]] = {"new": [], "changed": [], "deleted": []}
    for name, info in found.items():
        entry = files.get(name)
        if entry is None:
            out["new"].append(name)
        elif entry.get("stamp") != _stamp(info):
            out["changed"].append(name)
    out["deleted"] = [name for name in files if name not in found]
    return out


@contextlib.contextmanager
def sync_lock(memory: Cairn, *, wait: bool) -> Iterator[bool]:
    """One sync of a store at a time (an flock on a file per store). Yields whether it was taken:
    without `wait`, False at once when another sync holds it."""
    try:
        import fcntl
    except ImportError:
        yield True
        return
    folder = private_dir(data_root() / "claude-memory-locks")
    key = hashlib.sha256(str(memory.choice.path).encode()).hexdigest()[:32]
    with open(folder / f"{key}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sync(memory: Cairn, native: NativeMemory) -> dict[str, Any]:
    """Import what changed in the auto-memory folder since the last sync into `memory`'s store.

    A new file becomes a memory (source claude-memory, tags claude-memory and those an export
    wrote, valid from the file's modification time); an edited file's memory is replaced by its
    new text (the old one stays in its history); a deleted file's memory is retired. Each write
    goes through Cairn.remember, so secrets and <private> spans are scrubbed as for any write. A
    file whose text is already a current memory maps to that memory and never retires it.
    A file that cannot be imported (NativeMemoryError, InvalidMemory) is logged with the reason
    and skipped whole, its earlier memory left as it was; it is read again once it changes.
    Nothing is ever written into the folder. Returns counts: created, superseded, retired,
    unchanged, duplicates, failed ({file: reason}: refused now, or earlier and unchanged since)."""
    state = memory.source_state(SOURCE)
    files: dict[str, dict[str, Any]] = state.get("files", {}) if state.get("folder") == str(native.folder) else {}
    found = memory_files(native.folder)
    done: dict[str, Any] = {"folder": str(native.folder), "created": 0, "superseded": 0, "retired": 0,
                            "unchanged": 0, "duplicates": 0, "failed": {}}
    for name in sorted(found):
        entry = files.get(name)
        if entry is not None and entry.get("stamp") == _stamp(found[name]):
            if entry.get("error"):  # refused before and not changed since: the same reason holds
                done["failed"][name] = entry["error"]
            else:
                done["unchanged"] += 1
            continue
        try:
            parsed, info = read_file(native.folder, name)
            digest = hashlib.sha256(parsed.text.encode()).hexdigest()
            if entry is not None and entry.get("sha256") == digest and entry.get("id"):
                files[name] = {**entry, "stamp": _stamp(info), "mtime_ms": parsed.mtime_ms}
                done["unchanged"] += 1
                continue
            files[name] = _write(memory, parsed, entry, done) | {"stamp": _stamp(info), "sha256": digest}
        except (NativeMemoryError, InvalidMemory) as exc:
            reason = str(exc)
            log.warning("claude memory: %s not imported: %s", native.folder / name, reason)
            done["failed"][name] = reason
            kept = {k: v for k, v in (entry or {}).items() if k in ("id", "owned", "mtime_ms", "sha256")}
            files[name] = {**kept, "stamp": _stamp(found[name]), "error": reason}
        # Recorded after each write: a sync cut short resumes where it stopped.
        memory.set_source_state(SOURCE, {"folder": str(native.folder), "files": files, "synced_at": _now()})
    for name in [n for n in files if n not in found]:
        entry = files.pop(name)
        if entry.get("id") and entry.get("owned"):
            with contextlib.suppress(MemoryNotFound, NotCurrent):
                memory.retire(entry["id"])
                done["retired"] += 1
    memory.set_source_state(SOURCE, {"folder": str(native.folder), "files": files, "synced_at": _now()})
    log.info("claude memory: synced %s: %d created, %d superseded, %d retired, %d unchanged, %d failed",
             native.folder, done["created"], done["superseded"], done["retired"], done["unchanged"],
             len(done["failed"]))
    return done


def _now() -> int:
    return int(time.time() * 1000)


def _write(memory: Cairn, parsed: NativeFile, entry: dict[str, Any] | None, done: dict[str, Any]) -> dict[str, Any]:
    """Write one parsed file's memory; returns its ledger entry (id, owned, mtime_ms)."""
    old_id = entry.get("id") if entry else None
    replaces = None
    if old_id and entry and entry.get("owned"):
        with contextlib.suppress(MemoryNotFound):
            if memory.get(old_id).status == "current":
                replaces = old_id
    result = memory.remember(parsed.text, kind=parsed.kind, tags=parsed.tags, importance=parsed.importance,
                             source=SOURCE, valid_from=min(parsed.mtime_ms, _now()), replaces=replaces,
                             detect=False)
    if result.status == "duplicate" and replaces is None:
        done["duplicates"] += 1
        owned = result.memory.source == SOURCE and not _claimed(memory, result.memory.id)
    else:
        done["superseded" if replaces else "created"] += 1
        owned = True
    return {"id": result.memory.id, "owned": owned, "mtime_ms": parsed.mtime_ms}


def _claimed(memory: Cairn, memory_id: str) -> bool:
    files = memory.source_state(SOURCE).get("files", {})
    return any(e.get("id") == memory_id and e.get("owned") for e in files.values())


def start_background_sync(memory_name: str | None, project: Path, env: dict[str, str] | None = None) -> bool:
    """Run `cairn import-claude-memory` for the project in a detached process (the first sync of a
    big folder takes seconds: outside a hook's budget). Returns whether it was started; never raises."""
    import subprocess
    import sys

    engine_dir = str(Path(__file__).resolve().parents[2])  # engine/cairn/adapters/claude_memory.py -> engine
    # The hook's environment over this process's (the warm process serves hooks of other sessions).
    env = {**os.environ, **(env or {}), "PYTHONPATH": engine_dir, "CAIRN_NO_WARM": "1"}
    argv = [sys.executable, "-P", "-m", "cairn", "-v", "import-claude-memory"]
    if memory_name:
        argv += ["--store", memory_name]
    try:
        # Its log (what was imported, each file refused and why) goes to LOG_NAME in the data root.
        with open(private_file(private_dir(data_root() / "logs") / LOG_NAME), "ab") as log_file:
            subprocess.Popen(argv, cwd=str(project), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=log_file, start_new_session=True)
    except OSError as exc:
        log.warning("claude memory: background sync not started: %s", exc)
        return False
    log.info("claude memory: started a background sync of %s", project)
    return True


def sync_at_session_start(memory: Cairn | None, project: Path, env: dict[str, str], *,
                          store_name: str | None = None) -> str:
    """At SessionStart, with config claude_memory.sync on: when the auto-memory folder changed since
    the last sync (`pending`: stat only, no file read), start the sync in a detached process. The
    hook itself never writes to the store. memory: the project's open store, or None when it does not
    exist yet. store_name: passed on to the process when the store was named explicitly. Returns
    what was done ("current", "started", "no folder", "not started"); never raises."""
    try:
        native = native_memory(project, env)
        if memory is None or not memory.exists:
            if not memory_files(native.folder):
                return "no folder"
        elif not any(pending(memory, native).values()):
            return "current"
        return "started" if start_background_sync(store_name, project, env) else "not started"
    except (CairnError, OSError) as exc:
        log.warning("claude memory: sync not checked: %s", exc)
        return "not started"


# -- what Claude Code already loaded ----------------------------------------------------------------
def index_links(folder: Path) -> set[str]:
    """The file names MEMORY.md links to within the part the CLI loads (INDEX_MAX_LINES lines,
    INDEX_MAX_BYTES bytes)."""
    try:
        raw = (folder / INDEX).read_bytes()[:INDEX_MAX_BYTES].decode("utf-8", "replace")
    except OSError:
        return set()
    lines = raw.strip().split("\n")[:INDEX_MAX_LINES]
    return {Path(m).name for line in lines for m in _INDEX_LINK.findall(line)}


def loaded_files(project: Path, native: NativeMemory | None, env: dict[str, str] | None = None) -> list[Path]:
    """The instruction files Claude Code loads into a session of `project` by itself: the managed
    and user CLAUDE.md, CLAUDE.md, .claude/CLAUDE.md and CLAUDE.local.md in the project and each
    folder above it, the rules under ~/.claude/rules and the project's .claude/rules, and the
    auto-memory MEMORY.md (when auto memory is on). Only those that exist."""
    env = dict(os.environ) if env is None else env
    home = _claude_home(env)
    out = [Path("/etc/claude-code/CLAUDE.md"), home / "CLAUDE.md"]
    folder = project.resolve()
    for level in (*reversed(folder.parents), folder):
        out += [level / "CLAUDE.md", level / ".claude" / "CLAUDE.md", level / "CLAUDE.local.md"]
    for rules in (home / "rules", project / ".claude" / "rules"):
        with contextlib.suppress(OSError):
            out += sorted(p for p in rules.rglob("*.md"))
    if native is not None and native.enabled:
        out.append(native.folder / INDEX)
    return [p for p in dict.fromkeys(out) if p.is_file()]


_LIST_MARK = re.compile(r"^\s*(?:[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+|#+\s+|>\s*)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def loaded_texts(paths: list[Path]) -> set[str]:
    """The pieces of text a memory could equal in these files: each paragraph, line and sentence,
    without list, heading and quote marks, with and without a final full stop."""
    pieces: set[str] = set()
    for path in paths:
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        if path.name == INDEX:
            raw = raw[:INDEX_MAX_BYTES]
        text = raw.decode("utf-8", "replace")
        if path.name == INDEX:
            text = "\n".join(text.split("\n")[:INDEX_MAX_LINES])
        with contextlib.suppress(NativeMemoryError):
            text = _frontmatter(text)[1]  # rules files carry `paths:` frontmatter
        paragraphs = re.split(r"\n\s*\n", text)
        for paragraph in paragraphs:
            lines = [_LIST_MARK.sub("", line).strip() for line in paragraph.split("\n")]
            candidates = [" ".join(x for x in lines if x)] + lines
            candidates += [s for line in lines for s in _SENTENCE_END.split(line)]
            for piece in candidates:
                piece = piece.strip()
                if len(piece) >= 3:
                    pieces.add(piece)
                    pieces.add(piece.rstrip(".") if piece.endswith(".") else piece + ".")
    return pieces


def loaded_signature(paths: list[Path]) -> list[list[Any]]:
    """What identifies the loaded files' content cheaply: each path with its size and mtime."""
    out: list[list[Any]] = []
    for path in paths:
        with contextlib.suppress(OSError):
            info = path.stat()
            out.append([str(path), info.st_size, info.st_mtime_ns])
    return out


def already_loaded(memory: Cairn, project: Path, env: dict[str, str] | None = None,
                   cache: dict[str, Any] | None = None) -> set[str]:
    """The ids of current memories a session of `project` already holds through Claude Code itself:
    those whose normalised text is a paragraph, line or sentence of a loaded CLAUDE.md, rules file
    or MEMORY.md (loaded_files), and those imported from an auto-memory file that the loaded part of
    MEMORY.md links to (MEMORY.md holds a one-line hook for each, and the CLI reads the file itself).
    The brief and per-prompt injection leave them out. cache: a dict kept across a session's hooks
    (SessionState.loaded): the text matches are looked up again only when a loaded file changed
    (an index lookup per piece of text: about 10 ms for a 60-line CLAUDE.md). Never raises for a
    file it cannot read."""
    native = native_memory(project, env)
    files = loaded_files(project, native, env)
    signature = loaded_signature(files)
    if cache is not None and cache.get("signature") == signature and isinstance(cache.get("ids"), list):
        ids = set(cache["ids"])
    else:
        ids = {m.id for m in memory.current_by_texts(loaded_texts(files))}
        if cache is not None:
            cache.update(signature=signature, ids=sorted(ids))
    if native.enabled:
        links = index_links(native.folder)
        state = memory.source_state(SOURCE)
        if links and state.get("folder") == str(native.folder):
            ids |= {e["id"] for name, e in state.get("files", {}).items() if name in links and e.get("id")}
    return ids


# -- export -----------------------------------------------------------------------------------------
def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.casefold())
    out = ""
    for word in words:
        if len(out) + len(word) + 1 > 40:
            break
        out = f"{out}-{word}" if out else word
    return out or "memory"


def _first_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "\u2026"


def export(memories: list[Memory], folder: Path, *, live: bool = False) -> dict[str, Any]:
    """Write `memories` into `folder` as native memory files, one per memory, and a MEMORY.md
    index of as many as fit under the CLI's cap (INDEX_MAX_LINES lines, INDEX_MAX_BYTES bytes; the
    most important first, the order given). A file's body is the memory's whole text, its
    description the first line (INDEX_LINE_CHARS at most); metadata.type is the native type of
    its kind (KIND_TYPE) and metadata.cairn_kind/cairn_tags/cairn_importance keep the rest.
    live: `folder` is a folder the CLI uses: an existing MEMORY.md keeps its lines, new ones are
    added under the cap, and existing files are never overwritten. Returns {"files", "indexed",
    "not_indexed", "folder"}."""
    folder.mkdir(parents=True, exist_ok=True)
    index_path = folder / INDEX
    lines = index_path.read_text(encoding="utf-8").rstrip("\n").split("\n") if live and index_path.exists() else []
    lines = [line for line in lines if line.strip()]
    used_bytes = sum(len(line.encode()) + 1 for line in lines)
    written, not_indexed = 0, 0
    taken = {p.name for p in folder.iterdir()} if live else set()
    for m in memories:
        if m.text is None:
            continue
        name = f"{_slug(m.text)}-{m.id[-6:].lower()}.md"
        if name in taken:
            continue
        taken.add(name)
        description = _first_line(m.text, INDEX_LINE_CHARS)
        front = {"name": name.removesuffix(".md"), "description": description,
                 "metadata": {"type": KIND_TYPE.get(m.kind, "project"), "cairn_kind": m.kind,
                              "cairn_tags": [t for t in m.tags if t != TAG], "cairn_importance": m.importance,
                              "cairn_id": m.id}}
        body = yaml.safe_dump(front, allow_unicode=True, sort_keys=False, width=10_000)
        (folder / name).write_text(f"---\n{body}---\n\n{m.text}\n", encoding="utf-8")
        written += 1
        title = _first_line(m.text, 60)
        line = f"- [{title.replace(']', ')')}]({name}) \u2014 {m.kind}"
        line = line if len(line) <= INDEX_LINE_CHARS else f"- [{_first_line(m.text, 40)}]({name}) \u2014 {m.kind}"
        # One line is kept free for the count of what is left out.
        if len(lines) < INDEX_MAX_LINES - 1 and used_bytes + len(line.encode()) + 1 <= INDEX_MAX_BYTES - 200:
            lines.append(line)
            used_bytes += len(line.encode()) + 1
        else:
            not_indexed += 1
    out = list(lines)
    if not_indexed:
        out.append(f"- {not_indexed} more memories are in this folder without a line here "
                   "(MEMORY.md is capped at 200 lines)")
    index_path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return {"folder": str(folder), "files": written, "indexed": written - not_indexed, "not_indexed": not_indexed}


# -- doctor -----------------------------------------------------------------------------------------
def doctor_check(memory: Cairn | None, cwd: Path, config: dict[str, Any] | None, env: dict[str, str] | None = None):
    """`cairn doctor`'s "Claude Code auto memory": on or off for the project and why, its folder,
    and whether Cairn's sync of it is current (a Check; "warn" when files are waiting)."""
    from cairn import Check

    native = native_memory(cwd, env)
    where = f"{native.folder} ({native.setting})"
    if not native.enabled:
        return Check("Claude Code auto memory", "ok", f"off ({native.reason}); folder {where}")
    count = len(memory_files(native.folder))
    head = f"on ({native.reason}); folder {where}, {count} memory files"
    if config is not None and not config.get("claude_memory", {}).get("sync", True):
        return Check("Claude Code auto memory", "ok", f"{head}; Cairn's sync is off (claude_memory.sync)")
    if memory is None or not memory.exists:
        status = "warn" if count else "ok"
        return Check("Claude Code auto memory", status, f"{head}; not synced (no store yet)",
                     "run `cairn import-claude-memory`" if count else None)
    todo = pending(memory, native)
    waiting = sum(len(v) for v in todo.values())
    failed = {n: e["error"] for n, e in memory.source_state(SOURCE).get("files", {}).items() if e.get("error")}
    detail = f"{head}; sync current" if not waiting else (
        f"{head}; sync behind: {len(todo['new'])} new, {len(todo['changed'])} changed, "
        f"{len(todo['deleted'])} deleted")
    if failed:
        detail += "; not importable: " + "; ".join(f"{n}: {r}" for n, r in sorted(failed.items())[:5])
    return Check("Claude Code auto memory", "warn" if waiting or failed else "ok", detail,
                 "run `cairn import-claude-memory` (a session start also runs it)" if waiting else None)
