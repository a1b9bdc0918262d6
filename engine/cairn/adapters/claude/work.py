"""Memory that follows the work: what Claude's tool calls touch, and the memories scoped to it.

PreToolUse (Read, Edit, Write, MultiEdit, NotebookEdit, Grep, Glob, Bash): the files, folders and
commands the call touches are recorded for the session (Cairn.scopes.touch: what later writes learn
their scopes from), and the memories scoped to them that the session's context does not hold yet
are injected as compact lines (context.tool_context). A call to the Agent tool leaves its task for
SubagentStart, which gives the subagent the memories for that task (or, when it cannot tell which
of several waiting tasks is the subagent's, its first tool call does). PostToolUse of Cairn's own
memory_remember / memory_replace associates the memory just written with what the session touched.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import (COMMAND, InvalidMemory, commands_of, normalise_pattern, path_arguments, prefix_of, relative,
                   tool_context)

from .session_state import SessionState

if TYPE_CHECKING:
    from cairn import Cairn, Embedder

log = logging.getLogger(__name__)

PRE_TOOL_USE = "PreToolUse"
POST_TOOL_USE = "PostToolUse"
SUBAGENT_START = "SubagentStart"
FILE_TOOLS = {"Read": "read", "Edit": "edit", "Write": "edit", "MultiEdit": "edit", "NotebookEdit": "edit"}
SEARCH_TOOLS = ("Grep", "Glob")
# Claude Code 2.1 adds a subfolder's CLAUDE.md to the context with a Read there (seen in tests/e2e/test_work.py);
# an Edit follows a Read of the same file.
NESTED_LOADING_TOOLS = ("Read", "Edit", "MultiEdit")
AGENT_TOOLS = ("Agent", "Task")  # the subagent tool (named Task in older Claude Code builds)
WRITE_TOOLS = re.compile(r"^mcp__.*cairn.*__memory_(remember|replace)$")
_WRITTEN_ID = re.compile(r'\\?"id\\?"\s*:\s*\\?"([0-9A-HJKMNP-TV-Z]{26})')
_PATH_WORD = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+|[\w-]+\.[A-Za-z0-9]{1,8})(?![\w/])")
MAX_PENDING_AGENTS = 8  # Agent calls waiting for their SubagentStart, per session
MAX_HELD = 50  # touches a session keeps while its project has no store
SUBAGENT_CHARS = 1500  # what a subagent gets at its start
SUBAGENT_K = 5
PARENT_FILES = 6  # the parent's most recent files offered to a subagent's task
# How long a subagent's first tool call waits for its transcript: well within the 0.5 s a tool hook
# gives the warm process (cairn.adapters.claude.hook_process.TOOL_TIMEOUT_S), and only when its start was ambiguous.
TRANSCRIPT_WAIT_S = 0.15
NESTED = "nested"  # the session state's `loaded` key for the subfolder CLAUDE.md files read into the context


def state_key(payload: dict[str, Any]) -> str:
    """The session state a hook reads and writes: the session's, or inside a subagent (agent_id),
    the subagent's own (its context is not the parent's)."""
    session_id = str(payload.get("session_id") or "")
    agent_id = str(payload.get("agent_id") or "")
    return f"{session_id}-{agent_id}" if session_id and agent_id else session_id


def targets(payload: dict[str, Any], root: Path) -> list[tuple[str, str]]:
    """What a tool call touches, as (target, action): relative file paths, folders ending in "/",
    and "cmd:..." commands; [] for a tool Cairn does not follow or a path outside the project."""
    tool = str(payload.get("tool_name") or "")
    args = _tool_input(payload)
    out: list[tuple[str, str]] = []
    if tool in FILE_TOOLS:
        rel = relative(str(args.get("file_path") or args.get("notebook_path") or ""), root)
        if rel:
            out.append((rel, FILE_TOOLS[tool]))
    elif tool in SEARCH_TOOLS:
        folder = relative(str(args.get("path") or ""), root)
        if folder:
            out.append((folder if not (root / folder).is_dir() else folder.rstrip("/") + "/", "search"))
        for key in ("pattern", "glob") if tool == "Glob" else ("glob",):
            literal = _literal_folder(str(args.get(key) or ""))
            if literal:
                base = f"{folder.rstrip('/')}/" if folder and (root / folder).is_dir() else ""
                out.append((base + literal, "search"))
    elif tool == "Bash":
        command = str(args.get("command") or "")
        out += [(COMMAND + c, "run") for c in commands_of(command)]
        for word in path_arguments(command):
            rel = relative(word, root)
            if rel and (root / rel).exists():
                out.append((rel if not (root / rel).is_dir() else rel.rstrip("/") + "/", "run"))
    return list(dict.fromkeys(out))


def _literal_folder(glob: str) -> str:
    """The literal folders at the start of a glob ("src/payments/**/*.py" -> "src/payments/"): the
    prefix a scope of the same glob is looked up by; "" for one without, or one leaving the project."""
    try:
        return prefix_of(normalise_pattern(glob)) if glob.strip() and not glob.startswith(COMMAND) else ""
    except InvalidMemory:
        return ""


def tool_event(memory: Cairn, payload: dict[str, Any], root: Path, hooks: dict[str, Any],
               state: SessionState, *, embedder: Embedder | None = None) -> str | None:
    """PreToolUse / PostToolUse: record what the call touches, and the context to inject for it
    (None: nothing). The session's state gains what was injected."""
    event = str(payload.get("hook_event_name") or PRE_TOOL_USE)
    tool = str(payload.get("tool_name") or "")
    session_id = str(payload.get("session_id") or "")
    if state.held and session_id:  # touched before the project had a store
        memory.scopes.touch(session_id, [(t, a) for t, a in state.held])
        state.held = []
        state.save()
    if event == POST_TOOL_USE:
        if WRITE_TOOLS.match(tool):
            _learn_written(memory, payload, session_id)
        return None
    task_text = _late_task_context(memory, payload, root, hooks, state) if state.awaiting_task else None
    if tool in AGENT_TOOLS:
        _remember_agent_task(state, payload)
        return task_text
    touched = targets(payload, root)
    if not touched:
        return task_text
    if session_id:
        memory.scopes.touch(session_id, touched)
    budget = min(hooks["tool_chars"], hooks["tool_session_chars"] - state.tool_chars)
    if budget <= 0:
        return task_text
    if tool in NESTED_LOADING_TOOLS:
        loaded = _nested_loaded(memory, root, [t for t, _ in touched], state.loaded.setdefault(NESTED, {}))
        if loaded is not None:  # a CLAUDE.md not read before in this context, or changed since
            state.injected += sorted(loaded - set(state.injected))  # in context now, by Claude Code
            state.save()
    text = tool_context(memory, [t for t, _ in touched], exclude=frozenset(state.injected), k=hooks["tool_k"],
                        budget=budget)
    if text:
        state.record_injection(text)
        state.tool_chars += len(text)
        state.save()
    return "\n".join(filter(None, (task_text, text))) or None


