"""Path and command scopes: which files and commands a memory governs, and what the work touches.

A scope is a glob relative to the project root, gitignore/minimatch style ("src/payments/**",
"**/*.tsx", "packages/{api,web}/**"), a literal path (a file, or a folder and everything under it:
"src/payments"), or a command ("cmd:pytest", "cmd:npm run build"). Scopes are given when a memory
is written (remember's `paths`, imported guidance keeps its folder or globs) or learned from what
the writing session touched (`learned_patterns`). Globs are matched by wcmatch's translation to
regular expressions (GLOBSTAR, BRACE, DOTGLOB), compiled once per pattern.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from .errors import InvalidMemory
from .timeutil import now_ms

if TYPE_CHECKING:
    from .engine import Engine
    from .models import Memory
    from .storage.protocol import StoreBackend

MAX_PATHS = 8  # scopes given with one memory
MAX_PATTERN_CHARS = 200
COMMAND = "cmd:"  # a command scope's prefix: "cmd:pytest"
GLOB_CHARS = frozenset("*?[{")
GIVEN, LEARNED = "given", "learned"
# Learned scopes: a memory written in a session is associated with what the session touched in the
# LEARN_WINDOW_MS before the write, at most LEARN_FILES of its most recent files (and commands).
LEARN_WINDOW_MS = 30 * 60 * 1000
LEARN_FILES = 6
MAX_LEARNED = 12  # learned scopes kept per memory (the strongest)
# Weights of learned patterns (0..1): the file itself, its folder (siblings: "a rule learned on two
# files of a folder holds for its siblings"), files of the same type under the folders' common
# ancestor when they lie in several folders, and a command. Decay: a learned scope loses half its
# weight in LEARNED_HALF_LIFE_DAYS unless it is reinforced (written or cited again while working there).
FILE_WEIGHT = 1.0
FOLDER_WEIGHT = 0.8
TYPE_WEIGHT = 0.6
COMMAND_WEIGHT = 0.7
CITED_WEIGHT = 0.5  # a memory cited while working on files: a weaker sign than one written there
LEARNED_HALF_LIFE_DAYS = 90.0
_FLAGS = None  # wcmatch flags, set on first use (the import is deferred: hooks that match nothing skip it)


def normalise_pattern(pattern: str) -> str:
    """`pattern` as stored: forward slashes, no "./" or leading "/", a trailing "/" made "/**",
    whitespace trimmed; a command scope ("cmd:NAME ...") with its words single-spaced.
    Raises InvalidMemory for an empty pattern, one over MAX_PATTERN_CHARS, one with a ".."
    component, or one that is not a string."""
    if not isinstance(pattern, str):
        raise InvalidMemory(f"a path scope is a string, not {type(pattern).__name__}")
    text = pattern.strip()
    if text.startswith(COMMAND):
        words = text[len(COMMAND):].split()
        if not words:
            raise InvalidMemory(f"command scope {pattern!r} names no command")
        return COMMAND + " ".join(words)
    text = text.replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    text = text.lstrip("/")
    if text.endswith("/"):
        text = text.rstrip("/") + "/**"
    text = re.sub(r"/+", "/", text)
    if not text or text in ("**", "**/*", "*"):
        raise InvalidMemory(f"path scope {pattern!r} covers the whole project; leave the scope out instead")
    if len(text) > MAX_PATTERN_CHARS:
        raise InvalidMemory(f"path scope {pattern[:40]!r}... is longer than {MAX_PATTERN_CHARS} characters")
    if ".." in text.split("/"):
        raise InvalidMemory(f"path scope {pattern!r} leaves the project (a '..' component)")
    return text


def normalise_patterns(patterns: Iterable[str] | str | None) -> tuple[str, ...]:
    """Each of `patterns` normalised (normalise_pattern), duplicates dropped, order kept.
    Raises InvalidMemory (a bare string instead of a list; more than MAX_PATHS)."""
    if patterns is None:
        return ()
    if isinstance(patterns, str):
        raise InvalidMemory("paths is a list of globs, not one string")
    out = tuple(dict.fromkeys(normalise_pattern(p) for p in patterns))
    if len(out) > MAX_PATHS:
        raise InvalidMemory(f"at most {MAX_PATHS} path scopes per memory, not {len(out)}")
    return out


def prefix_of(pattern: str) -> str:
    """The literal folder part of a normalised pattern, with a trailing "/" ("" at the root): what a
    path's ancestors are looked up by. A command scope is its own prefix."""
    if pattern.startswith(COMMAND):
        return pattern
    parts = pattern.split("/")
    literal = []
    for part in parts[:-1]:
        if GLOB_CHARS & set(part):
            break
        literal.append(part)
    return "".join(p + "/" for p in literal)


