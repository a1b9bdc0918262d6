"""Import of existing guidance: a CLAUDE.md, AGENTS.md or .cursorrules file split deterministically
(markdown-it-py's CommonMark parse: headings, list items, paragraphs) into `add` proposals of the
review queue. Nothing is stored before the user approves each one (`cairn review`,
/cairn:review-memory). /cairn:import-guidance is the other way in: Claude reads the files and
proposes atomic memories with memory_review (action propose).

The split, for the same file, is always the same:
- each list item's own text (not its sub-items) is one item; an item that only introduces its
  sub-items ("Testing:") becomes their context instead;
- a paragraph outside a list is one item, or one per line when every line reads as a rule of its
  own (a .cursorrules file of plain lines);
- headings are not items: the path of headings above an item ("Conventions > Testing") is its
  context (a list item with sub-items also names them: "Pin every dependency > Except in CI");
  code blocks, tables and HTML are left out (they are not statements), and counted (`left_out`).
The kind comes from the wording (KIND_RULES, first match), else from the heading, else "convention".

A whole tree (`import_tree`: `cairn import-guidance` with a folder, or none for the project) reads
every guidance file Claude Code, Codex, Cursor, Copilot, Windsurf and Cline load, and each statement
keeps the scope its file gives it (the `paths` of the memory it would create; `guide`):
- CLAUDE.md / AGENTS.md / GEMINI.md at the root, and .cursorrules / .windsurfrules / .clinerules
  files and .github/copilot-instructions.md: the whole project (no scope); the same files in a
  folder D (`D/CLAUDE.md`, `D/.claude/CLAUDE.md`): ["D/**"]. CLAUDE.local.md is private: read only
  when named.
- `.cursor/rules/**/*.mdc`: front matter `globs` (a comma-separated string or a list); `alwaysApply:
  true` wins and means no scope; a rule with neither ("agent requested") has no scope and keeps a
  short `description` as an applies-when phrase.
- `.claude/rules/**/*.md` and `.clinerules/**/*.md`: front matter `paths`.
- `.github/instructions/**/*.instructions.md`: `applyTo`, comma-separated ("**" means everywhere).
- `.windsurf/rules/**/*.md`: `globs` when `trigger: glob`; a `model_decision` rule keeps its
  description as for Cursor.
Globs of Cursor, Windsurf and Copilot without a "/" match the name in any folder ("*.tsx" ->
"**/*.tsx"), as their editors match them; rules under a nested folder's `.cursor/rules` (or
`.claude/rules`, ...) are confined to that folder. A file's folder is found from `git ls-files`
(tracked and untracked files, ignored ones left out) inside a git repository, else by walking the
folder; vendored and build folders (SKIP_DIRS) are never read. The same statement in several files
is proposed once, with the union of their scopes (none when any of them has none).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, InvalidMemory
from ..models import MAX_APPLIES_CHARS, MAX_APPLIES_WHEN, MAX_TEXT_BYTES


MAX_FILE_BYTES = 1024 * 1024
# (pattern over the item's text, or its heading path, lower-cased; kind), first match wins.
KIND_RULES = (
    (re.compile(r"\b(we decided|decided to|decision|we chose|we use .* because|instead of)\b"), "decision"),
    (re.compile(r"\b(i prefer|i like|i want|i'd rather|my preference|preferences?)\b"), "preference"),
    (re.compile(r"\b(always|never|must|should|do not|don't|avoid|prefer|use|run|keep|make sure|ensure)\b"),
     "convention"),
    (re.compile(r"\b(is|are|lives|runs on|located|stored)\b"), "fact"),
)
_RULE_LINE = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?\S.{8,}$")
_SENTENCE_START = re.compile(r"^(?:[-*+]\s+|\d+[.)]\s+)?[A-Z0-9\"'(\[]")
# A CLAUDE.md line that only imports another file ("@AGENTS.md", "@docs/style.md"): not a statement.
_IMPORT_ONLY = re.compile(r"^@[\w./~-]+$")
CONTEXT_LABEL_CHARS = 80  # a parent list item named in its sub-items' context, at most


def _short(text: str) -> str:
    return text if len(text) <= CONTEXT_LABEL_CHARS else text[:CONTEXT_LABEL_CHARS - 1].rstrip() + "…"


def left_out(markdown: str) -> dict[str, int]:
    """What the split leaves out of a guidance file, by kind: {"code blocks", "tables", "html"}
    (counts; kinds with none are absent), so an import can say so."""
    from markdown_it import MarkdownIt

    counts: dict[str, int] = {}
    for tok in MarkdownIt("commonmark").enable("table").parse(markdown):
        kind = {"fence": "code blocks", "code_block": "code blocks", "table_open": "tables",
                "html_block": "html"}.get(tok.type)
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


@dataclass(frozen=True)
class Item:
    """One statement found in a guidance file: its text, its kind and the headings above it."""

    text: str
    kind: str
    context: str | None
    line: int  # 1-based line of the file where it starts


def _kind(text: str, context: str | None) -> str:
    lowered = text.lower()
    for pattern, kind in KIND_RULES:
        if pattern.search(lowered):
            return kind
    heading = (context or "").lower()
    for word, kind in (("decision", "decision"), ("preference", "preference"), ("fact", "fact")):
        if word in heading:
            return kind
    return "convention"


def _clean(text: str) -> str:
    return " ".join(text.split()).strip()


def split(markdown: str) -> list[Item]:
    """The items of a guidance file, in file order (see the module docstring for the rules)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    headings: list[tuple[int, str]] = []   # (level, text) of the headings above
    labels: list[str | None] = []          # per open list item: its text when it only introduces sub-items
    items: list[Item] = []
    in_item: list[bool] = []               # per open list item: whether its own paragraph was taken
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "heading_open":
            level = int(tok.tag[1:])
            text = _clean(tokens[i + 1].content)
            headings = [(lv, t) for lv, t in headings if lv < level] + [(level, text)]
            i += 3
            continue
        if tok.type == "list_item_open":
            in_item.append(False)
            labels.append(None)
        elif tok.type == "list_item_close":
            in_item.pop()
            labels.pop()
        elif tok.type == "paragraph_open":
            inline = tokens[i + 1]
            line = (tok.map[0] + 1) if tok.map else 0
            context_parts = [t for _, t in headings] + [lb for lb in labels[:-1] if lb]
            if in_item and not in_item[-1]:
                in_item[-1] = True
                text = _clean(inline.content)
                nested = i + 3 < len(tokens) and tokens[i + 3].type in ("bullet_list_open", "ordered_list_open")
                if nested:  # the sub-items are read under it: "Testing" or "Pin every dependency"
                    labels[-1] = _short(text.rstrip(":").strip())
                if text and not (nested and text.endswith(":")):  # "Testing:" only introduces them
                    items.append(Item(text, "", " > ".join(context_parts) or None, line))
            elif not in_item:
                lines = [_clean(x) for x in inline.content.splitlines() if x.strip()]
                # One rule per line only when each line reads as one and each starts as a sentence
                # does: a paragraph wrapped mid-sentence ("... log them with" / "`logger.exception`
                # and re-raise.") stays one item.
                own = (len(lines) > 1 and all(_RULE_LINE.match(x) for x in lines)
                       and all(_SENTENCE_START.match(x) for x in lines[1:]))
                pieces = lines if own else [_clean(inline.content)]
                for offset, piece in enumerate(pieces):
                    piece = re.sub(r"^(?:[-*+]\s+|\d+[.)]\s+)", "", piece)
                    if piece:
                        items.append(Item(piece, "", " > ".join(context_parts) or None, line + offset))
            i += 3
            continue
        i += 1
    return [Item(it.text, _kind(it.text, it.context), it.context, it.line) for it in items
            if not _IMPORT_ONLY.match(it.text)]