def _nested_loaded(memory: Cairn, root: Path, paths: list[str], seen: dict[str, Any]) -> set[str] | None:
    """The memories Claude Code itself puts in the context with a Read of `paths`: those whose text is
    in a CLAUDE.md of a folder between the project root and the file (it loads a subfolder's CLAUDE.md
    beside the first Read there; the root's came at the start: claude_loaded.already_loaded). seen:
    {file: [size, mtime]} of the CLAUDE.md files already read into this context (the session state's,
    reset with the context), updated here; None when every one of them was read before as it is now,
    so a tool call in a folder already read costs a stat per folder, not a parse and a lookup (a
    memory written from such a file later in the same context is then not recognised as loaded)."""
    from .loaded import loaded_signature, loaded_texts

    files = []
    for rel in paths:
        parts = rel.rstrip("/").split("/")[:-1]
        files += [root.joinpath(*parts[:i], "CLAUDE.md") for i in range(1, len(parts) + 1)]
    fresh = [Path(path) for path, *stamp in loaded_signature(list(dict.fromkeys(files))) if seen.get(path) != stamp]
    if not fresh:
        return None
    seen.update({path: stamp for path, *stamp in loaded_signature(fresh)})
    return {m.id for m in memory.current_by_texts(loaded_texts(fresh))}


def hold_touches(payload: dict[str, Any], root: Path, state: SessionState) -> None:
    """PreToolUse in a project without a store yet: keep what the call touched in the session's
    state (the most recent MAX_HELD), recorded in the store by the first tool event once it exists,
    so the session's first memory still learns the files it was written about."""
    if str(payload.get("tool_name") or "") in AGENT_TOOLS or not payload.get("session_id"):
        return
    touched = [[t, a] for t, a in targets(payload, root)]
    if touched:
        state.held = [*state.held, *touched][-MAX_HELD:]
        state.save()


def _learn_written(memory: Cairn, payload: dict[str, Any], session_id: str) -> None:
    """The memory Cairn's MCP server just wrote (its id, the first in the tool's response) learns
    the scopes of what this session touched."""
    response = payload.get("tool_response")
    found = _WRITTEN_ID.search(response if isinstance(response, str) else _json(response))
    if found and session_id:
        memory.scopes.learn([found.group(1)], session_id)


