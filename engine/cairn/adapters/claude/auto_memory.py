"""Claude Code's own auto memory: where it lives, whether it is on, and its file format (read and
written). Importing it is auto_memory_sync.py; what a session already loaded is loaded.py.

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
import json
import os
import re
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from cairn import IMPORTANCE_RANGE, KINDS, CairnError, process_env

from .transcripts import encoded_project

if TYPE_CHECKING:
    from cairn import Memory

SOURCE = "claude-memory"  # the memories' source, and the name of the import's recorded state
INDEX = "MEMORY.md"
# The CLI's MEMORY.md cap (binary: `MW=200,bce=25000`): past these the index is cut when loaded.
INDEX_MAX_LINES = 200
INDEX_MAX_BYTES = 25_000
INDEX_LINE_CHARS = 150  # "each entry should be one line, under ~150 characters" (the CLI's own prompt)
MAX_FILE_BYTES = 64 * 1024  # a larger file is refused whole; the CLI asks for files under 4 KB
# The types (binary: pZo=["user","feedback","project","reference"]) and what the CLI's prompt says
# each holds: user: the user's role, goals, knowledge and how they like to work; feedback: guidance
# on how to approach the work (what to avoid, what to keep doing); project: ongoing work, goals,
# incidents; reference: where information lives outside the repo.
TYPE_KIND = {"user": "preference", "feedback": "convention", "project": "fact", "reference": "fact"}
KIND_TYPE = {"preference": "user", "convention": "feedback", "decision": "project", "fact": "project",
             "task": "project", "insight": "feedback"}
TAG = "claude-memory"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


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


def claude_home(env: dict[str, str]) -> Path:
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
    env = dict(process_env()) if env is None else env
    home = claude_home(env)
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


def frontmatter(raw: str) -> tuple[dict[str, Any], str]:
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
    front, body = frontmatter(raw)
    metadata = front.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
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
    slug = front.get("name")
    if not isinstance(slug, str):
        slug = name.removesuffix(".md")
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


