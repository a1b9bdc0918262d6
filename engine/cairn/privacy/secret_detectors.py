"""detect-secrets plugins for what its own detectors and the vendored rule sets miss (loaded by path; see scrub.py).

Each is a RegexBasedDetector (detect-secrets' documented extension point): when a pattern has a
group, only the group (the value) is redacted, so "PGPASSWORD=[REDACTED:...]" still says which
variable was set. detect-secrets' filters still apply (templated values, `$VAR` references, uuids).
"""

from __future__ import annotations

import re
from collections.abc import Generator

from detect_secrets.plugins.base import RegexBasedDetector

from cairn.privacy import secret_values
from cairn.privacy.rule_filters import fails_token_efficiency
from cairn.privacy.secret_words import PASSWORD_ABBREVIATIONS, SECRET_ABBREVIATIONS

# A value that is a secret rather than a setting: not only digits, not a boolean or a null.
_NOT_A_SETTING = r"(?!(?:\d+|true|false|yes|no|on|off|none|null|nil|undefined)(?![^\s'\";,]))"


class EnvSecretAssignmentDetector(RegexBasedDetector):
    """An unquoted assignment to a variable named as a secret, in a shell, a .env file or a
    credentials file: `AWS_SECRET_ACCESS_KEY=...`, `export PGPASSWORD=...`, `DB_PASS=...`,
    `aws_secret_access_key = ...` (detect-secrets' keyword detector wants quotes outside code
    files). Not a secret: a name that only sizes or points at one (`MAX_TOKENS`, `SESSION_TOKEN_TTL`,
    `CSRF_TOKEN_HEADER`, `SECRET_FILE`), or a value that is a number (with a unit), a boolean, a
    `$REFERENCE`, a `<placeholder>`, a path, a URL, or anything starting with "-" (an option, or
    prose: "PGPASSWORD=-style assignments"). In a comma-separated option list (`user=U,pass=P,retain=1`) each
    value ends at the next `,name=`."""

    secret_type = "Secret Assignment"
    denylist = [re.compile(r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z][A-Za-z0-9_]*)(?: ?= ?| = )"
                           # A value ends where the next `,name=` of an option list begins (rtl_433's
                           # `mqtt://host:1883,user=U,pass=P,retain=1`, mount's `-o user=U,pass=P`).
                           r"(?:(?P<value>[^\s'\"$;<{-](?:(?!,[A-Za-z_][\w.-]*=)[^\s'\";]){3,})"
                           # Quoted, in a shell (PGPASSWORD='=*mW...' psql): any first character but a
                           # reference's ($, {, <); a "%" only when no reference follows (%(name)s, %NAME%,
                           # Symfony's %env(X)%): Django's generated keys draw on "%" too.
                           r"|(?P<quote>['\"])(?P<quoted>(?!%(?:\(\w+\)[sd]|\w+%|env\([^)]*\)%)['\"])"
                           # A "$" first only before a generated name (`'$UiLggBuJ6c9Hu'`), checked below.
                           r"(?:[^\s'\"$<{]|\$(?=[A-Za-z_]))[^\s'\"]{3,})(?P=quote))")]

    def analyze_string(self, string: str) -> Generator[str, None, None]:
        for match in self.denylist[0].finditer(string):
            value = match["value"] or match["quoted"]
            if value.startswith("$") and not secret_values.generated_dollar_name(value):
                continue  # `'$DB_PASSWORD'`: a reference
            # "?token= with a 30 minute expiry": a word of prose after "= ", not a value.
            prose = (match["value"] is not None and "= " in match.group(0)
                     and value.isalpha() and value.islower())
            # Quoted, which code also writes (pad_token="[PAD]", token="wrong"): only a value made like
            # a credential (detect-secrets' keyword detector has the rest).
            if match["quoted"] is not None and not (secret_values.random_looking(value)
                                                    or secret_values.password_like(value)):
                continue
            named = _secret_name(match["name"]) or (_login_for(match["name"]) and secret_values.password_like(value)
                                                    and secret_values.random_looking(value))
            if named and not not_secret_value(value) and not prose:
                yield value


# Words of a variable name that make it a secret's ("DB_PASS", "pgpassword", "GITHUB_TOKEN"), and
# words that say the variable holds something about a secret rather than the secret itself.
_SECRET_WORDS = ("secret", "password", "passwd", "passphrase", "pass", "pwd", "pw", *PASSWORD_ABBREVIATIONS, "token",
                 *SECRET_ABBREVIATIONS,
                 "apikey", "credential", "credentials", "privatekey", "accesskey", "authtok", "bindpw", "rootpw",
                 "encrypt")  # Consul's gossip key (`encrypt = "..."`); a boolean or a cipher's name is a setting
_ABOUT_WORDS = frozenset("""ttl header headers limit limits count size length len expiry expires expiration timeout
    url uri path file dir name type id ids endpoint host port enabled enable disabled max min num tokens
    rotation policy hint prompt field param length version format mode store backend provider lifetime
    duration age context ctx hash hashed digest validator manager class cls schemes scheme algorithm
    algo map maps table tables lookup""".split())  # Postfix's smtp_sasl_password_maps: a lookup table of them