def ancestors(path: str) -> list[str]:
    """The folder prefixes of a relative path, root first: "src/a/b.py" -> ["", "src/", "src/a/"].
    A folder path ("src/a/") has itself as its last ancestor."""
    parts = path.split("/")
    out, acc = [""], ""
    for part in parts[:-1]:
        acc += part + "/"
        out.append(acc)
    return out


def _flags() -> int:
    global _FLAGS
    if _FLAGS is None:
        from wcmatch import glob

        _FLAGS = glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB
    return _FLAGS


@lru_cache(maxsize=8192)
def _compiled(pattern: str) -> tuple[re.Pattern[str], ...] | str:
    """The regular expressions of a glob, or the literal itself when it has no glob character."""
    if not GLOB_CHARS & set(pattern):
        return pattern
    from wcmatch import glob

    include, _ = glob.translate(pattern, flags=_flags())
    return tuple(re.compile(r) for r in include)


def matches(pattern: str, path: str) -> bool:
    """Whether normalised `pattern` covers relative `path` (a file, or a folder written with a
    trailing "/"): a glob by its match, a literal when it is the path or one of its folders."""
    if pattern.startswith(COMMAND):
        return path == pattern or path.startswith(pattern + " ")
    compiled = _compiled(pattern)
    if isinstance(compiled, str):
        return path.rstrip("/") == compiled or path.startswith(compiled + "/")
    if path.endswith("/"):  # a folder (Grep, Glob): covered by a folder scope at or above it
        prefix = prefix_of(pattern)
        return bool(prefix) and pattern == prefix + "**" and path.startswith(prefix)
    return any(r.match(path) for r in compiled)


def specificity(pattern: str, path: str) -> float:
    """How closely `pattern` fits `path`, 0..1: 1 for the file itself or its own folder, less for
    a pattern rooted further up (by how many folders lie between), at least 0.3."""
    if pattern.startswith(COMMAND):
        return 1.0
    if pattern == path:
        return 1.0
    depth = max(1, len(ancestors(path)) - 1)
    prefix_depth = prefix_of(pattern).count("/")
    if not GLOB_CHARS & set(pattern):
        prefix_depth = pattern.count("/") + 1
    return max(0.3, min(1.0, prefix_depth / depth))


def relative(path: str, root: str | os.PathLike[str] | None) -> str | None:
    """`path` (absolute, or relative to `root`) as a normalised path relative to the project
    `root`, or None when it lies outside it (or is empty)."""
    if not path or not isinstance(path, str):
        return None
    p = path.replace("\\", "/")
    if root is not None and os.path.isabs(p):
        try:
            rel = os.path.relpath(os.path.normpath(p), os.path.normpath(str(root)))
        except ValueError:  # another drive
            return None
        p = rel.replace("\\", "/")
    p = os.path.normpath(p).replace("\\", "/") if p not in ("", ".") else ""
    if not p or p == "." or p.startswith("../") or p == ".." or os.path.isabs(p):
        return None
    return p


# -- commands -------------------------------------------------------------------------------------
_WRAPPERS = frozenset("sudo env time nohup nice exec command builtin xargs timeout".split())
# Programs whose first word after the program names what runs ("npm run build", "git rebase").
_MULTIPLEXERS = frozenset("npm pnpm yarn bun npx bunx uv poetry pipenv hatch pdm cargo go make just "
                          "docker kubectl git gh dotnet mvn gradle ./gradlew rake bundle mix deno "
                          "terraform helm alembic django-admin nx turbo".split())
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run"),
            ("bundle", "exec"), ("pnpm", "exec"), ("npx",), ("bunx",), ("pnpm", "dlx")}
_SEPARATORS = re.compile(r"&&|\|\||;|\||\n")


