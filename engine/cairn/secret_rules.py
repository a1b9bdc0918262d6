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

import functools
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
    pattern: str  # translated to Python's syntax; compiled on first use (most rules never run)
    secret_group: int = 0
    entropy: float = 0.0
    keywords: tuple[str, ...] = ()
    allowlists: list[_Allowlist] = field(default_factory=list)

    @functools.cached_property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern)

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
    global allowlist. A rule's pattern is compiled when it first runs (Rule.regex). Raises OSError,
    tomllib.TOMLDecodeError."""
    configs = []
    for path in paths or (RULES_FILE, OWN_RULES_FILE):
        with open(path, "rb") as handle:
            configs.append(tomllib.load(handle))
    rules = []
    for spec in (spec for config in configs for spec in config["rules"]):
        if "regex" not in spec:
            continue  # a path-only rule (a file name that is a secret): nothing to find in text
        lists = [_allowlist(a) for a in spec.get("allowlists", ())]
        rules.append(Rule(id=spec["id"], pattern=go_regex(spec["regex"]),
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
    """(kind, span of the secret) for each secret gitleaks' rules, Cairn's, and the prose rule
    (prose_findings) find in `line`."""
    return rules().find(line) + prose_findings(line)


# -- a credential introduced in prose ------------------------------------------------------------------
# gitleaks' generic rule wants an assignment (`key = ...`); people also write "the key for the sandbox
# is ...", "password DQOR&...", "Das Passwort ... lautet ...". The words (English and the languages
# users most often write to Claude in) and the introducers are Cairn's; what follows must look like
# a credential (credential_value), which is where the look-alikes (hashes, ids, versions, paths,
# placeholders, code) are turned away.
_WORDS = (r"api[ _-]?keys?|keys?|tokens?|secrets?|passwords?|passwd|pass|passphrases?|pwd|credentials?|creds"
          r"|auth|bearer|signing[ _-]?key|seed|passwort|kennwort|schlüssel|api-schlüssel|mot de passe|jeton"
          r"|clé|contraseña|contrasena|clave|senha|chave|chiave|parola d'ordine|wachtwoord|sleutel|hasło|haslo|klucz"
          r"|şifre|sifre|parola|anahtar|lösenord|nyckel|adgangskode|salasana|mật khẩu|пароль|ключ|токен|authtoken"
          r"|κωδικός|סיסמה|كلمة المرور|كلمة السر|पासवर्ड|login|logins")
_CJK_WORDS = r"パスワード|暗証番号|キー|トークン|密码|密碼|令牌|密钥|密鑰|口令|비밀번호|암호|토큰|키"
# A word on its own, or the last part of a name: DB_PASSWORD, apiKey, client-secret.
_WORD = re.compile(r"(?i)(?:(?<![a-z0-9])|(?-i:(?<=[a-z])(?=[A-Z])))(?:" + _WORDS + r")(?![a-z0-9])|(?:"
                   + _CJK_WORDS + ")")
# A candidate value in the clause after the word: preceded by a space or an introducer (":", "=", a
# CJK particle), up to the end of the clause (", " "; " ". " or 100 characters).
_CANDIDATE = re.compile(r"""(?:(?<=[\s:=：は是为為>「『“])|(?<=\s=))['"`]?"""
                        r"""([^\s'"`,;()<>\[\]{}|「」『』“”，。、]{8,300})""")
_CLAUSE_END = re.compile(r"[,;.?!]\s|[，。；]|\n|$")
# The value before the word: "Quartz772+Falcon is the password for ...", "use X as the password".
_BEFORE = re.compile(r"(?i)(?:^|\s)['\"]?([^\s'\"`,;()<>\[\]{}|]{8,300})['\"]?\s+(?:is|as)\s+(?:the|our|my|your)\s+"
                     r"(?:[\w-]+\s+){0,2}?(?:password|passphrase|passwd|token|secret|api key)\b")
# A quoted passphrase of words: `the passphrase for the signing key is "juniper glacier velvet"`.
_PASSPHRASE = re.compile(r"(?i)\b(?:password|passphrase|passwort)\b[^\n]{0,60}?\b(?:is|ist|lautet|:)\s*"
                         r"(['\"]([a-z]+(?:[ -][a-z]+){2,})['\"]|([a-z]+(?:-[a-z]+){3,}))(?![\w-])")
# Words that make a hex or base64 string a hash, an id or a public key rather than a credential.
_NOT_A_SECRET_CONTEXT = re.compile(
    r"(?i)\b(?:md5|sha-?(?:1|224|256|384|512)|hash(?:es|ed)?|digest|checksum|commit|fingerprint|etag|integrity"
    r"|trace[ _-]?id|request[ _-]?id|uuid|public key|BEGIN PUBLIC|BEGIN CERTIFICATE|ssh-(?:rsa|ed25519|dss)"
    r"|ecdsa-sha2)\b")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_PLACEHOLDER = re.compile(
    r"(?i:x{3,}|\*{3,}|\.{3}|your[-_ ]|-here\b|placeholder|changeme|redacted)|example|sample|dummy|"
    r"^(?i:os\.environ|os\.getenv|process\.env|system\.getenv|env\[|getenv|environ|config\.|settings\.|secrets\.)")
