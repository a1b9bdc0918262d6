"""Secret-detection rule sets, run in Python: Betterleaks', Microsoft's and Cairn's.

The rules (see assets/README.md for their sources, licences and how to refresh them):
- Betterleaks' default configuration (assets/betterleaks.toml, MIT): ~410 vendor formats and its
  generic keyword rule, each with an expr-lang `filter` that drops what is not a secret (entropy
  floors, placeholders, known public keys, Betterleaks' token-efficiency test; rule_filters.py) and a
  global filter;
- Microsoft security-utilities' high-confidence identifiable key formats
  (assets/microsoft-high-confidence.json, MIT): 75 formats with a fixed signature, the secret in the
  pattern's `refine` group. Their checksums (Marvin32 in the common annotated keys) are not verified:
  a key pasted by hand or made up for a test is as much to be kept out of a store as a valid one, and
  the signature alone makes the match specific;
- Cairn's own rules in gitleaks' format (assets/cairn-rules.toml), a credential introduced in prose or
  given beside an account's name or named by a trailing comment (prose_findings), and a credential
  whose name and value stand on different lines (secret_blocks.py, run on a whole text);
- gitleaks' frozen default rule set (assets/gitleaks.toml) is kept for bench/secrets_compare.py only.

Rules are applied as gitleaks and Betterleaks apply them (their detect packages):
- a rule runs on a text only when one of its keywords occurs in it (case-insensitively);
- the secret is the rule's `secretGroup` (a number, or Microsoft's group name), else the first
  non-empty group, else the whole match;
- a finding that a rule's filter (or its legacy entropy floor and allowlists) or its file's global
  filter rejects is dropped.
Go's regex syntax is translated where Python's differs (rule_filters.go_regex). Path and commit
conditions do not apply to prose and are ignored. A rule that only names a resource a secret belongs
to (Betterleaks' `skipReport` parts: a client id, a host) reports nothing; `required` companions are
honoured only in the faithful Betterleaks mode the bench uses (RuleSet(composite=True)).

find(line) -> [(kind, (start, end))]: the kind is the rule's id in words ("Generic Api Key"), the span
is the secret's in `line`. Only spans and kinds leave this module, never a value.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .rule_filters import compile_filter, entropy, fails_token_efficiency, go_regex
from .secret_values import (PLACEHOLDER, SEQUENCE, base64_like, password_like, placeholder, public_key, random_letters,
                            random_looking, reference_lead, repetitive, setting_pair, short_random, stated_password)
from .secret_words import PASSWORD_ABBREVIATIONS, PASSWORD_WORDS, SUFFIX, alternation

ASSETS = Path(__file__).parent.parent / "assets"
BETTERLEAKS_FILE = ASSETS / "betterleaks.toml"
MICROSOFT_FILE = ASSETS / "microsoft-high-confidence.json"
GITLEAKS_FILE = ASSETS / "gitleaks.toml"
# Cairn's own rules, in gitleaks' format: what people paste in prose and commands that the vendored
# sets, written for files, do not find.
OWN_RULES_FILE = ASSETS / "cairn-rules.toml"
DEFAULT_FILES = (BETTERLEAKS_FILE, MICROSOFT_FILE, OWN_RULES_FILE)
# Parts that name a resource, no secret: Betterleaks' skipReport ones; OAuth client ids (RFC 6749 2.2, Cairn's scrub).
_IDENTIFIER_PART = re.compile(r"-(?:id|url|host|name|address)(?:\.\d+)?$")

__all__ = ["Finding", "Rule", "RuleSet", "entropy", "fails_token_efficiency", "find", "go_regex", "load", "look_alike",
           "rules"]


class Finding(NamedTuple):
    kind: str
    span: tuple[int, int]
    rule: str


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


# A filter of one finding: True drops it. It reads the finding as Betterleaks' filters do (rule_filters).
FindingFilter = Callable[[dict[str, Any]], bool]


@dataclass
class Rule:
    id: str
    pattern: str  # in Python's syntax; compiled on first use (most rules never run)
    secret_group: int | str = 0
    keywords: tuple[str, ...] = ()
    filters: list[FindingFilter] = field(default_factory=list)
    skip_report: bool = False
    required: tuple[tuple[str, int | None], ...] = ()  # (rule id, within lines)
    source: str = ""

    @functools.cached_property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern)

    @property
    def kind(self) -> str:
        return " ".join(w.capitalize() for w in re.split(r"[-.]", self.id) if not w.isdigit())

    @property
    def generic(self) -> bool:
        return self.id.startswith("generic")


def _allowlist(spec: dict) -> _Allowlist:
    return _Allowlist(target=spec.get("regexTarget", "secret"),
                      regexes=[re.compile(go_regex(r)) for r in spec.get("regexes", ())],
                      stopwords=tuple(w.lower() for w in spec.get("stopwords", ())),
                      every=spec.get("condition", "OR").upper() == "AND")


def _legacy_filter(floor: float, generic: bool, lists: list[_Allowlist]) -> FindingFilter:
    """gitleaks' entropy floor (a generic rule's secret also needs a digit) and allowlists, as a filter."""
    def rejects(f: dict[str, Any]) -> bool:
        secret = f["secret"]
        if floor and (entropy(secret) <= floor or (generic and not any(c.isdigit() for c in secret))):
            return True
        return any(a.allows(secret, f["match"], f["line"]) for a in lists)
    return rejects


class _Attributes(dict):
    """A finding's attributes (a file's path, a commit ...): none in prose; a missing one reads as nil."""

    def __missing__(self, key: str) -> None:
        return None


_NO_ATTRIBUTES = _Attributes()


def _expr_filter(source: str, name: str, *, lazy: bool = True) -> FindingFilter:
    """A filter expression as a FindingFilter, translated when it first runs (most rules never run;
    tests/engine/test_secret_rules.py translates them all, lazy=False)."""
    if not lazy:
        program = compile_filter(source, name)
        return lambda f: program(f, _NO_ATTRIBUTES)
    compiled: list[Callable[[dict, dict], bool]] = []

    def run(f: dict[str, Any]) -> bool:
        if not compiled:
            compiled.append(compile_filter(source, name))
        return compiled[0](f, _NO_ATTRIBUTES)
    return run


def load_toml(path: Path, *, lazy: bool = True) -> list[Rule]:
    """The rules with a regex of a gitleaks- or Betterleaks-format file, its global allowlist or filter
    applied to each. Raises OSError, tomllib.TOMLDecodeError, and (lazy=False: at load; else when the
    rule first runs) rule_filters.FilterSyntaxError."""
    with open(path, "rb") as handle:
        config = tomllib.load(handle)
    shared: list[FindingFilter] = []
    if config.get("allowlist"):
        shared.append(_legacy_filter(0.0, False, [_allowlist(config["allowlist"])]))
    if config.get("filter"):
        shared.append(_expr_filter(config["filter"], f"{path.name} global filter", lazy=lazy))
    out = []
    for spec in config["rules"]:
        if "regex" not in spec:
            continue  # a path-only rule (a file name that is a secret): nothing to find in text
        own: list[FindingFilter] = []
        if spec.get("entropy") or spec.get("allowlists"):
            own.append(_legacy_filter(spec.get("entropy", 0.0), spec["id"].startswith("generic"),
                                      [_allowlist(a) for a in spec.get("allowlists", ())]))
        if spec.get("filter"):
            own.append(_expr_filter(spec["filter"], spec["id"], lazy=lazy))
        required = tuple((r["id"], r.get("withinLines")) for r in spec.get("required", ()))
        out.append(Rule(id=spec["id"], pattern=go_regex(spec["regex"]), secret_group=spec.get("secretGroup", 0),
                        keywords=tuple(k.lower() for k in spec.get("keywords", ())), filters=shared + own,
                        skip_report=spec.get("skipReport", False), required=required, source=path.name))
    return out


def load_microsoft(path: Path) -> list[Rule]:
    """Microsoft's high-confidence formats (a JSON list of {Id, Name, Pattern, Signatures}). Raises
    OSError, ValueError."""
    out = []
    for spec in json.loads(path.read_text(encoding="utf-8")):
        pattern = spec["Pattern"]
        out.append(Rule(id=re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", spec["Name"]).lower(), pattern=pattern,
                        secret_group="refine" if "(?P<refine>" in pattern else 0,
                        keywords=tuple(s.lower() for s in spec.get("Signatures", ())),
                        source=path.name))
    return out


def load(*paths: Path, lazy: bool = True) -> list[Rule]:
    """The rules of these files (default: Betterleaks', Microsoft's and Cairn's), each read by its
    format (.json: Microsoft's; .toml: gitleaks' or Betterleaks')."""
    return [rule for path in paths or DEFAULT_FILES
            for rule in (load_microsoft(path) if path.suffix == ".json" else load_toml(path, lazy=lazy))]


# -- running the rules --------------------------------------------------------------------------------------
class RuleSet:
    """Compiled rules and a keyword index: one regex finds which keywords a text holds, so only the
    rules that could match run (most lines of prose run none). composite=True applies Betterleaks'
    skipReport and required semantics as Betterleaks does (the bench's faithful mode); by default a
    skipReport part that names a resource reports nothing and the others report alone."""

    def __init__(self, rules: list[Rule], *, composite: bool = False, faithful: bool | None = None):
        self.composite = composite
        # faithful: spans as gitleaks and Betterleaks report them (the bench's "alone" detectors); else a
        # fragment group is widened to its match (run). Default: faithful in the composite mode.
        self.faithful = composite if faithful is None else faithful
        self.rules = rules
        self.by_id = {r.id: r for r in rules}
        self.order = {id(r): i for i, r in enumerate(rules)}
        self.always = [r for r in rules if not r.keywords]
        self.by_keyword: dict[str, list[Rule]] = {}
        for rule in rules:
            for word in rule.keywords:
                self.by_keyword.setdefault(word, []).append(rule)
        words = sorted(self.by_keyword, key=len, reverse=True)
        # Overlapping keywords ("key" inside "apikey"): a lookahead finds each at every position.
        self.keyword_re = re.compile("(?=(" + "|".join(map(re.escape, words)) + "))")
        # The shorter keywords each keyword starts with ("key" for "keyvault"), found with it.
        self._shorter = {w: [v for v in words if v != w and w.startswith(v)] for w in words}

    def candidates(self, text: str) -> list[Rule]:
        low = text.lower()
        found = {m.group(1) for m in self.keyword_re.finditer(low)}
        # The alternation takes the longest keyword at a position; shorter ones there count too.
        found |= {w for longer in found for w in self._shorter[longer]}
        chosen = {id(r): r for r in self.always + [r for w in found for r in self.by_keyword.get(w, ())]}
        # In the order of the files (the vendored sets before Cairn's): where two rules find the same
        # span, the first names it.
        return sorted(chosen.values(), key=lambda r: self.order[id(r)])

    def reports(self, rule: Rule) -> bool:
        if self.composite:
            return not rule.skip_report
        return not ((rule.skip_report or not self.faithful and rule.id.endswith("-client-id"))
                    and _IDENTIFIER_PART.search(rule.id))

    def run(self, rule: Rule, text: str) -> list[Finding]:
        """The findings of one rule in `text`, its filters applied."""
        out = []
        for match in rule.regex.finditer(text):
            group: int | str = rule.secret_group
            implicit = not group and match.lastindex is not None
            if not group and match.lastindex:
                group = next((g for g in range(1, match.lastindex + 1) if match.group(g)), 0)
            secret = match.group(group) or ""
            if not secret:
                continue
            if rule.filters:
                start, end = match.span()
                line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
                ends = [i for i in (text.find("\n", end), text.find("\r", end)) if i >= 0]
                line_end = min(ends) if ends else len(text)
                finding = {"secret": secret, "match": match.group(0), "line": text[line_start:line_end],
                           "fragment_raw": text, "match_start_idx": start, "match_end_idx": end,
                           "match_line_start_idx": line_start, "match_line_end_idx": line_end}
                if any(f(finding) for f in rule.filters):
                    continue
            # A first group that only repeats a fragment of a pattern with several (a UUID's "a3ef-" in a
            # Teams webhook URL) is not the secret to redact: the whole match is (not in the faithful mode).
            whole = (not self.faithful and implicit and rule.regex.groups > 1
                     and len(secret) < 8 <= len(match.group(0)))
            out.append(Finding(rule.kind, match.span(0 if whole else group), rule.id))
        return out

    def findings(self, text: str) -> list[Finding]:
        out = []
        cache: dict[str, list[Finding]] = {}
        for rule in self.candidates(text):
            if not self.reports(rule):
                continue
            found = self.run(rule, text)
            if found and self.composite and rule.required:
                found = [f for f in found if self._companions(rule, f, text, cache)]
            out += found
        return out

    def _companions(self, rule: Rule, finding: Finding, text: str, cache: dict[str, list[Finding]]) -> bool:
        line = text.count("\n", 0, finding.span[0])
        for rule_id, within in rule.required:
            other = self.by_id.get(rule_id)
            if other is None:
                return False
            if rule_id not in cache:
                cache[rule_id] = self.run(other, text)
            if not any(within is None or abs(text.count("\n", 0, f.span[0]) - line) <= within
                       for f in cache[rule_id]):
                return False
        return True

    def find(self, text: str) -> list[tuple[str, tuple[int, int]]]:
        return [(f.kind, f.span) for f in self.findings(text)]


_rules: RuleSet | None = None
_lock = threading.Lock()


def rules() -> RuleSet:
    """The bundled rule sets (DEFAULT_FILES), compiled once per process."""
    global _rules
    with _lock:
        if _rules is None:
            _rules = RuleSet(load())
    return _rules


def find(line: str) -> list[Finding]:
    """Each secret the bundled rules and the prose rule (prose_findings) find in `line`."""
    return rules().findings(line) + [Finding(kind, span, "credential-in-prose")
                                     for kind, span in prose_findings(line)]


# -- a credential introduced in prose ------------------------------------------------------------------
# gitleaks' generic rule wants an assignment (`key = ...`); people also write "the key for the sandbox
# is ...", "password DQOR&...", "Das Passwort ... lautet ...". The words (English and the languages
# users most often write to Claude in) and the introducers are Cairn's; what follows must look like
# a credential (credential_value), which is where the look-alikes (hashes, ids, versions, paths,
# placeholders, code) are turned away.
WORDS = (r"api[ _-]?keys?|key[ _-]?files?|keys?|secrets?|passwords?|passwd|pass|passphrases?|pwd|credentials?|creds"
          r"|tokens?|auth|bearer|signing[ _-]?key|seed|erlang[ ._-]?cookie|community[ _-]?string|pre-?shared[ _-]?key"
          r"|psk"
          r"|passwort|kennwort|schlüssel|api-schlüssel|mot de passe|jeton"
          r"|clé|contraseña|contrasena|clave|senha|chave|chiave|parola d'ordine|wachtwoord|sleutel|hasło|haslo|klucz"
          r"|şifre|sifre|parola|anahtar|lösenord|nyckel|adgangskode|salasana|mật khẩu|пароль|ключ|токен|authtoken"
          r"|κωδικός|סיסמה|كلمة المرور|كلمة السر|पासवर्ड|login|logins"
          # More of the most written languages: Czech/Slovak, Indonesian/Malay, Romanian, Hungarian,
          # Catalan, Norwegian/Danish, Finnish, Croatian/Serbian/Bosnian, Bulgarian, Ukrainian, Persian,
          # Urdu, Bengali, Tagalog, Swahili, Estonian, Latvian, Lithuanian, Slovenian, Icelandic, Greek.
          r"|heslo|hesla|klíč|klic|kata sandi|sandi|kunci|parolă|parola de acces|cheie|cheia|jelszó|jelszo|kulcs"
          r"|kulcsa|contrasenya|clau|passord|nøkkel|nøgle|avain|salasanan|lozinka|lozinku|ključ|kljuc|парола"
          r"|ключът|гасло|токена|رمز عبور|رمز|کلید|پاس ورڈ|পাসওয়ার্ড|গোপন শব্দ|susi|susian|nenosiri|ufunguo"
          r"|parool|võti|parole|atslēga|slaptažodis|raktas|geslo|lykilorð|κλειδί|συνθηματικό"
          # Short and plural forms people type: "pw", "pswd", "auth key", "identifiants", "Zugangsdaten".
          r"|pw|pws|" + "|".join(PASSWORD_ABBREVIATIONS) + r"|passcodes?|auth[ _-]?keys?|identifiants|credenciales"
          r"|credenziali|zugangsdaten|anmeldedaten|inloggegevens|dane logowania|учетные данные|учётные данные")
# Scripts written without spaces between words (Japanese, Chinese, Korean particles, Thai, Lao, Khmer).
CJK_WORDS = (r"パスワード|暗証番号|キー|トークン|密码|密碼|令牌|密钥|密鑰|口令|비밀번호|비번|암호|토큰|키"
              r"|รหัสผ่าน|รหัส|คีย์|โทเค็น|ລະຫັດຜ່ານ|ពាក្យសម្ងាត់")
# Words of the Germanic and Nordic languages that form compounds and take a suffixed article
# ("Datenbankpasswort", "lösenordet", "tilgangstokenet", "adgangskoden") and Turkish possessives
# ("şifresi", "parolası"): the word may stand inside a longer one.
_COMPOUND_WORDS = (r"passwort|kennwort|schlüssel|token|lösenord|nyckel|passord|nøkkel|nøgle|adgangskode|wachtwoord"
                   r"|sleutel|salasana|avain|şifre|sifre|parola|anahtar|heslo|jelszó|jelszo")
_COMPOUND = (r"[a-zäöüåæøß]*(?:" + _COMPOUND_WORDS + r")(?:et|en|er|erne|ene|a|n|s|si|sı|nız|niz|in|ın|u|ü|ot"
             r"|na|nak|a|m|ım|im|um|üm|ımız|imiz)?")  # ... and Turkish "my" (anahtarım, şifrem: -m, -ım)
# A word on its own, or the last part of a name: DB_PASSWORD, apiKey, client-secret; "PAT" (a
# personal access token) in capitals only.
# The word for a password in 73 languages (secret_words: Django's translations), with a short suffix.
_TRANSLATED = r"(?<![^\W\d_])(?:" + alternation(PASSWORD_WORDS) + ")" + SUFFIX + r"(?![^\W\d_])"
WORD = re.compile(r"(?i)(?:(?<![a-z0-9])|(?-i:(?<=[a-z])(?=[A-Z])))(?:" + WORDS + "|" + _COMPOUND
                   + r")(?![a-z0-9])|(?:" + CJK_WORDS + r")|(?<![A-Za-z0-9])PATs?(?![A-Za-z0-9])|" + _TRANSLATED)
# The words that name a password (not a key or token, which also name ids): after one, a value
# made like a password people choose ("Cobalt-tundra6469") is one.
PASSWORD_WORD = re.compile(
    r"(?i)pass|pw|pwd|psw|pssw|erlang[ ._-]?cookie"
    r"|kennwort|mot de passe|contrase|senha|parol|wachtwoord|has[łl]o|[şs]ifre|lösenord|adgangskode"
    r"|salasana|mật khẩu|пароль|парола|гасло|κωδικός|συνθηματικό|סיסמה|كلمة|पासवर्ड|heslo|sandi|jelsz|clau|lozink"
    r"|parool|parole|slaptažodis|geslo|lykilorð|identifiants|credencial|credenzial|zugangsdaten|パスワード|暗証番号"
    r"|密码|密碼|口令|비밀번호|암호|รหัสผ่าน|" + alternation(PASSWORD_WORDS))
# A candidate value in the clause after the word: preceded by a space or an introducer (":", "=", a
# CJK particle), up to the end of the clause (", " "; " ". " or 100 characters).
# A value right after a word in a script written without spaces ("密码Zx8q...", "パスワードKq8m...") counts too.
_CANDIDATE = re.compile(r"""(?:(?<=[\s:=：は是为為>「『“(\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af])|(?<=\s=))['"`]?"""
                        r"""([^\s'"`,;()<>\[\]{}|\x80-\U0010ffff]{8,300})""")  # ASCII: "1Passwordの保管庫" is a name
# ... and the same with a "," or ";" inside the token (not before a space, which ends a clause): a generated
# password's symbols (`Sk02+;uEW^z0xgGN`), tried beside the candidate cut at them (`key=...,endpoint=...`).
_PUNCTUATED = re.compile(_CANDIDATE.pattern.replace(r"""{}|\x80-\U0010ffff]{8,300})""",
                                                    r"""{}|\x80-\U0010ffff]|[,;](?=[^\s,;])){8,300})""")
                         .replace(r"""['"`]?([^""", r"""['"`]?((?:[^""", 1))
# A clause ends at a comma, a stop or a line's end; not at the comma of a quoted pair in code
# (`define('DB_PASSWORD', '...')`), nor at a comma before a copula that takes the subject up again ("the VPN
# password, it's ...", "le mot de passe du VPN, c'est ...", "das Passwort, das ist ...") or "the new one" ("şifresi
# değişti, yenisi: ...", "the password changed, the new one is ...", "поменял, теперь такой: ...").
_CLAUSE_END = re.compile(r"(?<!['\"])(?:,\s(?!(?:c['’]est|it['’]s|it is|that['’]s|that is|das ist|es ist|es|è|é|это"
                         r"|to je|ini|adalah)\s|(?:yenisi|the new one|new one|der neue|das neue|el nuevo|la nueva"
                         r"|le nouveau|il nuovo|новый|теперь|now|ahora|agora|jetzt)[\s:])|[;.?!]\s)|[，。；]|\n|$")
# Where the clause of a credential word starts: what was said before it is about something else
# ("commit 4f1e9c2: drop the AWS secret ...").
_BOUNDARY = re.compile(r"[,;.?!:]\s|[，。；：]|\n")
# Words just before a credential word that make it name something public ("PublicKey", "the site
# key", "publishable key", "the anon key") or made up for documentation ("the example key", "the
# jwt.io sample token", "the docs' example credentials"; not "for example").
NEGATING_BEFORE = re.compile(
    r"(?i)(?:(?:\b(?:public|publishable|pub|site|anon|client-side)|(?-i:(?<=[a-z])(?:Public|Pub|Site|Anon)))[\s_-]*"
    r"|(?<!for )\b(?:example|sample|dummy|documentation|docs'?|placeholder|test[ -]vectors?)\b[\s_-]*"
    r"(?:[\w.'-]+[\s_-]+){0,2})$")
# The words just before a value that name it as something else: "... has id prod/db-Xy12", "key name: X".
NAMES_BEFORE_VALUE = re.compile(r"(?i)(?:\b(?:id|ids|identifier|name|hash|digest|fingerprint|accessor|sha|commit"
                                 r"|version|prefix|rid|req_?id|(?:request|trace|correlation)[_-]id)\s*(?:is|=|:|of)?"
                                 # An object named by the value right after it: "for request 3f2b...".
                                 r"|\b(?:request|order|trace|user|account|customer|job|build|run|event))\s*['\"`]?$")
_HEX = re.compile(r"(?:0x)?[0-9a-fA-F]+")
# The words that introduce a credential's value ("the token is ...", "Das Passwort lautet ...", "hasło
# jest ...", "mật khẩu là ..."), in the languages of WORDS: one list for both tests below.
_INTRODUCERS = ("is are was ist lautet est es är er era è é to jest je on wynosi adalah ni là olan dır dir será sera"
                " wordt zijn jsou е это value equals reads ialah yra ir ay estas").split()
_INTRODUCER = (r"(?:[:=：]|\b(?:" + "|".join(_INTRODUCERS) + r")|[は是为為는은이가]|\s[-–—]|—)"
               r"(?:\s+(?:still|now|currently|just|also|actually|always))?\s*['\"`]?$")
# A value introduced as the credential: an introducer at the end of what stands between the word and
# the value, or nothing but punctuation.
_INTRODUCED = re.compile(r"^\W*$|" + _INTRODUCER)
# A value given as the credential: introduced, or right after the word (three words at most between).
_GIVEN = re.compile(r"^(?:\W*\w+){0,3}\W*$|" + _INTRODUCER)
# Keys their vendors document as safe in a web page or an app, named by the vendor or the kind of key
# rather than by format: Firebase's web config (firebase.google.com/docs/projects/api-keys), Mixpanel
# project tokens, Amplitude browser keys, Algolia search-only keys, reCAPTCHA / hCaptcha /
# Turnstile site keys, Datadog client tokens, client-side ids.
_PUBLIC_CONTEXT = re.compile(
    r"(?i)\b(?:firebase(?:Config)?|initializeApp|mixpanel|amplitude|analytics\.load|algolia\s+search"
    r"|search[ _-]?only|searchOnly|recaptcha|hcaptcha|data-sitekey|sitekey|client[ _-]?side|clientToken"
    r"|client[ _-]token|clientKey|measurement[ _-]?id"
    # Rollbar's post_client_item token, which its browser snippet (_rollbarConfig) ships in every page
    # (docs.rollbar.com/docs/access-tokens: "post_client_item ... only if the item has a client-side platform").
    r"|post_client_item|_rollbarConfig"
    # A value an RFC publishes as its sample or test vector ("per RFC 6455 the sample handshake sends ...").
    r"|RFC[ -]?\d{3,5}\b[^.;\n]{0,40}?\b(?:samples?|examples?|test[ -]vectors?|appendix))\b")
# ... unless a word after it says the key is the private one ("reCAPTCHA secret key"), or the sentence
# names the key a server's or an admin's ("the FCM server key from the Firebase console").
_PRIVATE_AFTER = re.compile(r"(?i)\b(?:secret|private|server|admin|service[ _-]?account)|(?<!\S)--token\b")
_PRIVATE_NAME = re.compile(r"(?i)\b(?:secret|private|server|admin)[ _-]?(?:api[ _-]?)?(?:keys?|tokens?)\b")
# Words between a credential word and its value that make the value something else than the
# credential: "GPG key id 0x...", "the token name is ...", "the password hash is ...".
NOT_THE_VALUE = re.compile(r"(?i)[\s_-]*(?:(?:has|have|with|its|is|the|an?)\s+){0,2}"
                            r"(?:id|ids|identifier|name|names|file|path|url|hash|hashes|hashed|digest|accessor"
                            r"|fingerprint|length|policy|field|prefix|format|type|scope|scopes|rotation)\b")
# The value before the word: "Quartz772+Falcon is the password for ...", "use X as the password".
_BEFORE = re.compile(r"(?i)(?:^|\s)['\"]?([^\s'\"`,;()<>\[\]{}|]{8,300})['\"]?\s+(?:is|as)\s+(?:the|our|my|your)\s+"
                     r"(?:[\w-]+\s+){0,2}?(?:password|passphrase|passwd|token|secret|api key)\b")
# A passphrase of words: `the passphrase for the signing key is "juniper glacier velvet 15"`,
# `... is saffron.canyon.ember.granite`; a wallet's seed phrase (12 to 24 words, BIP-39); a Google
# app password ("abcd efgh ijkl mnop"); a list of 2FA recovery codes.
_PASSPHRASE = re.compile(r"(?i)\b(?:password|passphrase|passwort|pass phrase)\b[^\n]{0,60}?\b(?:is|ist|lautet|:)\s*"
                         r"(['\"]((?:[a-z]+|\d+)(?:[ .-](?:[a-z]+|\d+)){2,})['\"]"
                         r"|([a-z]+(?:([-.])[a-z]+)(?:\4[a-z]+){2,}))(?![\w(\[-])")
_SEED_PHRASE = re.compile(r"(?i)\b(?:recovery|seed|mnemonic|backup|secret)[ _-]?(?:phrase|words|seed)?\b[^\n]{0,50}?"
                          r"[:=]\s*['\"]?((?-i:[a-z]{3,8})(?:\s+(?-i:[a-z]{3,8})){11,23})\b")
_APP_PASSWORD = re.compile(r"(?i)(?:\bapp[ -]?passwor[dt]\b[^\n]{0,60}?[:=]?\s|passw(?:or)?d\w*['\"]?\s*[:=]\s*['\"]?)"
                           r"((?-i:[a-z]{4} [a-z]{4} [a-z]{4} [a-z]{4}))\b")
_CODES = re.compile(r"(?i)\b(?:recovery|backup|2fa|mfa)[ _-]?codes?\b[^\n]{0,60}?:\s*"
                    r"((?:[a-z0-9]{4,6}-[a-z0-9]{4,6}|\d{8,10})(?:[ ,]+(?:[a-z0-9]{4,6}-[a-z0-9]{4,6}|\d{8,10}))+)")
# Words that make a hex or base64 string a hash, an id or a public key rather than a credential.
NOT_A_SECRET_CONTEXT = re.compile(
    r"(?i)\b(?:md5|sha-?(?:1|224|256|384|512)|hash(?:es|ed)?|digest|checksum|commit|fingerprint|etag|integrity"
    r"|trace[ _-]?id|request[ _-]?id|uuid|public[ _-]?key|BEGIN PUBLIC|BEGIN CERTIFICATE|ssh-(?:rsa|ed25519|dss)"
    r"|ecdsa-sha2|signature|accessor|nonce|sec-websocket-(?:key|accept))\b")
# Base64 of a file by its magic bytes (PNG, JPEG, GIF, PDF, gzip, zip, WebP/RIFF): encoded data.
_ENCODED_FILE = re.compile(r"iVBORw0KGgo|/9j/|R0lGODlh|R0lGODdh|JVBERi0|H4sI|UEsDB|UklGR")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
# Words after which a bare UUID is a credential (Heroku API keys, Postmark server tokens are UUIDs);
# after "key" it is a cache, idempotency or primary key.
_UUID_WORDS = re.compile(r"(?i)^(?:tokens?|secrets?|passwords?|passwd|pwd|api[ _-]?keys?|pass)$")
# ... and after a key named as one that grants access (Opsgenie's integration keys, PagerDuty's routing
# keys, Splunk's HEC tokens are UUIDs), not a cache's, a table's or a request's key.
_UUID_KEY_BEFORE = re.compile(r"(?i)\b(?:integration|routing|license|licence|access|secret|private|master|admin"
                              r"|server|service|auth|signing|ingest|hec|enrollment|enrolment|activation)[ _-]?keys?\b")
# Another name's assignment, in one case: max_tokens=1024, MAX_TOKENS=4096k (not sMOhx=1kk%6rf, a password).
_ASSIGNMENT = re.compile(r"(?:[a-z_][a-z0-9_.]{1,}|[A-Z_][A-Z0-9_.]{2,}|[A-Za-z]+(?:[-_][A-Za-z]+)+)=")
_NOT_A_VALUE = re.compile(
    r"(?i)^(?:v?\d+(?:\.\d+)+(?:[-+.][\w.]+)?"  # a version
    r"|\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:z|[+-]\d{2}:?\d{2})?)?[.,]?"  # a date or time
    r"|[0-9]+(?:\.[0-9]+)?[a-z]{0,3}"  # a number with a unit
    r"|(?:arn|urn):.*|(?:/|~[\w.-]*/|\.{1,2}/)[^\s]*|\.(?-i:[a-z])[\w.-]*"  # a path, a dotfile (not `.4_*xMi`)
    r"|[a-z][a-z0-9+.-]*://.*|[\w.+-]+@[\w-]+\.[\w.-]+"  # a URL, an e-mail address
    r"|(?-i:[a-z0-9_.-]+(?:/[a-z0-9_.-]*)+)"  # a relative path
    r"|(?-i:[a-z][a-z0-9_.-]*(?:/[a-z][a-z0-9_.-]*)+:[\w.-]{1,20})"  # an image's name and tag
    r"|[\w-]+(?:\.[a-z]{1,5})+"  # a file name or a host name
    r"|0x[0-9a-f]{8,40}"  # a key id, an address or a hash in hex (a private key in hex is 64 digits)
    r")$")


_OPTION_ASSIGNMENT = re.compile(r"--?[A-Za-z][\w-]*=")


def credential_value(value: str, before: str, word: str = "", *, introduced: bool = True) -> bool:
    """Whether `value`, introduced by the credential `word` (as written; "" when unknown), looks like
    a credential: not a placeholder, a code reference, a version, a date, a number, a path, a URL, a
    file or host name, a hex key id; no UUID in it (a bare one after a token or password word is
    one: Heroku and Postmark keys are UUIDs); not after words about hashes, ids or public keys (in
    `before`, the text of the word's clause up to the value); and made like a secret: letters with
    digits or symbols, or a long token of high entropy, or, after a word for a password, a password
    people choose (password_like) when the value is `introduced` as the password ("... is X",
    "...: X"), not merely later in the clause ("reset the password for user Alice2024")."""
    value = value.rstrip(".,:!?")
    if len(value) < 8 or look_alike(value, before, word):
        return False
    if _UUID.fullmatch(value):
        return True  # after a token or password word (look_alike)
    if _UUID.search(value):
        return False  # in prose, a name with a UUID in it is an id (order-6739d79c-...)
    if random_looking(value):
        return True
    if not introduced:
        return False
    if PASSWORD_WORD.search(word) and (password_like(value) or random_letters(value)):
        return True
    # Introduced as a password, a token or a secret (not a key, which also names ids): a generated value
    # shorter than random_looking's 20 characters (`y454z6czmze3`, `hpVfSRDdERxQ`, 16 hex digits).
    return bool(PASSWORD_WORD.search(word) or _SECRET_WORD.search(word)) and (
        short_random(value) or random_letters(value))


# Words for a token or a secret (with PASSWORD_WORD, the words after which a short generated value is one).
_SECRET_WORD = re.compile(r"(?i)token|secret|jeton|токен|令牌|토큰|トークン|geheimnis|segreto|secreto|segredo|sekret")


def look_alike(value: str, before: str, word: str = "") -> bool:
    """Whether `value`, after `before` (its clause up to it), is something a credential is mistaken
    for (credential_value's negative tests): a placeholder, a reference, a version, a date, a
    number, a path, a URL, a file or host name, a hex key id, a bare UUID (not after a token or
    password `word`), another name's assignment, or a value after words about hashes, ids or public
    keys."""
    if (PLACEHOLDER.search(value) or _ENCODED_FILE.match(value) or NOT_A_SECRET_CONTEXT.search(value)
            or repetitive(value) or SEQUENCE.search(value)):
        return True
    if _UUID.fullmatch(value):
        return (not (_UUID_WORDS.match(word.strip()) or PASSWORD_WORD.search(word) or _UUID_KEY_BEFORE.search(before))
                or bool(NOT_A_SECRET_CONTEXT.search(before)))
    if _NOT_A_VALUE.match(value) and not base64_like(value):
        return True
    if reference_lead(value) or value.endswith("="*3):
        return True
    if _OPTION_ASSIGNMENT.match(value):  # `--from-literal=password=...`: the command-line rules judge its value
        return True
    # A hash, an id or a public key; another name's assignment (max_tokens=1024 temperature=0.2).
    return bool(NOT_A_SECRET_CONTEXT.search(before) or _ASSIGNMENT.match(value))


def _clause_start(line: str, position: int) -> int:
    """Where the clause holding `position` starts (at most 80 characters back)."""
    start = max(0, position - 80)
    for match in _BOUNDARY.finditer(line, start, position):
        start = match.end()
    return start


# The word names a call or what a call is assigned to: set_api_key(, AzureKeyCredential(, jwtKey := []byte(.
_SENTENCE_END = re.compile(r"[.;!?]\s|[。；]|\n")


# A value shown as a sample, in a tutorial's own words: right after "will look (something) like (this):" (the
# shape of what the reader will get), or after "e.g." / "for example" in a sentence that first gave the
# form with placeholders (`mongodb://[username:password@]host...`, `<token>`). "e.g." alone is no sign:
# people write it before their own values ("a URL with basic auth, e.g. https://AC...:...@...").
_SHAPE_BEFORE = re.compile(r"(?i)\b(?:(?:will|would|should|might|may|could|can)\s+look\s+(?:something\s+|roughly\s+)?"
                           r"like|looks?\s+(?:something|roughly)\s+like"
                           # "The access token looks like this:", "bot token looks like ..." (sample_context: not
                           # "my token looks like")
                           r"|(?P<present>\blooks?\s+like))(?:\s+(?:this|that|so))?\s*[:,]?\s*[`'\"]?\S*$")
# Words that make "... looks like" a person's own value: "my token looks like", "ours looks like", "I get".
_FIRST_PERSON = re.compile(r"(?i)\b(?:my|mine|our|ours|i|i'm|i've|we|me)\b")
_SAMPLE_BEFORE = re.compile(r"(?i)(?:\be\.g\.|\bfor (?:example|instance)\b|\bsuch as\b)[\s:,]*[`'\"]?\S*$")
_TEMPLATE = re.compile(r"\[[^\]\n]*(?i:user|name|pass|host|key|token)[^\]\n]*\]|<[A-Za-z][\w -]*>|\{[A-Za-z][\w-]*\}"
                       r"|(?i:\b(?:user(?:name)?|login):(?:password|pass|pwd)\b)")


def sample_context(line: str, position: int) -> bool:
    """Whether the value at `position` of `line` is shown as a sample (_SHAPE_BEFORE, or _SAMPLE_BEFORE after
    a template in the same text, 200 characters back at most)."""
    before = line[max(0, position - 200):position]
    shape = _SHAPE_BEFORE.search(before)
    if shape is not None and not (shape.group("present") and _FIRST_PERSON.search(before, max(0, shape.start() - 40),
                                                                                  shape.start())):
        return True
    sample = _SAMPLE_BEFORE.search(before)
    return sample is not None and _TEMPLATE.search(before, 0, sample.start()) is not None


def public_context(line: str, position: int) -> bool:
    """Whether the sentence of `line` up to `position` (120 characters at most) names a key its
    vendor documents as public (_PUBLIC_CONTEXT) and no word after that name says the key is the
    private one; or shows the value as a sample (sample_context)."""
    if sample_context(line, position):
        return True
    start = max(0, position - 120)
    for end in _SENTENCE_END.finditer(line, start, position):
        start = end.end()
    if _PRIVATE_NAME.search(line, start, position):
        return False
    for match in _PUBLIC_CONTEXT.finditer(line, start, position):
        if not _PRIVATE_AFTER.search(line, match.end(), position):
            return True
    return False


_CALL = re.compile(r"\w*(?:\s*:?=\s*[\w.\[\]]*)?\(")
# The start of a command's option name, up to a credential word inside it: `--recv-`, `-`.
_OPTION_BEFORE = re.compile(r"(?<!\S)--?[A-Za-z0-9-]*$")
# Another name assigned the value, last between the credential word and it: `"keys":[{"kty":"RSA",
# ..., "n":"...`, `token=[masked] session: ...`.
# A name before ":" counts when quoted (JSON): unquoted, "...: " introduces the value in prose.
_NAME_ASSIGNED = re.compile(r"""(?:^|[\s,{;&?(])(?:["']([A-Za-z_][\w.-]*)["']\s*[:=]"""
                            r"""|([A-Za-z_][\w.-]*)\s*(?::=|=>|=))\s*["'`]?$""")


_CACHE_BEFORE = re.compile(r"(?i)\bcach(?:e|ed|es|ing)\b")
# A name in code before an unquoted ":" (`userPoolId: '...'`, `client_id: ...`): camelCase, snake_case or dotted.
_CODE_NAME_COLON = re.compile(r"(?:^|[\s,{;(])([a-z]+(?:[A-Z][a-z0-9]*)+|[A-Za-z]+(?:[_.][A-Za-z0-9]+)+)"
                              r"\s*:\s*[\"'`]?$")


def _other_name(between: str) -> bool:
    """Whether the value after `between` (the text from a credential word to it) is assigned to a name
    other than the word: a name that is neither a credential word nor an introducer ("value")."""
    match = _NAME_ASSIGNED.search(between)
    if match is None:
        code = _CODE_NAME_COLON.search(between)
        return code is not None and not WORD.search(code.group(1))
    name = match.group(1) or match.group(2)
    if re.search(r":\s*[&*]?\s*$", between[:match.start(2 if match.group(2) else 1)]):
        return False  # a type annotation: `API_TOKEN: &str = "..."`, `secret: string = "..."`
    from .secret_detectors import about_name  # detect-secrets' plugin module: imported when first needed

    # A name about a credential (`token_id`, `secret_name`) is another name too.
    return name.lower() not in _INTRODUCERS and (not WORD.search(name) or about_name(name))


def _in_locator(line: str, start: int, end: int) -> bool:
    """Whether line[start:end] stands inside a URL, an ARN (`...:secret:prod/db`) or a path or branch
    name (`acme/fix-token-refresh`), not in prose."""
    left = max(line.rfind(" ", 0, start), line.rfind("\t", 0, start), line.rfind("(", 0, start)) + 1
    token = line[left:end]
    inside_name = "/" in token and re.match(r"[-_.][A-Za-z]", line[end:end + 2]) is not None
    return inside_name or "://" in token or token.lower().startswith(("arn:", "urn:"))


# A copula after the value ("비밀번호는 X 입니다", "パスワードは X です"): with the particle before, the
# sentence states it.
_COPULA_AFTER = re.compile(r"\s*(?:입니다|이에요|예요|이다|です|である)")


def prose_findings(line: str) -> list[tuple[str, tuple[int, int]]]:
    """(kind, span) of each credential introduced in prose in `line`: every candidate in the clause
    after a credential word that credential_value accepts (not after a word that makes the
    credential public or an example, nor after "id", "name", "hash" ...), a value before "is the
    password", a passphrase of words, a seed phrase, an app password, recovery codes."""
    spans = set()
    for word in WORD.finditer(line):
        # In a URL, a path or an ARN; or a command's option name (`--recv-keys`), which the
        # command-line rules judge (cairn-rules.toml).
        if _in_locator(line, word.start(), word.end()) or (
                "-" in line[max(0, word.start() - 40):word.start()]
                and _OPTION_BEFORE.search(line, max(0, word.start() - 40), word.start())):
            continue
        clause_start = _clause_start(line, word.start())
        if NEGATING_BEFORE.search(line, clause_start, word.start()):
            continue
        # A cache's key ("Cache restored from key: Linux-pnpm-store-fe48..."): a lookup key, not a credential.
        if word.group(0).lower() in ("key", "keys") and _CACHE_BEFORE.search(line, clause_start, word.start()):
            continue
        clause = line[word.end():word.end() + 100]
        clause_end = _CLAUSE_END.search(clause)
        clause = clause[:clause_end.start() if clause_end else len(clause)]
        punctuated = [m for m in _PUNCTUATED.finditer(line, word.end(), word.end() + len(clause))
                      if "," in m.group(1) or ";" in m.group(1)]
        for match in [*_CANDIDATE.finditer(line, word.end(), word.end() + len(clause)), *punctuated]:
            value = match.group(1).rstrip(".,:!?")
            if line.startswith(("(", "["), match.end(1)):
                continue  # a call or a subscript: code (Encoding.UTF8.GetBytes(...), config[...])
            if (NOT_THE_VALUE.match(line, word.end(), match.start(1))
                    or NAMES_BEFORE_VALUE.search(line, word.end(), match.start(1))):
                continue
            # Hex is mostly a hash or an id: a hex value is a credential only when it is given as one
            # ("token: 8c1e...", "the secret is 8c1e...", "api-key header value 8c1e..."), not
            # anywhere later in the clause ("the token refresh fix landed in 3f9a2c1e...").
            between = line[word.end():match.start(1)]
            if _other_name(between):
                continue
            if (_HEX.fullmatch(value) and not _GIVEN.search(between)) or (
                    _UUID.fullmatch(value) and not _INTRODUCED.search(between)):
                continue
            if public_context(line, match.start(1)) or setting_pair(value):
                continue
            # After "(" only as the argument of a call the word names: set_api_key('...'), not "(4c24...)".
            if line[match.start() - 1] == "(" and not _CALL.fullmatch(line, word.end(), match.start()):
                continue
            before = line[clause_start:match.start(1)]
            if credential_value(value, before, word.group(0), introduced=bool(_INTRODUCED.search(between))) or (
                    _COPULA_AFTER.match(line, match.start(1) + len(value)) and _INTRODUCED.search(between)
                    and PASSWORD_WORD.search(word.group(0)) and stated_password(value)
                    and not look_alike(value, before)):
                spans.add((match.start(1), match.start(1) + len(value)))
    return [("Credential In Prose", span) for span in sorted(spans | _other_prose_forms(line))]


def _other_prose_forms(line: str) -> set[tuple[int, int]]:
    """Spans of the credentials in `line` that no credential word introduces after it: a value
    before "is the password", a passphrase, a seed phrase, an app password, recovery codes, an
    account's password, a literal its trailing comment names."""
    spans = set()
    for match in _BEFORE.finditer(line):
        if credential_value(match.group(1), line[max(0, match.start(1) - 60):match.end()]):
            spans.add(match.span(1))
    for match in _PASSPHRASE.finditer(line):
        if not NOT_A_SECRET_CONTEXT.search(line, max(0, match.start() - 60), match.end()):
            spans.add(match.span(2 if match.group(2) else 3))
    # A generated seed phrase draws 12 to 24 words from 2048: one that repeats its words is a published
    # development mnemonic (Hardhat's "test test ... junk"), not a wallet's.
    spans.update(m.span(1) for m in _SEED_PHRASE.finditer(line)
                 if len(set(m.group(1).split())) * 2 > len(m.group(1).split()))
    for pattern in (_APP_PASSWORD, _CODES):
        spans.update(m.span(1) for m in pattern.finditer(line))
    spans.update(_account_pairs(line))
    spans.update(_commented_literals(line))
    return spans


# -- a password beside an account's name, a literal named by its comment -------------------------------------
# Accounts that come with a system or a service (and the service accounts people name svc-...): "admin /
# Thistle-Tango24", "| prod | root | Lq9#mK2zXv |", "root:Kq7...". After one, a value made like a password
# is its password even with no credential word in the sentence.
ACCOUNT = (r"(?:admin|administrator|root|sa|superuser|postgres|ubuntu|ec2-user|elastic|kibana|guest|operator"
            r"|deploy|deployer|sysadmin|ftpuser|svc[_-][\w-]+|service[_-][\w-]+)")
_ACCOUNT_PAIR = re.compile(r"(?i)(?<![\w/.@:-])" + ACCOUNT + r"(?:(\s+/\s+|\s+:\s+|\s*\|\s*)|(/)|(:))['\"`]?"
                           r"([^\s'\"`,;:()<>\[\]{}|]{8,64})(?![\w/@:])")


def _account_pairs(line: str) -> list[tuple[int, int]]:
    """Spans of the passwords given beside an account's name (ACCOUNT): after " / ", " : " or a table's
    "|", a value made like a password (password_like) or a generated one; right after "/" (which also
    joins paths), a password with a symbol and neither "." nor "/"; after ":" (which also tags images,
    postgres:16-alpine), a generated one (random_looking)."""
    out = []
    for match in _ACCOUNT_PAIR.finditer(line):
        value = match.group(4).rstrip(".,:!?")
        if look_alike(value, line[max(0, match.start() - 60):match.start(4)]) or placeholder(value):
            continue
        symbol = any(not c.isalnum() for c in value)
        if match.group(1) is not None:
            given = random_looking(value) or (password_like(value) and (symbol or bool(match.group(1).strip())))
        elif match.group(2) is not None:
            given = password_like(value) and symbol and not any(c in value for c in "./")
        else:
            given = random_looking(value)
        if given:
            out.append((match.start(4), match.start(4) + len(value)))
    return out


# A comment at the end of a line of code that names what the line holds: `# secret key from the dashboard`.
_TRAILING_COMMENT = re.compile(r"(?:^|\s)(?:#|//)\s*([^\n]*)$")
_QUOTED = re.compile(r"""(['"`])([^'"`\s]{16,300})\1""")
# Words in such a comment that make the literal something else than a secret, or a secret made public.
_COMMENT_NOT_SECRET = re.compile(
    r"(?i)\b(?:cache|idempotency|primary|foreign|partition|sort|row|object|lookup|public|publishable|search[- ]only"
    r"|site|anon|client[- ]side|browsers?|example|sample|dummy|placeholder|fake|mock|test[- ]vectors?|not|no|never"
    r"|without)\b|n't\b")


# A trailing comment that says the literals before it are no secret: an id or a key of a cache or a
# table, a key its vendor makes public, an example (not the "not"/"no" of the list above, which in a
# comment also says "no longer used").
_COMMENT_PUBLIC = re.compile(
    r"(?i)\b(?:cache|idempotency|primary|foreign|partition|sort|object|lookup|public|publishable|search[- ]only"
    r"|site[ _-]?key|anon|client[- ]side|browsers?|example|sample|dummy|placeholder|fake|mock|test[- ]vectors?"
    r"|not (?:a )?secret)\b")


def commented_public(line: str, position: int) -> bool:
    """Whether a trailing comment after `position` in `line` says what stands there is no secret
    (_COMMENT_PUBLIC, _PUBLIC_CONTEXT, NOT_A_SECRET_CONTEXT): `'7d3f...'; // cache key for the page`."""
    comment = _TRAILING_COMMENT.search(line, position)
    return comment is not None and any(p.search(comment.group(1))
                                       for p in (_COMMENT_PUBLIC, _PUBLIC_CONTEXT, NOT_A_SECRET_CONTEXT))


def _commented_literals(line: str) -> list[tuple[int, int]]:
    """Spans of the string literals of a line of code whose trailing comment names a credential
    (`Mailer('9a8b...')  # secret key from the dashboard`): a literal made like a generated secret
    (credential_value), unless the comment or the line's vendor says it is public, an example or an id."""
    comment = _TRAILING_COMMENT.search(line)
    if comment is None:
        return []
    text = comment.group(1)
    word = WORD.search(text)
    if word is None or _COMMENT_NOT_SECRET.search(text) or NOT_A_SECRET_CONTEXT.search(text):
        return []
    out = []
    for literal in _QUOTED.finditer(line, 0, comment.start()):
        value = literal.group(2)
        if public_key(value) or public_context(line, literal.start(2)):
            continue
        if credential_value(value, "", word.group(0), introduced=False):
            out.append(literal.span(2))
    return out