# A value that is a setting or code rather than a secret: a number (with a unit), a boolean, a path, a
# URL; a call or an expression (`getpass.getpass(`, `timedelta(days=14)`, `sha256(token).hexdigest()`);
# a Windows `%VAR%` or Python `%(VAR)s` reference; a typed path (Postfix's `hash:/etc/postfix/sasl_passwd`,
# `proxy:mysql:/etc/...`, `file:./x`): a table or a file that holds the secret.
_SETTING_VALUE = re.compile(r"(?i)^(?:[0-9]+(?:\.[0-9]+)?[a-z]{0,2}|true|false|yes|no|on|off|none|null|nil|undefined"
                            r"|(?:/|~[\w.-]*/|\.{1,2}/)\S*|(?:[a-z][\w+-]*:)+(?:/|~/|\.{1,2}/)[^/]\S*"
                            r"|\.(?-i:[a-z])[\w.-]*|[a-z][a-z0-9+.-]*://.*|[a-z_][\w.:]*[(\[].*|%\(\w+\)[sd]|%\w+%)$")


# Words of a token's name that make it a pagination cursor, not a credential (next_page_token, NextToken).
PAGING_WORDS = frozenset("page pagination continuation cursor next sync resume".split())


_PASS_WORDS = ("bypass", "compass", "surpass", "overpass", "underpass", "trespass", "encompass")


def _secret_name(name: str) -> bool:
    words = [w for w in re.split(r"_+", name.lower()) if w]
    if not words or words[0] in ("max", "min", "num") or words[-1] in _ABOUT_WORDS or PAGING_WORDS & set(words):
        return False
    if {"public", "publishable"} & set(words) and not {"private", "secret"} & set(words):
        return False  # MJ_APIKEY_PUBLIC, NEXT_PUBLIC_SUPABASE_ANON_KEY: named public
    joined = "".join(words)
    # A name joined to "pass" (sshpass(1)'s SSHPASS, read by `sshpass -e`; DBPASS), not a word ending in it.
    if joined.endswith("pass") and not joined.endswith(_PASS_WORDS):
        return True
    return any(w in _SECRET_WORDS for w in words) or joined.endswith(
        ("password", "passwd", "secret", "token", "apikey", "accesskey", "privatekey", "secretkey",
         # Agora's App Certificate, the secret half of its app id (docs.agora.io, "App Certificate").
         "appcertificate"))


def _login_for(name: str) -> bool:
    """Whether `name` is a login for something it names after the word (`DOCKER_LOGIN_MY_REGISTRY`): given a
    value made like a password and random, a login's secret; a name that ends in "login" (`DB_LOGIN=admin`) or
    in a user's word (`DOCKER_LOGIN_USER`) holds a user name."""
    words = [w for w in re.split(r"_+", name.lower()) if w]
    return "login" in words[:-1] and words[-1] not in _ABOUT_WORDS and words[-1] not in ("user", "username", "name")


def about_name(name: str) -> bool:
    """Whether a variable's name says it holds something about a secret, not the secret: its last
    word is a size, a place, a name, a header, a rotation ... (`api_key_header`, `sessionSecretRotation`)."""
    words = [w for w in re.split(r"[_.-]+|(?<=[a-z0-9])(?=[A-Z])", name) if w]
    return bool(words) and words[-1].lower() in _ABOUT_WORDS


# Code that makes the value rather than the value: a shell's command substitution (`uuidgen`, $(openssl rand
# -hex 32)), a tuple or an expression in parentheses (django-environ's `SECRET_KEY=(str, "...")`), a command
# line with an option (`openssl rand -base64 32`, `head -c 32 /dev/urandom`): a generator, not its output.
_GENERATOR = re.compile(r"^(?:`|\$\(|\()|^[a-z][\w.-]*(?:\s+[\w.:/-]+)*?\s+(?:--?[A-Za-z][\w-]*|/dev/\w+)(?:\s|$)")
# A variable passed to a call (`OpenAI(api_key=api_key, base_url=...)`): a name of code, then the argument
# list's "," or ")".
_ARGUMENT_NAME = re.compile(r"^[A-Za-z_][\w.]*(?:\[[\w'\"]+\])?[,)]+;?$")


def not_secret_value(value: str) -> bool:
    """Whether a value given to a secret's name is a setting, code (a generator, a variable passed to a
    call), a reference, or a value cut short on purpose (`sk-lf-...`, `xapp-…`) rather than a secret. The closing
    brackets of what the value stands in are not its own (`SigningConfig{..., keyPassword=null}`: null)."""
    return (bool(_SETTING_VALUE.match(value.rstrip(".,)]}")) and not secret_values.base64_like(value)
                 or _GENERATOR.match(value)) or value.endswith(("...", "…"))
            or (_ARGUMENT_NAME.match(value) is not None and fails_token_efficiency(value.rstrip(",);"))))


class PasswordProseDetector(RegexBasedDetector):
    """A password given in prose: "the password is hunter22", "password: Tr0ub4dor&3", "the DB
    password for staging is Xy7!qPz9". The value must hold a letter and a digit or symbol, so "the
    password is required" is left alone, and not be a path ("pwd" is also the shell's folder), a
    YAML tag (`password: !vault |`, Home Assistant's `` `!secret mqtt_password` ``), a Maven
    resource-filtering reference (`@db.password@`, replaced at build time), nor the name of an
    assignment (`password: SMTP_PASS="..."`, whose value follows)."""

    secret_type = "Password In Prose"
    denylist = [re.compile(
        r"(?i)\b(?:password|passwd|passphrase)(?: for (?:the )?[\w-]+(?: [\w-]+)?)?\s*(?:is|was|:|=)\s*"
        r"(?![/~])(?![`'\"]?![A-Za-z][\w:]*(?:\s|$))(?!@[\w.-]+@(?:\s|$))(?![A-Za-z_]\w*=['\"])"
        r"(?=[^\s'\"]*[A-Za-z])(?=[^\s'\"]*[0-9!@#%^&*+=?~])([^\s'\"]{6,})")]