def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _tool_input(payload: dict[str, Any]) -> dict[str, Any]:
    """The call's tool_input, {} when it is missing or not an object."""
    args = payload.get("tool_input")
    return args if isinstance(args, dict) else {}


def _remember_agent_task(state: SessionState, payload: dict[str, Any]) -> None:
    args = _tool_input(payload)
    task = {"type": str(args.get("subagent_type") or "general-purpose"),
            "text": " ".join(str(args.get(k) or "") for k in ("description", "prompt")).strip()[:4000],
            "prompt": str(args.get("prompt") or "").strip()[:4000]}
    if task["text"]:
        state.agents = [*state.agents, task][-MAX_PENDING_AGENTS:]
        state.save()


def subagent_start(memory: Cairn, payload: dict[str, Any], root: Path, hooks: dict[str, Any],
                   parent: SessionState, *, embedder: Embedder | None = None) -> str | None:
    """SubagentStart: the memories for the subagent's task (the prompt its Agent call gave, matched
    by agent type): the memories scoped to the files the prompt names, those the per-prompt gate
    passes for the prompt, and those scoped to the parent's recent files that the prompt is about
    too (context.subagent_context). Never the whole index. The subagent's own state starts with them.
    When several tasks of its type wait (Agent calls made together), None: the subagent's first
    tool call gets them instead (_late_task_context)."""
    agent_type = str(payload.get("agent_type") or "")
    same = [t for t in parent.agents if t.get("type") == agent_type]
    if len(same) > 1:
        # Agent calls of one type made together (Claude's usual fan-out) start together, in no set
        # order, and SubagentStart names neither the call nor the prompt: guessing gives a subagent
        # another's memories. Its first tool call finds its prompt in its transcript (_late_task_context).
        child = SessionState(state_key(payload), memory.env)
        child.awaiting_task = True
        child.save()
        return None
    task = same[0] if same else (parent.agents[0] if parent.agents else None)
    if task is None:
        return None
    parent.agents = [t for t in parent.agents if t is not task]
    parent.save()
    text = _task_context(memory, payload, root, hooks, str(task["text"]), embedder=embedder)
    if text:
        child = SessionState(state_key(payload), memory.env)
        child.record_injection(text)
        child.save()
    return text


def _late_task_context(memory: Cairn, payload: dict[str, Any], root: Path, hooks: dict[str, Any],
                       state: SessionState) -> str | None:
    """At the first tool call of a subagent whose start could not tell its task: the task whose prompt
    opens the subagent's transcript (<session transcript without .jsonl>/subagents/agent-<id>.jsonl,
    as Claude Code 2.1 writes it), taken from the parent's pending tasks, and its memories."""
    prompt = _subagent_prompt(payload)
    if not prompt:  # Claude Code has not written the transcript yet: the next tool call looks again
        return None
    state.awaiting_task = False
    state.save()
    parent = SessionState(str(payload.get("session_id") or ""), memory.env)
    task = next((t for t in parent.agents if prompt and t.get("prompt") == prompt[:4000]), None)
    if task is None:
        return None
    parent.agents = [t for t in parent.agents if t is not task]
    parent.save()
    text = _task_context(memory, payload, root, hooks, str(task["text"]))
    if text:
        state.record_injection(text)
        state.save()
    return text


def _subagent_prompt(payload: dict[str, Any], *, wait_s: float = TRANSCRIPT_WAIT_S) -> str:
    """The first user message of the subagent's own transcript, or "" when it cannot be read within
    `wait_s` seconds (Claude Code writes it a moment after the subagent starts: in 2 e2e runs of 9 one
    subagent made its first tool call before)."""
    import json
    import time

    transcript, agent_id = str(payload.get("transcript_path") or ""), str(payload.get("agent_id") or "")
    if not transcript.endswith(".jsonl") or not agent_id or "/" in agent_id or "\\" in agent_id:
        return ""
    path = Path(transcript[:-len(".jsonl")]) / "subagents" / f"agent-{agent_id}.jsonl"
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open(path, encoding="utf-8") as lines:
                for line in lines:
                    entry = json.loads(line)
                    message = entry.get("message") if isinstance(entry, dict) else None
                    if isinstance(message, dict) and message.get("role") == "user":
                        content = message.get("content")
                        if isinstance(content, list):
                            content = " ".join(str(b.get("text") or "") for b in content if isinstance(b, dict))
                        return str(content or "").strip()
        except (OSError, ValueError):  # not there yet, or its first line half written
            pass
        if time.monotonic() >= deadline:
            return ""
        time.sleep(0.01)