# Another name's assignment, in one case: max_tokens=1024, MAX_TOKENS=4096k (not sMOhx=1kk%6rf, a password).
_ASSIGNMENT = re.compile(r"(?:[a-z_][a-z0-9_.]{2,}|[A-Z_][A-Z0-9_.]{2,}|[A-Za-z]+(?:[-_][A-Za-z]+)+)=")
_NOT_A_VALUE = re.compile(
    r"(?i)^(?:v?\d+(?:\.\d+)+(?:[-+.][\w.]+)?"  # a version
    r"|\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:z|[+-]\d{2}:?\d{2})?)?[.,]?"  # a date or time
    r"|[0-9]+(?:\.[0-9]+)?[a-z]{0,3}"  # a number with a unit
    r"|(?:arn|urn):.*|[/~.].*|[a-z][a-z0-9+.-]*://.*|[\w.+-]+@[\w-]+\.[\w.-]+"  # a path, a URL, an e-mail address
    r"|(?-i:[a-z0-9_.-]+(?:/[a-z0-9_.-]*)+)"  # a relative path
    r"|[\w-]+(?:\.[a-z]{1,5})+"  # a file name or a host name
    r")$")


def credential_value(value: str, before: str) -> bool:
    """Whether `value`, introduced by a credential word in `line`, looks like a credential: not a
    placeholder, a code reference, a version, a date, a number, a path, a URL, a file or host name;
    no UUID in it; not after words about hashes, ids or public keys (in `before`, the text from
    the credential word, or 60 characters, to the value); and made like a
    secret: letters with digits or symbols, or a long token of high entropy."""
    value = value.rstrip(".,:!?")
    if len(value) < 8 or _PLACEHOLDER.search(value) or _NOT_A_VALUE.match(value) or _UUID.search(value):
        return False
    if value.startswith(("$", "%", "@", "#", "&", "^")) or value.endswith("="*3):
        return False
    if _NOT_A_SECRET_CONTEXT.search(before) or _ASSIGNMENT.match(value):
        return False  # a hash, an id or a public key; another name's assignment (max_tokens=1024 temperature=0.2)
    return random_looking(value)


_STRONG_SYMBOLS = frozenset("!@#$%^&*+=~?")


def _class(c: str) -> int:
    return 0 if c.islower() else 1 if c.isupper() else 2 if c.isdigit() else 3


def random_looking(value: str) -> bool:
    """Whether `value` is made like a password or a generated token rather than a name: letters and
    digits with a symbol a name never holds (`Meadow314$Glacier`); or upper and lower case and
    digits, mostly not in words (`M0ssy_62W1l`, not `PasswordPolicyV2` or `Store2Backend`); or,
    from 20 characters, hex, base32 or base62 of high entropy that is not words joined
    (`17ef1844...`, not `userId2024AccountBalance`). The thresholds are Cairn's, set on the dev
    split of tests/data/credentials."""
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    if not letters or len(value) < 8 or re.search(r":\d{2,5}$", value):  # a host:port
        return False
    if digits and _STRONG_SYMBOLS.intersection(value):
        return True
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    # Characters in words: a lower-case run of 3 or more, with its capital (camelCase, snake_case).
    wordy = sum(len(w) for w in _WORDLIKE.findall(value)) / len(value)
    if mixed and digits and len(value) >= 10 and wordy < 0.6:
        return True
    return len(value) >= 20 and (digits or mixed) and wordy < 0.4 and entropy(value) >= 3.3


_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}")


def prose_findings(line: str) -> list[tuple[str, tuple[int, int]]]:
    """(kind, span) of each credential introduced in prose in `line`: every candidate in the clause
    after a credential word that credential_value accepts, a value before "is the password", and a
    quoted or hyphenated passphrase."""
    spans = set()
    for word in _WORD.finditer(line):
        clause = line[word.end():word.end() + 100]
        clause = clause[:_CLAUSE_END.search(clause).start()]
        for match in _CANDIDATE.finditer(line, word.end(), word.end() + len(clause)):
            value = match.group(1).rstrip(".,:!?")
            if credential_value(value, line[max(0, word.start() - 60):match.start(1)]):
                spans.add((match.start(1), match.start(1) + len(value)))
    for match in _BEFORE.finditer(line):
        if credential_value(match.group(1), line[max(0, match.start(1) - 60):match.end()]):
            spans.add(match.span(1))
    for match in _PASSPHRASE.finditer(line):
        if not _NOT_A_SECRET_CONTEXT.search(line, max(0, match.start() - 60), match.end()):
            spans.add(match.span(2 if match.group(2) else 3))
    return [("Credential In Prose", span) for span in sorted(spans)]


def placeholder(value: str) -> bool:
    """Whether a detected value is a placeholder or a reference rather than a secret: `xxx`,
    `***`, `your-token-here`, `<...>`, an all-capitals name (`USER:PASSWORD`), or code that reads
    the secret from elsewhere (`os.environ[...]`, `process.env.X`)."""
    return bool(_PLACEHOLDER.search(value) or re.fullmatch(r"[A-Z][A-Z_]*", value) or value.startswith(("<", "$")))
