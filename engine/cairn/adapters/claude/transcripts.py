"""Claude Code's transcripts (JSON Lines under <Claude Code's folder>/projects/<encoded project>/):
where they are, which memories a session wrote through Cairn's MCP tools, and importing them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import process_env, resolve

if TYPE_CHECKING:
    from cairn import Cairn


def claude_dir(env: dict[str, str] | None = None) -> Path:
    """Claude Code's user folder: $CLAUDE_CONFIG_DIR, else ~/.claude."""
    base = (process_env() if env is None else env).get("CLAUDE_CONFIG_DIR")
    return Path(base) if base else Path.home() / ".claude"


def claude_projects_root(root: str | Path | None = None, env: dict[str, str] | None = None) -> Path:
    """Where Claude Code keeps transcripts: `root`, else $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects."""
    return Path(root) if root is not None else claude_dir(env) / "projects"


def encoded_project(path: Path) -> str:
    """Claude Code's folder name for a project: its absolute path, every character but a letter or digit as '-'."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in str(path))


def _recorded_cwd(folder: Path) -> str | None:
    """The working directory the first transcript in `folder` records (its lines carry `cwd`)."""
    for path in sorted(folder.glob("*.jsonl")):
        try:
            with open(path, "rb") as handle:
                for raw in handle:
                    try:
                        cwd = json.loads(raw).get("cwd")
                    except (ValueError, AttributeError):
                        continue
                    if isinstance(cwd, str) and cwd:
                        return cwd
        except OSError:
            continue
    return None


def import_claude_transcripts(memory: Cairn, *, root: str | Path | None = None, all_projects: bool = False,
                              progress: Callable | None = None) -> dict[str, Any]:
    """`cairn import-sessions`: this project's Claude Code transcripts into `memory` (its store), or
    with all_projects every project folder's into the store of the project its transcripts record
    (a folder whose project no longer exists is counted under skipped["project folder gone"]).
    Returns Cairn.sessions.import_folder' totals summed, with "projects"."""
    from collections import Counter

    from cairn import Cairn as Engine

    base = claude_projects_root(root)
    totals: dict[str, Any] = {"projects": 0, "files": 0, "turns_added": 0, "skipped": Counter(),
                              "redactions": Counter(), "private_spans": 0}

    def add(done: dict[str, Any]) -> None:
        totals["projects"] += 1
        for key in ("files", "turns_added", "private_spans"):
            totals[key] += done[key]
        totals["skipped"].update(done["skipped"])
        totals["redactions"].update(done["redactions"])

    kwargs = {"progress": progress} if progress is not None else {}
    if not all_projects:
        project = memory.choice.project_root or Path.cwd()
        folder = base / encoded_project(Path(project).resolve())
        if folder.is_dir():
            add(memory.sessions.import_folder(folder, **kwargs))
    else:
        for folder in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
            cwd = _recorded_cwd(folder)
            if cwd is None or not Path(cwd).is_dir():
                totals["skipped"]["project folder gone"] += 1
                continue
            resolved = resolve(None, cwd=Path(cwd), env=memory.env)  # the data root `memory` was opened in
            if str(resolved.choice.path) == memory.status().path:
                add(memory.sessions.import_folder(folder, **kwargs))
                continue
            with Engine.open(resolved=resolved, embedder=memory.embedder) as other:
                add(other.sessions.import_folder(folder, **kwargs))
    totals.update(skipped=dict(totals["skipped"]), redactions=dict(totals["redactions"]))
    return totals


# Cairn's MCP tools that write a memory, as Claude Code names them ("mcp__<server>__<tool>"; the
# plugin's server is "plugin_cairn_cairn", one added by hand usually "cairn").
WRITE_TOOLS = ("memory_remember", "memory_replace")


def _writes_tool(name: object) -> bool:
    parts = name.split("__") if isinstance(name, str) else []
    return len(parts) == 3 and parts[0] == "mcp" and "cairn" in parts[1] and parts[2] in WRITE_TOOLS


def _tool_json(content: object) -> dict[str, Any]:
    """A tool result's JSON object (its text, or its text parts joined; the SDK may wrap it as
    {"result": "<json>"}), or {} when it is not one."""
    text = content if isinstance(content, str) else "".join(
        b.get("text", "") for b in content if isinstance(b, dict)) if isinstance(content, list) else ""
    try:
        data = json.loads(text)
        if isinstance(data, dict) and set(data) == {"result"} and isinstance(data["result"], str):
            data = json.loads(data["result"])
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def session_writes(path: str | Path) -> list[str]:
    """The ids of the memories a Claude Code session created through Cairn's MCP tools
    (memory_remember, memory_replace answered "created"), read from its transcript (JSON Lines:
    an assistant line's tool_use block, a user line's tool_result block with its tool_use_id), in
    order. Lines that are not such JSON are skipped. Raises OSError when the file cannot be read."""
    calls: set[str] = set()
    out: list[str] = []
    with open(path, "rb") as handle:
        for raw in handle:
            if b'"tool_' not in raw:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            message = line.get("message") if isinstance(line, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and _writes_tool(block.get("name")):
                    calls.add(str(block.get("id")))
                elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) in calls:
                    data = _tool_json(block.get("content"))
                    if data.get("status") == "created" and isinstance(data.get("id"), str):
                        out.append(data["id"])
    return list(dict.fromkeys(out))

