"""gitleaks' rule set, run in Python: vendor key formats and the keyword-and-entropy generic rule.

The rules are gitleaks' own default configuration (assets/gitleaks.toml, MIT; see assets/README.md),
read with tomllib and applied as gitleaks applies them (its detect package):
- a rule runs on a line only when one of its keywords occurs in it (case-insensitively);
- the secret is the rule's `secretGroup`, else the first non-empty group, else the whole match;
- a rule with an `entropy` floor drops a secret whose Shannon entropy (bits per character) is not
  above it, and a generic rule also drops one without a digit;
- a rule's allowlists (regexes on the secret, the match or the line; stopwords contained in the
  secret; "OR" or "AND" of them) and the global allowlist drop what they match.
Go's regex syntax is translated where Python's differs (a `(?i)` flag in mid-pattern, `\\z`, POSIX
classes). Path and commit allowlists do not apply to prose and are ignored.

find(line) -> [(kind, (start, end))]: the kind is the rule's id in words ("Generic Api Key"), the span
is the secret's in `line`. Only spans and kinds leave this module, never a value.
"""

from __future__ import annotations

import math
import re
import threading
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

RULES_FILE = Path(__file__).with_name("assets") / "gitleaks.toml"
# Cairn's own rules, in gitleaks' format: a credential introduced in prose, hyphenated vendor prefixes.
OWN_RULES_FILE = RULES_FILE.with_name("cairn-rules.toml")
_POSIX = {"[:alnum:]": "a-zA-Z0-9", "[:alpha:]": "a-zA-Z", "[:digit:]": "0-9", "[:xdigit:]": "0-9a-fA-F",
          "[:upper:]": "A-Z", "[:lower:]": "a-z", "[:space:]": r"\s", "[:word:]": r"\w", "[:punct:]": r"!-/:-@\[-`{-~"}


@dataclass
class _Allowlist:
    target: str  # secret | match | line
    regexes: list[re.Pattern]
    stopwords: tuple[str, ...]
    every: bool  # condition AND: all of its (non-empty) checks must match

    def allows(self, secret: str, match: str, line: str) -> bool:
        text = {"match": match, "line": line}.get(self.target, secret)
        checks = []
        if self.regexes:
            checks.append(any(r.search(text) for r in self.regexes))
        if self.stopwords:
            low = secret.lower()
            checks.append(any(w in low for w in self.stopwords))
        if not checks:
            return False
        return all(checks) if self.every else any(checks)


@dataclass
class Rule:
    id: str
    regex: re.Pattern
    secret_group: int = 0
    entropy: float = 0.0
    keywords: tuple[str, ...] = ()
    allowlists: list[_Allowlist] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return " ".join(w.capitalize() for w in self.id.split("-"))


def go_regex(pattern: str) -> str:
    """A Go (RE2) pattern in Python's syntax: `(?i)` after the start becomes a `(?i:...)` group to the
    end of its enclosing group (Python allows global flags only at the start), `\\z` is `\\Z`, and
    POSIX classes are spelled out."""
    pattern = pattern.replace(r"\z", r"\Z")
    for posix, spelled in _POSIX.items():
        pattern = pattern.replace(posix, spelled)
    while True:
        at = pattern.find("(?i)", 1)
        if at < 0:
            return pattern
        end = _group_end(pattern, at + 4)
        pattern = pattern[:at] + "(?i:" + pattern[at + 4:end] + ")" + pattern[end:]


def _group_end(pattern: str, i: int) -> int:
    """The index of the `)` closing the group that encloses position i (len(pattern) at top level)."""
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
        elif c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return i


def _allowlist(spec: dict) -> _Allowlist:
    return _Allowlist(target=spec.get("regexTarget", "secret"),
                      regexes=[re.compile(go_regex(r)) for r in spec.get("regexes", ())],
                      stopwords=tuple(w.lower() for w in spec.get("stopwords", ())),
                      every=spec.get("condition", "OR").upper() == "AND")


