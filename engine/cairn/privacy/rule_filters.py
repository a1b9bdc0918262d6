"""Betterleaks' filter expressions and its token-efficiency test, in Python.

Betterleaks (assets/betterleaks.toml, MIT; see assets/README.md) gives each rule a `filter`: an
expression in expr-lang (github.com/expr-lang/expr) that is true when a finding is NOT a secret, e.g.
`entropy(finding["secret"]) <= 3.5 || failsTokenEfficiency(finding["secret"]) || matchesAny(...)`.
compile_filter() translates the subset its rule set uses into a Python function of
(finding, attributes) -> bool: `let NAME = EXPR;` bindings, `||`, `&&`, `!`, comparisons, `??`,
string slices, backquoted and double-quoted strings, and the functions Betterleaks binds (entropy,
matchesAny, containsAny, findMatch, failsTokenEfficiency, len, max, min, get, and the same under
`filter.`). Regexes in the expressions are Go's (RE2) and go through go_regex. An expression outside
that subset raises FilterSyntaxError when the rule set loads (tests/engine/test_secret_rules.py
compiles every filter of the vendored file).

fails_token_efficiency() is Betterleaks' filter for generic rules (internal/exprruntime/bindings_filter.go):
a candidate that holds an English word of 5 or more letters, or that OpenAI's cl100k_base BPE encodes
in few tokens for its length (2.5 characters a token or more; 2.1 under 12 characters when it holds a
word of 4), is text rather than a random secret. The vocabulary (assets/cl100k_base.tiktoken.gz) and
the word list (assets/words.txt.gz) are the files Betterleaks ships.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ASSETS = Path(__file__).parent.parent / "assets"
VOCABULARY_FILE = ASSETS / "cl100k_base.tiktoken.gz"
WORDS_FILE = ASSETS / "words.txt.gz"
_POSIX = {"[:alnum:]": "a-zA-Z0-9", "[:alpha:]": "a-zA-Z", "[:digit:]": "0-9", "[:xdigit:]": "0-9a-fA-F",
          "[:upper:]": "A-Z", "[:lower:]": "a-z", "[:space:]": r"\s", "[:word:]": r"\w", "[:punct:]": r"!-/:-@\[-`{-~"}


class FilterSyntaxError(ValueError):
    """A filter expression outside the subset compile_filter translates."""


def go_regex(pattern: str) -> str:
    """A Go (RE2) pattern in Python's syntax: `(?i)` after the start becomes a `(?i:...)` group over
    the rest of its alternative and each later alternative of its enclosing group (where Go's flag
    holds; Python allows global flags only at the start), `\\z` is `\\Z`, and POSIX classes are
    spelled out."""
    pattern = pattern.replace(r"\z", r"\Z")
    for posix, spelled in _POSIX.items():
        pattern = pattern.replace(posix, spelled)
    while True:
        at = pattern.find("(?i)", 1)
        if at < 0:
            return pattern
        end = _group_end(pattern, at + 4)
        pieces = _alternatives(pattern[at + 4:end])
        pattern = pattern[:at] + "|".join(f"(?i:{p})" for p in pieces) + pattern[end:]


def _structure(pattern: str, i: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, group depth) of each character of `pattern` from i that is neither escaped
    nor inside a character class; depth counts the groups open there relative to i (a `)` closing a
    group opened before i has depth -1)."""
    depth, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":  # a literal ] first in a class
                i += 1
        else:
            depth -= c == ")"
            yield i, c, depth
            depth += c == "("
        i += 1


def _group_end(pattern: str, i: int) -> int:
    """The index of the `)` closing the group that encloses position i (len(pattern) at top level)."""
    return next((j for j, c, depth in _structure(pattern, i) if c == ")" and depth < 0), len(pattern))


def _alternatives(body: str) -> list[str]:
    """`body` split at its top-level `|`."""
    cuts = [j for j, c, depth in _structure(body) if c == "|" and depth == 0]
    return [body[start + 1:end] for start, end in zip([-1, *cuts], [*cuts, len(body)])]