def _task_context(memory: Cairn, payload: dict[str, Any], root: Path, hooks: dict[str, Any], prompt: str, *,
                  embedder: Embedder | None = None) -> str | None:
    from cairn import subagent_context

    named = [rel for word in _PATH_WORD.findall(prompt) if (rel := relative(word, root)) and (root / rel).exists()]
    session_id = str(payload.get("session_id") or "")
    recent = [t.path for t in memory.scopes.touched(session_id) if not t.path.startswith(COMMAND)][:PARENT_FILES] \
        if session_id else []
    vector = None
    if embedder is not None:
        vectors = memory.embed([prompt[:2000]], query=True)
        vector = None if vectors is None else vectors[0]
    return subagent_context(memory, prompt, named=named, recent=recent, query_vector=vector,
                            k=hooks.get("subagent_k", SUBAGENT_K), budget=hooks.get("subagent_chars", SUBAGENT_CHARS))


def project_root(resolved_root: Path | None, payload: dict[str, Any], env: dict[str, str]) -> Path:
    """The folder tool paths are taken relative to: the store's project root (the git toplevel),
    else the session's project folder."""
    return Path(resolved_root or env.get("CLAUDE_PROJECT_DIR") or payload.get("cwd") or os.getcwd())


FOCUS_FILES = 30  # changed files (git) or the resumed session's files that point the brief
BRANCH_HITS = 10  # memories the branch name's words find
BRANCH_WEIGHT = 0.5  # how strongly (0..1) a branch-name match points the brief; a file match gives its score
RECENT_FILES = 16  # files the project's latest other sessions touched that point the brief
RECENT_WEIGHT = 0.8  # how strongly (0..1) recent work points the brief, times the file's match score;
# below a changed file's 1 (uncommitted work says more). Both chosen on the dev work set with 200
# other projects' memories (bench/work_eval.py --distractors 200; docs/benchmarks.md)
IDLE_BRANCHES = frozenset({"main", "master", "trunk", "develop", "dev", "HEAD"})


def session_focus(memory: Cairn, root: Path, session_id: str, source: str) -> dict[str, float]:
    """What a session is likely about, known at its start: {memory id: 0..1} for the memories scoped
    to the files changed or staged in the work tree (git), on resume to the files this session
    touched, to the RECENT_FILES files the project's latest other sessions touched (times
    RECENT_WEIGHT), and those the branch name's words find (keyword recall). Empty when there is
    nothing to go by (a clean tree on main, no git, no earlier session). Never raises: git gets one
    second."""
    files: list[str] = []
    if source == "resume" and session_id:
        files += [t.path for t in memory.scopes.touched(session_id) if not t.path.startswith(COMMAND)]
    # One git call: the branch (porcelain v2's "# branch.head") and the changed and staged files.
    status = _git(root, "status", "--porcelain=v2", "--branch", "--untracked-files=no") or ""
    branch = ""
    for line in status.splitlines():
        if line.startswith("# branch.head "):
            branch = line.split(" ", 2)[2].strip()
        elif line[:2] in ("1 ", "2 ", "u "):
            path = line.split(" ", 8 if line[0] == "1" else 9 if line[0] == "2" else 10)[-1]
            files.append(path.split("\t")[0].strip().strip('"'))
    focus: dict[str, float] = {}

    def point(memory_id: str, weight: float) -> None:
        focus[memory_id] = max(focus.get(memory_id, 0.0), weight)

    def point_files(paths: list[str], weight: float) -> None:
        for m, match in memory.scopes.matching(paths, limit=200) if paths else []:
            point(m.id, weight * min(1.0, match.score))

    point_files(list(dict.fromkeys(files))[:FOCUS_FILES], 1.0)
    # The work of the project's latest sessions: what was worked on last is likely worked on next,
    # and a brief that cannot list the whole store lists those areas' memories first.
    recent = memory.scopes.recent(RECENT_FILES * 2, exclude_session=session_id)
    point_files(list(dict.fromkeys(t.path for t in recent if not t.path.startswith(COMMAND)
                                   and not t.path.endswith("/")))[:RECENT_FILES], RECENT_WEIGHT)
    if branch and branch not in IDLE_BRANCHES and branch != "(detached)":
        words = " ".join(w for w in re.split(r"[^A-Za-z0-9]+", branch.split("/", 1)[-1]) if len(w) > 2
                         and not w.isdigit())
        if words:
            for hit in memory.recall(words, k=BRANCH_HITS, use_vectors=False, scope="project"):
                point(hit.memory.id, BRANCH_WEIGHT)
    return focus


def _git(root: Path, *args: str) -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=1.0)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None