def load(*paths: Path) -> tuple[list[Rule], _Allowlist]:
    """The rules with a regex in these files (default: gitleaks' and Cairn's), and the first file's
    global allowlist. Raises re.error if a pattern does not translate, OSError, tomllib.TOMLDecodeError."""
    configs = []
    for path in paths or (RULES_FILE, OWN_RULES_FILE):
        with open(path, "rb") as handle:
            configs.append(tomllib.load(handle))
    rules = []
    for spec in (spec for config in configs for spec in config["rules"]):
        if "regex" not in spec:
            continue  # a path-only rule (a file name that is a secret): nothing to find in text
        lists = [_allowlist(a) for a in spec.get("allowlists", ())]
        rules.append(Rule(id=spec["id"], regex=re.compile(go_regex(spec["regex"])),
                          secret_group=spec.get("secretGroup", 0), entropy=spec.get("entropy", 0.0),
                          keywords=tuple(k.lower() for k in spec.get("keywords", ())), allowlists=lists))
    return rules, _allowlist(configs[0].get("allowlist", {}))


def entropy(text: str) -> float:
    """Shannon entropy of `text`, in bits per character (gitleaks' shannonEntropy)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


class RuleSet:
    """Compiled rules and a keyword index: one regex finds which keywords a line holds, so only the
    rules that could match run (most lines of prose run none)."""

    def __init__(self, rules: list[Rule], global_allow: _Allowlist):
        self.rules, self.global_allow = rules, global_allow
        self.always = [r for r in rules if not r.keywords]
        self.by_keyword: dict[str, list[Rule]] = {}
        for rule in rules:
            for word in rule.keywords:
                self.by_keyword.setdefault(word, []).append(rule)
        words = sorted(self.by_keyword, key=len, reverse=True)
        # Overlapping keywords ("key" inside "apikey"): a lookahead finds each at every position.
        self.keyword_re = re.compile("(?=(" + "|".join(map(re.escape, words)) + "))")
        self._prefixes = {w: [v for v in words if v != w and v.startswith(w)] for w in words}

    def candidates(self, line: str) -> list[Rule]:
        low = line.lower()
        found = {m.group(1) for m in self.keyword_re.finditer(low)}
        # The alternation takes the longest keyword at a position; shorter ones there count too.
        found |= {w for w in self._prefixes for longer in found if w != longer and longer.startswith(w)}
        seen, out = set(), []
        for rule in self.always + [r for w in found for r in self.by_keyword.get(w, ())]:
            if id(rule) not in seen:
                seen.add(id(rule))
                out.append(rule)
        return out

    def find(self, line: str) -> list[tuple[str, tuple[int, int]]]:
        out = []
        for rule in self.candidates(line):
            for match in rule.regex.finditer(line):
                group = rule.secret_group
                if not group and match.lastindex:
                    group = next((g for g in range(1, match.lastindex + 1) if match.group(g)), 0)
                secret = match.group(group) or ""
                if not secret:
                    continue
                if rule.entropy and (entropy(secret) <= rule.entropy
                                     or (rule.id.startswith("generic") and not any(c.isdigit() for c in secret))):
                    continue
                if self.global_allow.allows(secret, match.group(0), line) or any(
                        a.allows(secret, match.group(0), line) for a in rule.allowlists):
                    continue
                out.append((rule.kind, match.span(group)))
        return out


_rules: RuleSet | None = None
_lock = threading.Lock()


def rules() -> RuleSet:
    """The bundled rule set, compiled once per process."""
    global _rules
    with _lock:
        if _rules is None:
            _rules = RuleSet(*load())
    return _rules


def find(line: str) -> list[tuple[str, tuple[int, int]]]:
    """(kind, span of the secret) for each secret gitleaks' rules find in `line`."""
    return rules().find(line)