def entropy(text: str) -> float:
    """Shannon entropy of `text`, in bits per character (gitleaks' and Betterleaks' shannonEntropy)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


@functools.lru_cache(maxsize=4096)
def _joined(patterns: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(f"(?:{_scoped(go_regex(p))})" for p in patterns))


def _scoped(pattern: str) -> str:
    """A leading `(?i)` as a group, so that the pattern can stand inside an alternation."""
    return f"(?i:{pattern[4:]})" if pattern.startswith("(?i)") else pattern


def matches_any(text: str, patterns: list[str]) -> bool:
    return bool(patterns) and _joined(tuple(patterns)).search(text) is not None


def contains_any(text: str, terms: list[str]) -> bool:
    low = text.lower()
    return any(term in low for term in terms)


def find_match(text: str, pattern: str) -> str:
    match = _joined((pattern,)).search(text)
    return match.group(0) if match else ""


# -- token efficiency ----------------------------------------------------------------------------------
# cl100k_base's pre-tokenizer, with \p{L} as [^\W\d_] and \p{N} as \d (Python's re has no \p{...};
# the two differ only on numerals outside Nd, which a secret does not hold).
_PRETOKEN = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?:[^\r\n\w]|_)?[^\W\d_]+|\d{1,3}| ?(?:[^\s\w]|_)+[\r\n]*"
                       r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_vocab_lock = threading.Lock()
_ranks: dict[bytes, int] | None = None
_words: frozenset[str] | None = None


def _vocabulary() -> dict[bytes, int]:
    """cl100k_base's ranks, {token bytes: rank}, read once per process (about 70 ms)."""
    global _ranks
    with _vocab_lock:
        if _ranks is None:
            with gzip.open(VOCABULARY_FILE) as handle:
                fields = handle.read().split()  # "<base64 token> <rank>" lines
            _ranks = dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2])))
    return _ranks


def _word_list() -> frozenset[str]:
    """Betterleaks' word list (lower case), read once per process."""
    global _words
    with _vocab_lock:
        if _words is None:
            with gzip.open(WORDS_FILE, "rt", encoding="utf-8") as handle:
                _words = frozenset(w for w in handle.read().split())
    return _words


def _bpe_count(piece: bytes, ranks: dict[bytes, int]) -> int:
    """How many tokens byte-pair encoding makes of `piece`: merge the adjacent pair of lowest rank
    until none is in the vocabulary (tiktoken's _byte_pair_merge)."""
    if piece in ranks:
        return 1
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank < best):
                best, at = rank, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return len(parts)


def token_count(text: str) -> int:
    """The number of cl100k_base tokens in `text` (no special tokens)."""
    ranks = _vocabulary()
    return sum(_bpe_count(m.group(0).encode("utf-8"), ranks) for m in _PRETOKEN.finditer(text))


def is_word(text: str) -> bool:
    """Whether `text` (lower case) is a word of Betterleaks' list (NLTK's English words)."""
    return text in _word_list()


def dictionary_words(text: str, min_len: int) -> list[str]:
    """The words of Betterleaks' list (NLTK's English words) of at least `min_len` letters in `text`,
    case-insensitively, as substrings."""
    words = _word_list()
    low = text.lower()
    return [low[a:b] for a in range(len(low) - min_len + 1) for b in range(a + min_len, min(len(low), a + 24) + 1)
            if low[a:b] in words]


def fails_token_efficiency(secret: str) -> bool:
    """Betterleaks' failsTokenEfficiency: True when `secret` reads as text (see the module docstring)."""
    analyzed = secret
    if len(analyzed) < 20 and ("\n" in analyzed or "\r" in analyzed):
        analyzed = analyzed.replace("\n", "").replace("\r", "")
    if not analyzed:  # no tokens
        return False
    # The word test first: it needs no vocabulary, and most text fails it.
    if dictionary_words(analyzed, 5):
        return True
    tokens = token_count(analyzed)
    threshold = 2.5
    if len(analyzed) < 12:
        threshold = 2.1 if dictionary_words(analyzed, 4) else 2.5
    return len(analyzed) / tokens >= threshold