# -- one file ------------------------------------------------------------------------------------
def read_text(path: Path) -> str:
    """A guidance file's text. Raises InvalidInput (missing, unreadable, not UTF-8, over
    MAX_FILE_BYTES)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InvalidInput(f"{path} is {len(raw)} bytes; guidance files over {MAX_FILE_BYTES} bytes are not imported")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


_FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)^---[ \t]*\r?(?:\n|\Z)", re.S | re.M)
_FRONT_LINE = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")


def front_matter(text: str) -> tuple[dict[str, Any], str, int]:
    """(fields, body, lines) of a file that opens with a `---` front matter block: its fields, the
    text after it and how many lines the block took (to number the body's lines as the file's).
    ({}, text, 0) without one, and when the block holds no fields (a file that opens with a
    horizontal rule keeps its text). Parsed with PyYAML; Cursor's front matter is often not YAML
    (`globs: *.ts, *.tsx`: `*` starts a YAML alias), so a block YAML refuses is read as `key: value`
    lines instead."""
    match = _FRONT.match(text)
    if match is None:
        return {}, text, 0
    import yaml

    block = match.group(1)
    fields: dict[str, Any] = {}
    try:
        loaded = yaml.safe_load(block)
    except yaml.YAMLError:
        loaded = None
        for line in block.splitlines():
            kv = _FRONT_LINE.match(line)
            if kv:
                fields[kv.group(1)] = kv.group(2).strip("'\"") if kv.group(2) else None
    if isinstance(loaded, dict):
        fields = {str(k): v for k, v in loaded.items()}
    if not fields and block.strip():
        return {}, text, 0
    return fields, text[match.end():], match.group(0).count("\n")


def split_patterns(value: Any) -> list[str]:
    """The globs of a front matter value: a list of strings, or one comma-separated string (commas
    inside braces, "src/**/*.{ts,tsx}", do not separate). Quotes and blanks are dropped."""
    raw: list[str] = []
    if isinstance(value, str):
        depth, start = 0, 0
        for i, ch in enumerate(value):
            depth += (ch == "{") - (ch == "}")
            if ch == "," and depth <= 0:
                raw.append(value[start:i])
                start = i + 1
        raw.append(value[start:])
    elif isinstance(value, (list, tuple)):
        for v in value:
            raw += split_patterns(v) if isinstance(v, str) else []
    return [p.strip().strip("'\"").strip() for p in raw if p.strip().strip("'\"").strip()]


# -- which files, and the scope each gives ---------------------------------------------------------
SKIP_DIRS = frozenset({
    # Brief for issue 30: vendored and build output never carries this project's guidance.
    ".git", "node_modules", ".venv", "venv", "dist", "build", "target", "vendor",
    # and their usual companions: other VCS, caches, virtualenv tools, bower.
    ".hg", ".svn", "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    "site-packages", "bower_components",
})
FOLDER_FILES = ("CLAUDE.md", "AGENTS.md", "GEMINI.md")  # a folder's guidance: scoped to the folder
PLAIN_RULE_FILES = (".cursorrules", ".windsurfrules", ".clinerules")  # legacy one-file rules
PRIVATE_FILES = ("CLAUDE.local.md",)  # personal, usually gitignored: read only when named
# (folder names of a rules directory, file suffix, the front matter field of its globs, format)
RULE_DIRS = (
    ((".cursor", "rules"), ".mdc", "globs", "cursor rule"),
    ((".claude", "rules"), ".md", "paths", "claude rule"),
    ((".github", "instructions"), ".instructions.md", "applyTo", "copilot instructions"),
    ((".windsurf", "rules"), ".md", "globs", "windsurf rule"),
    ((".clinerules",), ".md", "paths", "cline rule"),
)
# Formats whose globs without a "/" match the name in any folder (their editors match that way;
# Claude Code's `paths` are rooted: "*.md" is the project root's).
BASENAME_GLOBS = frozenset({"cursor rule", "windsurf rule", "copilot instructions"})
MAX_WALK_ENTRIES = 200_000  # directory entries a walk outside git reads at most (a home folder)
MAX_GUIDES = 2_000          # guidance files one import reads at most


@dataclass(frozen=True)
class Guide:
    """One guidance file and what its statements inherit: `rel` its path relative to the root
    ("/"-separated), `format` ("CLAUDE.md", "cursor rule", ...), `paths` the scope of its statements
    (normalised globs; () = the whole project), `applies_when` phrases from its description,
    `notes` what reading the scope changed (a glob dropped, globs widened)."""

    rel: str
    format: str
    paths: tuple[str, ...] = ()
    applies_when: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    body_offset: int = 0  # lines of front matter before the body
    body: str = field(default="", repr=False)


def format_of(rel: str) -> str | None:
    """The format of a file by its path relative to the root ("src/CLAUDE.md" -> "CLAUDE.md",
    ".cursor/rules/ts.mdc" -> "cursor rule"), "private" for CLAUDE.local.md, or None when it is
    not a guidance file."""
    parts = rel.split("/")
    name = parts[-1]
    if name in FOLDER_FILES or name in PLAIN_RULE_FILES:
        return name
    if name in PRIVATE_FILES:
        return "private"
    if name == "copilot-instructions.md" and parts[-2:-1] == [".github"]:
        return "copilot instructions"
    for marker, suffix, _, fmt in RULE_DIRS:
        at = _marker_at(parts[:-1], marker)
        # .clinerules/workflows/ holds Cline's workflows, run by hand: not rules.
        if name.endswith(suffix) and at is not None and parts[at + len(marker):at + len(marker) + 1] != ["workflows"]:
            return fmt
    return None


def _marker_at(folders: list[str], marker: tuple[str, ...]) -> int | None:
    """Where a rules folder (".cursor/rules") starts in a file's folders, the first one, or None."""
    for i in range(len(folders) - len(marker) + 1):
        if tuple(folders[i:i + len(marker)]) == marker:
            return i
    return None