def commands_of(command: str) -> list[str]:
    """The commands a shell line runs, as scopes without the "cmd:" prefix: for each pipeline
    segment its program ("pytest"), and for a program that dispatches on its first argument that
    too ("npm run", "npm run build", "git rebase"). Env assignments, sudo/env/time and runners
    (uv run, npx, poetry run, python -m X) are looked through. [] for an empty or unparsable line."""
    out: list[str] = []
    for segment in _SEPARATORS.split(command or ""):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        while words and (("=" in words[0] and not words[0].startswith("=")) or words[0] in _WRAPPERS
                         or words[0].startswith("-")):
            words = words[1:]
        for runner in sorted(_RUNNERS, key=len, reverse=True):
            if tuple(words[:len(runner)]) == runner:
                words = words[len(runner):]
                while words and words[0].startswith("-"):
                    words = words[1:]
                break
        if not words:
            continue
        program = PurePosixPath(words[0]).name if "/" in words[0] and not words[0].startswith("./") else words[0]
        if program.startswith("python") and len(words) > 2 and words[1] == "-m":
            program, words = words[2], words[2:]
        out.append(program)
        rest = [w for w in words[1:] if not w.startswith("-")]
        if program in _MULTIPLEXERS and rest:
            out.append(f"{program} {rest[0]}")
            if rest[0] in ("run", "exec") and len(rest) > 1:
                out.append(f"{program} {rest[0]} {rest[1]}")
    return list(dict.fromkeys(c for c in out if len(c) <= MAX_PATTERN_CHARS))


def path_arguments(command: str) -> list[str]:
    """Words of a shell line that look like relative or absolute file paths (a "/" or a file
    extension, no shell metacharacters): the files a command runs on, to be checked against the
    project's tree by the caller."""
    try:
        words = shlex.split(command or "", comments=True)
    except ValueError:
        words = (command or "").split()
    out = []
    for w in words[1:]:
        if w.startswith("-") or any(c in w for c in "$`*?{}<>|;&=") or len(w) > 300:
            continue
        if "/" in w or re.search(r"\.[A-Za-z0-9]{1,8}$", w):
            out.append(w.split("::", 1)[0])  # pytest node ids: tests/x.py::test_y
    return list(dict.fromkeys(out))


# -- learning --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Touch:
    """One thing a session touched: a relative path (a file, or a folder ending in "/") or a command
    ("cmd:pytest"), how (read, edit, search, run) and when it was last touched (epoch ms)."""

    path: str
    action: str
    at: int


def learned_patterns(touches: Sequence[Touch], *, now: int, weight: float = 1.0) -> list[tuple[str, float]]:
    """The scopes to learn for a memory written (weight 1) or cited (CITED_WEIGHT) after `touches`:
    from the touches of the LEARN_WINDOW_MS before `now`, at most LEARN_FILES most recent files and
    commands: each file (FILE_WEIGHT), each file's folder (FOLDER_WEIGHT: its siblings), when the
    files lie in several folders the files of their common type under the folders' common ancestor
    (TYPE_WEIGHT), and each command (COMMAND_WEIGHT). Files at the project root give only
    themselves (the root's folder is the whole project). Returns (pattern, weight), strongest first."""
    recent = sorted((t for t in touches if now - t.at <= LEARN_WINDOW_MS), key=lambda t: -t.at)
    files = list(dict.fromkeys(t.path for t in recent if not t.path.startswith(COMMAND)
                               and not t.path.endswith("/")))[:LEARN_FILES]
    commands = list(dict.fromkeys(t.path for t in recent if t.path.startswith(COMMAND)))[:2]
    out: dict[str, float] = {}

    def add(pattern: str, w: float) -> None:
        out[pattern] = max(out.get(pattern, 0.0), w * weight)

    folders = []
    for f in files:
        add(f, FILE_WEIGHT)
        folder = f.rsplit("/", 1)[0] + "/" if "/" in f else ""
        if folder:
            add(folder + "**", FOLDER_WEIGHT)
            folders.append(folder)
    if len(set(folders)) > 1:
        suffixes = Counter(PurePosixPath(f).suffix for f in files if PurePosixPath(f).suffix)
        common = os.path.commonpath([f.rstrip("/") for f in folders]) if folders else ""
        base = (common + "/") if common else ""
        for suffix, n in suffixes.items():
            if n >= 2:
                add(f"{base}**/*{suffix}", TYPE_WEIGHT)
    for c in commands:
        add(c, COMMAND_WEIGHT)
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))


def decayed(weight: float, updated_at: int, now: int) -> float:
    """A learned weight after LEARNED_HALF_LIFE_DAYS-half-life decay since `updated_at` (epoch ms)."""
    days = max(0.0, (now - updated_at) / 86_400_000)
    return weight * math.pow(0.5, days / LEARNED_HALF_LIFE_DAYS)


# -- the store side: given, inherited and learned scopes, touches, and lookup ----------------------
TOUCH_KEEP = 400  # touches kept per session (the most recent)
TOUCH_ACTIONS = ("read", "edit", "search", "run")