def _get(mapping: Any, key: str, default: Any = None) -> Any:
    return mapping.get(key, default) if isinstance(mapping, dict) else default


_FUNCTIONS: dict[str, Any] = {"entropy": entropy, "matchesAny": matches_any, "containsAny": contains_any,
                              "findMatch": find_match, "failsTokenEfficiency": fails_token_efficiency,
                              "len": len, "max": max, "min": min, "get": _get}
_NAMESPACE = {**_FUNCTIONS, "filter": SimpleNamespace(**_FUNCTIONS), "True": True, "False": False, "None": None}

# -- expr-lang -> Python ----------------------------------------------------------------------------------
_TOKEN = re.compile(r"""
    (?P<space>\s+) | (?P<comment>//[^\n]*) | (?P<raw>`[^`]*`) | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<num>\d+(?:\.\d+)?) | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|\?\?|==|!=|<=|>=|[-+*/%<>!()\[\]{},.:;=])
""", re.VERBOSE)
_WORDS = {"true": "True", "false": "False", "nil": "None", "in": " in "}


def _go_string(literal: str) -> str:
    """The value of a double-quoted expr string: \\\\, \\", \\n, \\t, \\r; any other escape is kept."""
    body = literal[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}.get(
        m.group(1), m.group(0)), body)


def _python(source: str) -> str:
    """The body of a Python function for an expr-lang filter (see compile_filter)."""
    out: list[str] = []
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if not match:
            raise FilterSyntaxError(f"unexpected {source[pos:pos + 20]!r}")
        pos = match.end()
        kind, text = match.lastgroup, match.group(0)
        if kind in ("space", "comment"):
            out.append(" ")
        elif kind == "raw":
            out.append(repr(text[1:-1]))
        elif kind == "str":
            out.append(repr(_go_string(text)))
        elif kind == "num":
            out.append(text)
        elif kind == "name":
            out.append("\x00let " if text == "let" else _WORDS.get(text, text))
        else:
            out.append({"||": " or ", "&&": " and ", "??": " or ", "!": " not ", ";": "\x00;"}.get(text, text))
    code = "".join(out)
    # let NAME = EXPR; ... EXPR  ->  NAME = (EXPR) / return (EXPR)
    parts = code.split("\x00")
    body, rest = [], ""
    for part in parts:
        if part.startswith("let "):
            rest = part
        elif part.startswith(";"):
            name, _, value = rest[4:].partition("=")
            body.append(f"    {name.strip()} = ({value.strip()})")
            rest = part[1:]
        else:
            rest += part
    return "\n".join(body + [f"    return bool({rest.strip()})"])


def compile_filter(source: str, name: str = "filter") -> Callable[[dict, dict], bool]:
    """A Python function (finding, attributes) -> bool for an expr-lang filter of Betterleaks' rule set
    (module docstring): True means the finding is not a secret. `finding` holds "secret", "match",
    "line", "fragment_raw", "match_start_idx", "match_end_idx", "match_line_start_idx",
    "match_line_end_idx". Raises FilterSyntaxError for an expression outside the subset."""
    body = _python(source)
    code = f"def _filter(finding, attributes):\n{body}\n"
    try:
        compiled = compile(code, f"<{name}>", "exec")
    except SyntaxError as exc:
        raise FilterSyntaxError(f"{name}: {exc.msg}: {code}") from None
    function = next(c for c in compiled.co_consts if hasattr(c, "co_names"))
    unknown = set(function.co_names) - set(_NAMESPACE) - {"bool"}
    if unknown:
        raise FilterSyntaxError(f"{name}: unknown names {sorted(unknown)}")
    scope: dict[str, Any] = {"__builtins__": {"bool": bool}, **_NAMESPACE}
    exec(compiled, scope)  # noqa: S102 - the code is our own translation of a vendored rule file
    return scope["_filter"]