def _is_whole(pattern: str) -> bool:
    return pattern.strip().strip("/") in ("**", "**/*", "*", "")


def _scope(patterns: Iterable[str], base: str, *, basename: bool) -> tuple[tuple[str, ...], list[str]]:
    """The stored scope of a file's globs: relative to `base` (the folder holding its rules folder;
    "" at the root), normalised (scopes.normalise_pattern); a glob covering everything means no
    scope. More than scopes.MAX_PATHS are widened to their common folder. Returns (scope, notes)."""
    from ..memories.scopes import MAX_PATHS, normalise_pattern, prefix_of

    notes: list[str] = []
    out: list[str] = []
    for raw in patterns:
        if _is_whole(raw):
            if not base:
                return (), notes
            raw = "**"
        p = raw.strip()
        if basename and "/" not in p.rstrip("/"):
            p = "**/" + p
        if base:
            p = base + "/" + p.lstrip("/")
        try:
            out.append(normalise_pattern(p))
        except InvalidMemory as exc:
            notes.append(f"glob {raw!r} left out: {exc}")
    out = list(dict.fromkeys(out))
    if len(out) > MAX_PATHS:
        common = os.path.commonpath([prefix_of(p) or "." for p in out]).replace("\\", "/").strip(".")
        notes.append(f"{len(out)} globs, more than {MAX_PATHS}: widened to "
                     + (f"{common}/**" if common else "the whole project"))
        return ((common + "/**",) if common else ()), notes
    return tuple(out), notes


