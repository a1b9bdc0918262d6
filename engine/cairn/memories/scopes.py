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

from ..errors import InvalidMemory

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
# A rule learned in a folder often holds further up (the guidance of a package, not of one module):
# each folder above the learned one, up to but not including the project root, is learned too, its
# weight FOLDER_WEIGHT x ANCESTOR_DECAY per level up.
ANCESTOR_DECAY = 0.75
OTHER_TYPE_WEIGHT = 0.45  # files of another type in a folder where a rule was learned on one type
CITED_WEIGHT = 0.5  # a memory cited while working on files: a weaker sign than one written there
LEARNED_HALF_LIFE_DAYS = 90.0
_FLAGS = None  # wcmatch flags, set on first use (the import is deferred: hooks that match nothing skip it)


def normalise_pattern(pattern: str, root: str | os.PathLike[str] | None = None) -> str:
    """`pattern` as stored: forward slashes, no "./" or leading "/", a trailing "/" made "/**",
    whitespace trimmed; a command scope ("cmd:NAME ...") with its words single-spaced. An absolute
    path inside the project `root` is made relative to it (`/home/me/shop/src/x.py` -> `src/x.py`);
    any other leading "/" anchors at the project root, as in .gitignore.
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
    if root is not None:
        base = os.fspath(root).replace("\\", "/").rstrip("/") + "/"
        if text.startswith(base):
            text = text[len(base):]
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


def normalise_patterns(patterns: Iterable[str] | str | None,
                       root: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """Each of `patterns` normalised (normalise_pattern, within the project `root`), duplicates
    dropped, order kept. Raises InvalidMemory (a bare string instead of a list; more than MAX_PATHS)."""
    if patterns is None:
        return ()
    if isinstance(patterns, str):
        raise InvalidMemory("paths is a list of globs, not one string")
    out = tuple(dict.fromkeys(normalise_pattern(p, root) for p in patterns))
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


_ROUTE_SEGMENT = re.compile(r"(?:(?<=/)|^)\[\[?(?:\.\.\.)?[A-Za-z_][\w-]*\]\]?(?=/|\.|$)")


@lru_cache(maxsize=8192)
def _compiled(pattern: str) -> tuple[re.Pattern[str], ...] | str:
    """The regular expressions of a glob, or the literal itself when it has no glob character."""
    if not GLOB_CHARS & set(pattern):
        return pattern
    from wcmatch import glob

    # Next.js, SvelteKit and Nuxt name folders and files "[slug]", "[...all]", "[[...opt]]": a
    # bracketed name that is a whole path segment (or a file's stem) is that literal name, not a class
    # of its letters ("[[]" is a class of "[" alone); other brackets stay classes ("[Mm]akefile").
    pattern = _ROUTE_SEGMENT.sub(lambda m: m.group().replace("[", "[[]"), pattern)
    include, _ = glob.translate(pattern, flags=_flags())
    if "[" in pattern.replace("[[]", ""):
        # A class may still be meant as a literal name: a learned path holds its file's real name.
        literal, _ = glob.translate(pattern.replace("[[]", "[").replace("[", "[[]"), flags=_flags())
        include = [*include, *literal]
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
    commands: each file (FILE_WEIGHT), each file's folder (FOLDER_WEIGHT: its siblings) and the
    folders above it (ANCESTOR_DECAY per level above the deepest folder two of the files share),
    when the files lie in several folders the files of their common type under the folders' common
    ancestor (TYPE_WEIGHT), and each command (COMMAND_WEIGHT). Files at the project root give only
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
            folders.append(folder)
    # The observed extent of the rule: each learned folder, and the deepest common folder of any
    # two of them (the rule spans both, so it holds across that folder). Above an observed folder
    # the weight decays per level: the rule may hold there, but nothing showed it.
    observed = set(folders)
    for a in set(folders):
        for b in set(folders):
            if a < b:
                common = os.path.commonpath([a.rstrip("/"), b.rstrip("/")])
                if common:
                    observed.add(common + "/")
    # Files of one type (all .cs, all .tsx) say the rule is about that type: above their own
    # folders it reaches only files of that type.
    types = sorted({PurePosixPath(f).suffix for f in files})
    typed = ""
    if types and "" not in types and len(types) <= 3:
        typed = f"**/*{types[0]}" if len(types) == 1 else "**/*.{" + ",".join(t[1:] for t in types) + "}"
    for folder in observed:
        for up, above in enumerate([folder, *reversed(ancestors(folder)[1:-1])]):
            add(above + (typed or "**"), FOLDER_WEIGHT * ANCESTOR_DECAY ** up)
        if typed:  # files of other types beside them: possibly, less likely
            add(folder + "**", OTHER_TYPE_WEIGHT)
    if len(set(folders)) > 1:
        suffixes = Counter(PurePosixPath(f).suffix for f in files if PurePosixPath(f).suffix)
        common = os.path.commonpath([f.rstrip("/") for f in folders]) if folders else ""
        base = (common + "/") if common else ""
        for suffix, n in suffixes.items():
            if n >= 2:  # across the whole project (no common folder) a type alone says less
                add(f"{base}**/*{suffix}", TYPE_WEIGHT * (1.0 if base else ANCESTOR_DECAY))
    for c in commands:
        add(c, COMMAND_WEIGHT)
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))


def decayed(weight: float, updated_at: int, now: int) -> float:
    """A learned weight after LEARNED_HALF_LIFE_DAYS-half-life decay since `updated_at` (epoch ms)."""
    days = max(0.0, (now - updated_at) / 86_400_000)
    return weight * math.pow(0.5, days / LEARNED_HALF_LIFE_DAYS)
