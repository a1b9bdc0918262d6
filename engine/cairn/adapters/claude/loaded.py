"""What Claude Code loads into a session by itself (CLAUDE.md files, rules, its MEMORY.md), and so
which Cairn memories the hooks need not inject again."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import process_env

from .auto_memory import (
    INDEX, INDEX_MAX_BYTES, INDEX_MAX_LINES, SOURCE, NativeMemory, NativeMemoryError, claude_home, frontmatter,
    native_memory,
)

if TYPE_CHECKING:
    from cairn import Cairn

_INDEX_LINK = re.compile(r"\]\(([^)\s]+\.md)\)")


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
    env = dict(process_env()) if env is None else env
    home = claude_home(env)
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
            text = frontmatter(text)[1]  # rules files carry `paths:` frontmatter
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
                   cache: dict[str, Any] | None = None, native: NativeMemory | None = None) -> set[str]:
    """The ids of current memories a session of `project` already holds through Claude Code itself:
    those whose normalised text is a paragraph, line or sentence of a loaded CLAUDE.md, rules file
    or MEMORY.md (loaded_files), and those imported from an auto-memory file that the loaded part of
    MEMORY.md links to (MEMORY.md holds a one-line hook for each, and the CLI reads the file itself).
    The brief and per-prompt injection leave them out. cache: a dict kept across a session's hooks
    (SessionState.loaded): the text matches are looked up again only when a loaded file changed
    (an index lookup per piece of text: about 10 ms for a 60-line CLAUDE.md). Never raises for a
    file it cannot read. native: native_memory(project, env), when the caller has it already."""
    native = native_memory(project, env) if native is None else native
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