def _phrase(description: Any) -> tuple[str, ...]:
    """A rule's description as one applies-when phrase, when it is short enough to be one."""
    if not isinstance(description, str):
        return ()
    text = " ".join(description.split())
    return (text,) if 0 < len(text) <= MAX_APPLIES_CHARS else ()


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def guide(rel: str, text: str, fmt: str | None = None) -> Guide:
    """What the file at `rel` (relative to the project root) with content `text` gives its
    statements: its scope and applies-when phrases (see the module docstring), and its body without
    front matter. `fmt` defaults to format_of(rel); a file of no known format ("docs/RULES.md",
    named by hand) is read as plain Markdown with no scope."""
    fmt = fmt or format_of(rel) or "markdown"  # "private" (CLAUDE.local.md, named): as a CLAUDE.md
    parts = rel.split("/")
    folders = parts[:-1]
    for marker, _suffix, key, rule_fmt in RULE_DIRS:
        at = _marker_at(folders, marker)
        if fmt != rule_fmt or at is None:
            continue
        fields, body, offset = front_matter(text)
        base = "/".join(folders[:at])
        raw = fields.get(key)
        globs = split_patterns(raw)
        unreadable = raw not in (None, "", []) and not globs  # globs: 42, globs: [1, 2]
        phrases: tuple[str, ...] = ()
        if fmt == "cursor rule" and _true(fields.get("alwaysApply")):
            globs = []  # alwaysApply wins over globs in Cursor
        elif fmt == "windsurf rule" and str(fields.get("trigger", "")).strip() != "glob":
            globs = []
        if not globs and fmt in ("cursor rule", "windsurf rule") and not _true(fields.get("alwaysApply")) \
                and str(fields.get("trigger", "")).strip() != "always_on":
            phrases = _phrase(fields.get("description"))  # agent requested / model decision
        scope, notes = _scope(globs, base, basename=fmt in BASENAME_GLOBS)
        if unreadable:
            notes = [f"{key}: {str(raw)[:40]!r} is neither a glob nor a list of globs: read as none", *notes]
        if not scope and base:
            scope = (base + "/**",)  # a nested folder's rules hold there
        return Guide(rel, fmt, scope, phrases, tuple(notes), offset, body)
    _, body, offset = front_matter(text)  # an AGENTS.md may open with front matter too: not statements
    owner = [] if fmt == "markdown" else folders
    if owner and owner[-1] in (".claude", ".github"):  # .claude/CLAUDE.md, .github/copilot-instructions.md
        owner = owner[:-1]
    return Guide(rel, fmt, ("/".join(owner) + "/**",) if owner else (), (), (), offset, body)