def attach(store: StoreBackend, memory_id: str, patterns: Sequence[str], *, at: int) -> int:
    """Give `memory_id` the normalised `patterns` as given scopes (weight 1). Returns how many."""
    return store.put_scopes(memory_id, [(p, prefix_of(p), GIVEN, 1.0) for p in patterns], at) if patterns else 0


def inherit(store: StoreBackend, new_id: str, old_ids: Sequence[str], *, at: int) -> int:
    """A replacing memory takes over the scopes of the memories it replaces (a changed rule still
    governs the same files), given ones as given, learned ones with their weight."""
    rows: dict[str, tuple[str, str, str, float]] = {}
    for scopes in store.scopes_of(list(old_ids)).values():
        for pattern, origin, weight, updated_at in scopes:
            w = weight if origin == GIVEN else decayed(weight, updated_at, at)
            if pattern not in rows or rows[pattern][3] < w:
                rows[pattern] = (pattern, prefix_of(pattern), origin, w)
    return store.put_scopes(new_id, list(rows.values()), at) if rows else 0


def session_touches(store: StoreBackend, session_id: str) -> list[Touch]:
    """What `session_id` touched (its most recent TOUCH_KEEP), most recent first."""
    return [Touch(path, action, last) for path, action, _n, _first, last in store.session_touches(session_id, TOUCH_KEEP)]


def learn(store: StoreBackend, memory_ids: Sequence[str], session_id: str, *, at: int, weight: float = 1.0) -> int:
    """Associate each of `memory_ids` with what `session_id` touched just before `at`
    (learned_patterns): a learned scope's weight grows toward 1 each time it is learned again
    (w' = w + (1 - w) * new), and a memory keeps its MAX_LEARNED strongest. Given scopes are never
    changed. Returns how many scopes were written."""
    learned = learned_patterns(session_touches(store, session_id), now=at, weight=weight)
    if not learned or not memory_ids:
        return 0
    existing = store.scopes_of(list(memory_ids))
    written = 0
    for memory_id in dict.fromkeys(memory_ids):
        have = {p: (origin, decayed(w, u, at) if origin == LEARNED else w)
                for p, origin, w, u in existing.get(memory_id, [])}
        rows = []
        for pattern, w in learned:
            origin, old = have.get(pattern, (LEARNED, 0.0))
            if origin == GIVEN:
                continue
            rows.append((pattern, prefix_of(pattern), LEARNED, min(1.0, old + (1.0 - old) * w)))
        merged = {p: w for p, (o, w) in have.items() if o == LEARNED}
        merged.update({r[0]: r[3] for r in rows})
        keep = set(sorted(merged, key=lambda p: -merged[p])[:MAX_LEARNED])
        rows = [r for r in rows if r[0] in keep]
        dropped = [p for p in merged if p not in keep and p in have]
        if dropped:
            store.delete_scopes([memory_id], origin=LEARNED, patterns=dropped)
        written += store.put_scopes(memory_id, rows, at) if rows else 0
    return written


@dataclass(frozen=True)
class ScopeMatch:
    """A memory a piece of work falls under: its id, the pattern that matched and the path or command
    it matched, the scope's origin, and the score (specificity x weight, 0..1)."""

    memory_id: str
    pattern: str
    target: str
    origin: str
    score: float


def lookup(store: StoreBackend, targets: Sequence[str], *, now: int) -> list[ScopeMatch]:
    """The memories whose scopes cover any of `targets` (relative paths, folders ending in "/", or
    "cmd:..." commands), each with its best match, best first. One store lookup by the targets'
    ancestors; then each candidate's pattern is matched (compiled once per pattern)."""
    prefixes: list[str] = []
    for t in targets:
        prefixes += [t] if t.startswith(COMMAND) else ancestors(t)
        if t.startswith(COMMAND):  # "cmd:npm run build" also finds "cmd:npm run" and "cmd:npm"
            words = t[len(COMMAND):].split()
            prefixes += [COMMAND + " ".join(words[:i]) for i in range(1, len(words))]
        elif t.endswith("/"):  # a folder also finds the scopes rooted below it (cheap: exact prefix only)
            prefixes.append(t)
    best: dict[str, ScopeMatch] = {}
    for memory_id, pattern, origin, weight, updated_at in store.scoped_candidates(prefixes):
        w = weight if origin == GIVEN else decayed(weight, updated_at, now)
        for t in targets:
            if t.startswith(COMMAND) != pattern.startswith(COMMAND) or not matches(pattern, t):
                continue
            score = specificity(pattern, t) * w
            if memory_id not in best or best[memory_id].score < score:
                best[memory_id] = ScopeMatch(memory_id, pattern, t, origin, score)
    return sorted(best.values(), key=lambda m: (-m.score, m.memory_id))