def git_root(folder: Path) -> Path | None:
    """The git work tree holding `folder` (its own top level, a linked worktree's too), or None."""
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    top = out.stdout.strip()
    return Path(os.path.realpath(top)) if out.returncode == 0 and top else None


def _git_files(top: Path, folder: Path) -> list[str] | None:
    """Files under `folder` that git tracks or would track (ignored ones left out), relative to
    the work tree `top`; None when git cannot answer."""
    rel = os.path.relpath(folder, top)
    try:
        out = subprocess.run(["git", "-C", str(top), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                              "--full-name", "--", "." if rel == "." else rel],
                             capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return list(dict.fromkeys(p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p))


def _walk_files(root: Path, folder: Path) -> tuple[list[str], bool]:
    """Files under `folder` relative to `root`, by walking it: SKIP_DIRS and nested repositories
    (a folder with its own .git) left out, at most MAX_WALK_ENTRIES entries. (files, cut short)."""
    out: list[str] = []
    seen = 0
    for here, dirs, files in os.walk(folder):
        seen += len(dirs) + len(files)
        if seen > MAX_WALK_ENTRIES:
            return out, True
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.exists(os.path.join(here, d, ".git")))
        rel_here = os.path.relpath(here, root).replace(os.sep, "/")
        out += [f if rel_here == "." else f"{rel_here}/{f}" for f in sorted(files)]
    return out, False


def find(folder: Path, root: Path, *, git: bool) -> tuple[list[str], dict[str, Any]]:
    """The guidance files under `folder`, relative to the project `root`, in a stable order (root
    first, then by path): from `git ls-files` when `git`, else by walking. Files in SKIP_DIRS
    folders are left out. Returns (paths, {"private": [CLAUDE.local.md files not read],
    "listed_by": "git" | "walk", "cut_short": whether a bound stopped the search})."""
    files = _git_files(root, folder) if git else None
    cut = False
    how = "git"
    if files is None:
        files, cut = _walk_files(root, folder)
        how = "walk"
    found: list[str] = []
    private: list[str] = []
    for rel in files:
        if any(part in SKIP_DIRS for part in rel.split("/")[:-1]):
            continue
        fmt = format_of(rel)
        if fmt is None or not (root / rel).is_file():  # deleted but still in the index, or a folder
            continue
        (private if fmt == "private" else found).append(rel)
    found.sort(key=lambda r: (r.count("/"), r))
    if len(found) > MAX_GUIDES:
        found, cut = found[:MAX_GUIDES], True
    return found, {"private": sorted(private), "listed_by": how, "cut_short": cut}


# -- queueing --------------------------------------------------------------------------------------
_COUNTS = ("queued", "pending", "exists", "reviewed")


def _file_report(rel: str, g: Guide | None) -> dict[str, Any]:
    return {"file": rel, "format": g.format if g else None, "paths": list(g.paths) if g else [],
            "items": 0, **{k: 0 for k in _COUNTS}, "merged": 0, "scoped": 0, "skipped": [], "left_out": {},
            "notes": list(g.notes) if g else [], "proposals": []}


def import_tree(propose: Callable[..., dict[str, Any]], target: str | Path | None = None, *,
                cwd: Path | None = None) -> dict[str, Any]:
    """Queue the statements of guidance files as `add` proposals through `propose` (Review.propose:
    text, kind, context, origin, applies_when, paths -> {"status", "proposal"}), each with the scope
    its file gives it (`guide`). target: a file (read whatever its name; CLAUDE.local.md too), a
    folder (every guidance file under it: `find`), or None for the project (the git work tree of
    `cwd`, else `cwd`). Scopes are relative to the git work tree holding the target, else to `cwd`'s
    project when the target lies inside it, else to the target's folder.

    Returns {"root", "target", "files": [{"file", "format", "paths" (its scope), "items",
    "queued", "pending" (already queued), "exists" (already memories), "reviewed" (decided by the
    user before), "merged" (the same statement as an earlier file's: proposed once, with both
    scopes), "skipped": [{"line", "reason"}], "left_out": {kind: count}, "notes", "proposals",
    "error" (a file that could not be read, in a folder import)}], the totals "items", "queued",
    "pending", "exists", "reviewed", "merged", "scoped" (queued proposals that carry a scope),
    "skipped": [{"file", "line", "reason"}], "left_out", "proposals": [ids], "private": [CLAUDE.local.md
    files not read], "listed_by": "git" | "walk" | "file", "cut_short"}; for one file also its
    "file" (the path as given). Raises InvalidInput (a missing target; for one file: unreadable,
    not UTF-8, over 1 MiB)."""
    cwd = Path(os.path.realpath(cwd or Path.cwd()))
    folder, given, single = _import_target(target, cwd)
    top = git_root(folder)
    if top is not None:
        root = top
    else:
        home = git_root(cwd) or cwd
        root = home if folder == home or home in folder.parents else folder
    report: dict[str, Any] = {"root": str(root), "target": str(target) if target is not None else str(folder),
                              "files": [], "private": [], "listed_by": "file", "cut_short": False}
    texts: dict[str, str] = {}
    if single:
        rel = os.path.relpath(given, root).replace(os.sep, "/")
        texts[rel] = read_text(given)
        rels = [rel]
    else:
        rels, meta = find(folder, root, git=top is not None)
        report.update(meta)
    guides, files = _read_guides(rels, root, texts)
    for m in _statements(guides, files):
        _propose_statement(propose, m, files[m["rel"]])
    report["files"] = [files[rel] for rel in rels if rel in files]
    _add_totals(report)
    if single:
        report["file"] = str(target)
    return report


def _import_target(target: str | Path | None, cwd: Path) -> tuple[Path, Path, bool]:
    """(the folder import_tree reads, the file it reads when one is named (else `cwd`), whether it
    reads that one file). Raises InvalidInput (a missing target)."""
    if target is None:
        return git_root(cwd) or cwd, cwd, False
    named = Path(target).expanduser()
    named = named if named.is_absolute() else cwd / named
    if named.is_dir():
        return Path(os.path.realpath(named)), cwd, False
    if named.exists():
        folder = Path(os.path.realpath(named.parent))
        # not resolved: a CLAUDE.md linked to AGENTS.md is read as CLAUDE.md
        return folder, folder / named.name, True
    raise InvalidInput(f"cannot read {target}: No such file or directory")