class Scopes:
    """The path and command scopes of the project store's memories, and what sessions touched:
    `memory.scopes` (api.Cairn). Reads and writes go to the project store (the global store's
    memories hold everywhere and have no project paths)."""

    def __init__(self, engine: Engine):
        self._engine = engine

    @property
    def _store(self) -> StoreBackend:
        return self._engine.store

    def of(self, memory_ids: Iterable[str]) -> dict[str, list[dict[str, object]]]:
        """{memory_id: [{"pattern", "origin" ("given" | "learned"), "weight" (0..1, decayed to now)}]}
        for the ids that have scopes; given first, then strongest."""
        now = now_ms()
        out: dict[str, list[dict[str, object]]] = {}
        for memory_id, rows in self._store.scopes_of(list(memory_ids)).items():
            items = [{"pattern": p, "origin": o, "weight": round(w if o == GIVEN else decayed(w, u, now), 3)}
                     for p, o, w, u in rows]
            out[memory_id] = sorted(items, key=lambda d: (d["origin"] != GIVEN, -float(d["weight"])))  # type: ignore[arg-type]
        return out

    def set(self, memory_id: str, patterns: Iterable[str]) -> list[str]:
        """Replace the given scopes of current memory `memory_id` by `patterns` ([] removes them);
        learned ones stay. Returns the normalised patterns. Raises MemoryNotFound, NotCurrent,
        InvalidMemory."""
        from .errors import NotCurrent

        normalised = normalise_patterns(list(patterns))
        memory = self._engine.get(memory_id)
        if memory.status != "current":
            raise NotCurrent(f"memory {memory_id} is {memory.status}; scope its current version instead")
        with self._store.transaction():
            self._store.delete_scopes([memory_id], origin=GIVEN)
            self._store.delete_scopes([memory_id], patterns=list(normalised))
            attach(self._store, memory_id, normalised, at=now_ms())
        return list(normalised)

    def reset(self, memory_ids: Iterable[str] | None = None, *, origin: str = LEARNED) -> int:
        """Forget the `origin` scopes (default the learned ones) of `memory_ids`, or of every memory
        with None. Returns how many scopes went."""
        if origin not in (GIVEN, LEARNED):
            raise InvalidMemory(f"origin is {GIVEN!r} or {LEARNED!r}, not {origin!r}")
        return self._store.delete_scopes(None if memory_ids is None else list(memory_ids), origin=origin)

    def touch(self, session_id: str, touches: Sequence[tuple[str, str]], *, at: int | None = None) -> int:
        """Record that `session_id` touched each (target, action): a relative path, a folder ending
        in "/" or a "cmd:..." command; action one of TOUCH_ACTIONS. Returns how many were recorded."""
        rows = [(t, a) for t, a in touches if t and a in TOUCH_ACTIONS]
        if not session_id or not rows:
            return 0
        return self._store.record_touches(session_id, rows, now_ms() if at is None else at, keep=TOUCH_KEEP)

    def touched(self, session_id: str) -> list[Touch]:
        """What `session_id` touched, most recent first (at most TOUCH_KEEP)."""
        return session_touches(self._store, session_id)

    def learn(self, memory_ids: Iterable[str], session_id: str, *, weight: float = 1.0) -> int:
        """Associate `memory_ids` with what `session_id` touched just before now (scopes.learn);
        weight CITED_WEIGHT for memories the session cited rather than wrote. Returns scopes written."""
        ids = [i for i in dict.fromkeys(memory_ids) if i]
        if not ids or not session_id:
            return 0
        with self._store.transaction():
            return learn(self._store, ids, session_id, at=now_ms(), weight=weight)

    def matching(self, targets: Sequence[str], *, exclude: Iterable[str] = (),
                 limit: int = 20) -> list[tuple[Memory, ScopeMatch]]:
        """The current memories whose scopes cover any of `targets` (see lookup), best first, at
        most `limit`, without the ids in `exclude`."""
        skip = frozenset(exclude)
        found = [m for m in lookup(self._store, list(targets), now=now_ms()) if m.memory_id not in skip][:limit]
        if not found:
            return []
        seqs = self._store.seqs_of([m.memory_id for m in found])
        memories = self._store.by_seqs(list(seqs.values()))
        out = []
        for match in found:
            memory = memories.get(seqs.get(match.memory_id, -1))
            if memory is not None and memory.status == "current" and memory.cold_at is None:
                out.append((memory, match))
        return out