def _read_guides(rels: list[str], root: Path, texts: dict[str, str]) -> tuple[dict[str, Guide],
                                                                                 dict[str, dict[str, Any]]]:
    """({rel: its Guide}, {rel: its file report}) of the guidance files `rels` under `root`, each
    read from `texts` when there, else from disk; a file that cannot be read has a report with its
    "error" and no Guide."""
    guides: dict[str, Guide] = {}
    files: dict[str, dict[str, Any]] = {}
    for rel in rels:
        try:
            text = texts[rel] if rel in texts else read_text(root / rel)
        except InvalidInput as exc:
            files[rel] = {**_file_report(rel, None), "error": str(exc)}
            continue
        g = guide(rel, text)
        guides[rel] = g
        files[rel] = _file_report(rel, g)
        files[rel]["left_out"] = left_out(g.body)
    return guides, files


def _statements(guides: dict[str, Guide], files: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The statements of `guides` to propose, in file order, each {"item", "rel", "line", "paths",
    "whole", "applies_when"}, counted in `files` (items, merged, skipped). One proposal per
    statement: the same text in several files takes the union of their scopes (none when one of them
    has none) and of their applies-when phrases."""
    from ..text import normalise

    merged: dict[str, dict[str, Any]] = {}
    for rel, g in guides.items():
        for item in split(g.body):
            files[rel]["items"] += 1
            line = item.line + g.body_offset
            if len(item.text.encode("utf-8")) > MAX_TEXT_BYTES:
                files[rel]["skipped"].append({"line": line, "reason": f"longer than {MAX_TEXT_BYTES} bytes"})
                continue
            key = normalise(item.text)
            if key in merged:
                first = merged[key]
                first["whole"] = first["whole"] or not g.paths
                first["paths"] += [p for p in g.paths if p not in first["paths"]]
                first["applies_when"] += [a for a in g.applies_when if a not in first["applies_when"]]
                files[rel]["merged"] += 1
                continue
            merged[key] = {"item": item, "rel": rel, "line": line, "paths": list(g.paths), "whole": not g.paths,
                           "applies_when": list(g.applies_when)}
    return list(merged.values())


def _propose_statement(propose: Callable[..., dict[str, Any]], m: dict[str, Any], file: dict[str, Any]) -> None:
    """Propose the statement `m` (see _statements) with its scope, counted in its `file`'s report."""
    item, rel = m["item"], m["rel"]
    scope, notes = ((), []) if m["whole"] else _scope(m["paths"], "", basename=False)
    file["notes"] += [n for n in notes if n not in file["notes"]]
    try:
        done = propose(item.text, kind=item.kind, context=item.context, origin=f"{rel}:{m['line']}",
                       applies_when=m["applies_when"][:MAX_APPLIES_WHEN] or None, paths=list(scope))
    except InvalidMemory as exc:
        file["skipped"].append({"line": m["line"], "reason": str(exc)})
        return
    file[done["status"]] += 1
    file["scoped"] += done["status"] == "queued" and bool(scope)
    if done["proposal"]:
        file["proposals"].append(done["proposal"]["id"])


def _add_totals(report: dict[str, Any]) -> None:
    """Add to an import's `report` the totals of its files' reports (import_tree's return)."""
    for key in ("items", *_COUNTS, "merged", "scoped"):
        report[key] = sum(f[key] for f in report["files"])
    report["skipped"] = [{"file": f["file"], **s} for f in report["files"] for s in f["skipped"]]
    left: dict[str, int] = {}
    for f in report["files"]:
        for kind, n in f["left_out"].items():
            left[kind] = left.get(kind, 0) + n
    report["left_out"] = left
    report["proposals"] = [i for f in report["files"] for i in f["proposals"]]
