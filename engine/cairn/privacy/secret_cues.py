"""Credentials their line cues by a neighbour the other modules do not read: a host option before a password
option, a call named for authenticating, a mail provider's app password, a vendor's secret with a non-secret
word in its name, a value in brackets after a credential word, a value named afterwards, a Redis directive
inside a sentence, a quoted value led by a symbol.

- `mcrcon -H host -P 25575 -p PASS`, `rcon-cli --host h --port 25575 --password PASS`: a host option, a few
  options, then a password option (secret_positional reads a user option before one; an RCON or a Redis
  client has no user).
- `MCRcon("127.0.0.1", "PASS")`, `redis.StrictRedis("cache", 6379, 0, "PASS")`: a client with no user, given a
  host literal, perhaps numbers, then the password.
- `rcon.authenticate("PASS")`, `client.setPassword('PASS')`, `withToken("...")`: the one literal argument of a
  call whose name says it takes the secret.
- A Google app password, 16 lower-case letters (support.google.com/accounts/answer/185833 shows it as four
  groups of four; people paste it joined), on a line that names a password in any language, Gmail or SMTP.
- Telegram's `api_hash` (core.telegram.org/api/obtaining_api_id: "api_hash ... do not share"): a hash by its
  name, a secret by its vendor's word.
- `secret [VALUE] set` (php artisan jwt:secret's output), `mot de passe (VALUE)`: a value in brackets right
  after a credential word.
- `VALUE, das ist mein POSTGRES_PASSWORD`, `VALUE, which is my password`: a value a copula then names.
- `JWT_SCRT: VALUE`, `"smtp_pswd": "VALUE"`: a setting whose name ends in an abbreviation of password or secret.
- `requirepass VALUE` inside a sentence: a Redis directive's name, wherever it stands.
- `password: '#l17R_wxBF!'`: a quoted value under a secret's name led by a symbol (detect-secrets' keyword
  detector wants a word character first); not where the name stands inside a literal whose quote follows "="
  (`"...:_authToken=", makeToken()`: code joining the value).

The value must still be made like a secret (secret_positional.credential_like). Pure functions of a line;
secret_positional.line_findings runs line_findings beside its own forms.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from .secret_blocks import secret_setting
from .secret_rules import PASSWORD_WORD, WORD
from .secret_values import random_letters, reference_lead
from .secret_words import PASSWORD_ABBREVIATIONS, PASSWORD_WORDS, SECRET_ABBREVIATIONS, alternation

# -- a host option, then a password option --------------------------------------------------------------------
# Lower-case -p only: -P is a port to mcrcon, mysql and redis-cli alike. gorcon's rcon takes `-a host:port`.
_HOST_THEN_PASSWORD = re.compile(
    r"""(?<!\S)(?:-[hH]|--host(?:name)?|--server|-a(?=\s+[\w.-]+:\d))[=\s]+['"]?[^\s'",]+['"]?"""
    r"""(?:\s+(?!-p\b|--pass)-{1,2}[\w-]+(?:[=\s]+(?!-)\S+)?){0,4}"""  # other options between
    r"""\s+(?:-p|--pass(?:word|wd)?|--pw|--rcon-password)(?:=|\s+)['"]?([^\s'"]{4,200})""")


# -- a call named for taking the secret ----------------------------------------------------------------------
_SECRET_CALL = re.compile(
    r"""(?i)(?<![\w$])(?:authenticate|auth|set_?password|with_?password|set_?pass|set_?secret|with_?secret"""
    r"""|set_?token|with_?token|set_?api_?key|with_?api_?key|login_?with_?token|unlock)"""
    r"""\s*\(\s*(['"])([^'"\n\\]{6,200})\1\s*\)""")


# -- a client without a user, given a host then its password -------------------------------------------------
# `MCRcon("127.0.0.1", "PASS")`, `redis.StrictRedis("cache", 6379, 0, "PASS")`: RCON and Redis clients take no user,
# so secret_positional's user-then-password reading does not apply; numbers (a port, a database) may sit between.
_HOST_THEN_SECRET_CALL = re.compile(
    r"""(?i)(?<![\w$])[\w.]*(?:rcon|redis|sentinel)[\w]*\s*\(\s*(['"])[\w.:-]+\1(?:\s*,\s*\d+){0,3}\s*,\s*"""
    r"""(['"])([^'"\n\\]{6,200})\2""")


# -- a Google app password -----------------------------------------------------------------------------------
_APP_PASSWORD = re.compile(r"(?<![\w-])([a-z]{4} ?[a-z]{4} ?[a-z]{4} ?[a-z]{4})(?![\w-])")
# What makes a run of 16 letters a password on its line: a password word in any language (Django's
# translations, secret_words), Gmail, SMTP, an app password.
_APP_PASSWORD_CUE = re.compile(r"(?i)gmail|smtp|app[ _-]?pass|" + PASSWORD_WORD.pattern.removeprefix("(?i)")
                               + "|" + alternation(PASSWORD_WORDS))


# -- a vendor's secret whose name holds a word for a non-secret ----------------------------------------------
_VENDOR_SECRET = re.compile(r"""(?i)(?<![\w-])-{0,2}(?:tg[_-]?|telegram[_-]?)?api[_-]hash['"]?\s*(?:=|:|\s)\s*['"]?"""
                            r"""([0-9a-f]{32})(?![\w-])""")


# -- an AWS secret access key anywhere on a line that names one -------------------------------------------------
# 40 characters of base64's alphabet (docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html,
# `wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`), on a line that says "secret access key" however far before, in
# another clause or set off in Markdown (`... note the characters: **KEY**`).
_AWS_SECRET_NAMED = re.compile(r"(?i)secret[ _-]?access[ _-]?key|aws[ _-]?secret[ _-]?(?:access[ _-]?)?key")
_AWS_SECRET_SHAPE = re.compile(r"(?<![A-Za-z0-9/+=])(?=[^\s]*[a-z])(?=[^\s]*[A-Z])(?=[^\s]*\d)[A-Za-z0-9/+]{40}"
                               r"(?![A-Za-z0-9/+=])")


def _aws_secret_keys(line: str) -> Iterator[tuple[int, int]]:
    if "ecret" in line and _AWS_SECRET_NAMED.search(line):
        yield from (m.span() for m in _AWS_SECRET_SHAPE.finditer(line))


# -- a value in brackets after a credential word --------------------------------------------------------------
# ASCII's and CJK's full-width brackets: `密码（VALUE）`, `パスワード【VALUE】`.
_BRACKETED_AFTER_WORD = re.compile(r"""(?:""" + WORD.pattern.removeprefix("(?i)") + r""")[ \t]*[(\[（【「][ \t]*"""
                                   r"""['"`]?([^\s()\[\]（）【】「」'"`]{6,200})['"`]?[ \t]*[)\]）】」]""",
                                   re.IGNORECASE)


# -- a value named afterwards --------------------------------------------------------------------------------
# "VALUE, das ist mein X", "VALUE, which is my X", "VALUE, c'est mon X", "VALUE — es mi X": a copula, an
# optional possessive, then a name that says password (PASSWORD_WORD) or a secret setting's name.
_NAMED_AFTER = re.compile(
    r"""(?<![\w/.@:-])([^\s,;:()'"`]{8,64})[ \t]*[,;:–—-]?[ \t]+(?i:das ist|dies ist|ist|that is|that's|which is"""
    r"""|this is|is|c'est|c’est|esa es|ese es|esta es|es|questa è|questo è|è|essa é|esse é|isso é|é|is het|dat is"""
    r"""|to jest|это)[ \t]+(?i:(?:mein|meine|unser|unsere|das|der|die|my|our|the|mon|ma|notre|le|la|mi|el|nuestro"""
    r"""|nuestra|il mio|la mia|il|o meu|a minha|o|a|mijn|moje|мой)[ \t]+)?((?i:""" + alternation(PASSWORD_WORDS)
    + r""")(?![\w-])|[\w.-]{3,64}?)(?=[ \t]*(?:[,;:!?)。，]|\.(?!\w)|$))""")  # the name ends its clause


# -- a directive of Redis' named in prose --------------------------------------------------------------------
# `... 还有一行 requirepass VALUE，...`, "set masterauth VALUE in the replica": the name is Redis' alone, so the value
# after it is a password wherever the line has it (cairn-rules' config-directive-password wants it to begin a line).
_REDIS_DIRECTIVE = re.compile(r"""(?i)(?<![\w-])(?:requirepass|masterauth)\s+['"]?([^\s'"，。、；]{6,200})""")


# -- a setting named by an abbreviation ---------------------------------------------------------------------
# `JWT_SCRT: ...`, `"smtp_pswd": "..."`: the rule sets' credential words do not hold the abbreviations
# (secret_words.PASSWORD_ABBREVIATIONS, SECRET_ABBREVIATIONS); the name's last word is one.
_ABBREVIATED = re.compile(r"""(?i)(?<![\w.-])["']?([A-Za-z_][\w.-]*?[_.-]?(?:""" + "|".join(
    (*PASSWORD_ABBREVIATIONS, *SECRET_ABBREVIATIONS)) + r"""))["']?[ \t]*(?::|=|=>)[ \t]*["']?([^\s'",;]{6,200})""")


# -- a quoted value led by a symbol -------------------------------------------------------------------------
_SYMBOL_LED = re.compile(r"""(?<![\w.-])([A-Za-z_][\w.-]*)['"]?[ \t]*(?::|=|=>)[ \t]*"""
                         r"""(['"])([^\w\s'"][^'"\n]{5,199})\2""")


_WORDS_FOR_PASSWORD = frozenset(PASSWORD_WORDS) | {"kennwort", "passwd", "pwd", "pw"}


def _host_passwords(line: str) -> Iterator[tuple[int, int]]:
    if "-h" in line or "-H" in line or "-a" in line or "--server" in line:
        yield from (m.span(1) for m in _HOST_THEN_PASSWORD.finditer(line))


def _secret_calls(line: str) -> Iterator[tuple[int, int]]:
    if "(" in line:
        yield from (m.span(2) for m in _SECRET_CALL.finditer(line))


def _host_secret_calls(line: str) -> Iterator[tuple[int, int]]:
    if "(" in line:
        yield from (m.span(3) for m in _HOST_THEN_SECRET_CALL.finditer(line))


def _app_passwords(line: str) -> Iterator[tuple[int, int]]:
    for match in _APP_PASSWORD.finditer(line):
        if (random_letters(match.group(1).replace(" ", ""))
                and _APP_PASSWORD_CUE.search(line, max(0, match.start() - 120), match.start())):
            yield match.span(1)


def _vendor_secrets(line: str) -> Iterator[tuple[int, int]]:
    if "hash" in line.lower():
        yield from (m.span(1) for m in _VENDOR_SECRET.finditer(line))


def _bracketed_after_word(line: str) -> Iterator[tuple[int, int]]:
    if "(" in line or "[" in line or not line.isascii():
        yield from (m.span(1) for m in _BRACKETED_AFTER_WORD.finditer(line))


def _named_after(line: str) -> Iterator[tuple[int, int]]:
    for match in _NAMED_AFTER.finditer(line):
        name = " ".join(match.group(2).split())  # "POSTGRES_PASSWORD", "Passwort", "mot de passe"
        if secret_setting(name) or name.lower() in _WORDS_FOR_PASSWORD:
            yield match.span(1)


def _redis_directives(line: str) -> Iterator[tuple[int, int]]:
    if "requirepass" in line.lower() or "masterauth" in line.lower():
        yield from (m.span(1) for m in _REDIS_DIRECTIVE.finditer(line))


def _abbreviated(line: str) -> Iterator[tuple[int, int]]:
    for match in _ABBREVIATED.finditer(line):
        if secret_setting(match.group(1)) and not reference_lead(match.group(2)):
            yield match.span(2)


def _closes_a_literal(line: str, at: int) -> bool:
    """Whether the quote at `at` closes a string literal open before it (an odd count of that quote before it):
    `join("//registry.npmjs.org/:_authToken=", token(32))` names the secret inside a literal, whose quote after
    "=" ends it, and what follows is code that builds the value, not a value."""
    quote = line[at]
    return (line.count(quote, 0, at) - line.count("\\" + quote, 0, at)) % 2 == 1


def _symbol_led(line: str) -> Iterator[tuple[int, int]]:
    for match in _SYMBOL_LED.finditer(line):
        if (secret_setting(match.group(1)) and not reference_lead(match.group(3))
                and not _closes_a_literal(line, match.start(2))):
            yield match.span(3)


_FORMS: tuple[Callable[[str], Iterator[tuple[int, int]]], ...] = (
    _host_passwords, _secret_calls, _host_secret_calls, _app_passwords, _vendor_secrets, _bracketed_after_word,
    _named_after, _redis_directives, _abbreviated, _symbol_led, _aws_secret_keys)


def line_findings(line: str, made_like_one: Callable[[str], bool]) -> set[tuple[int, int]]:
    """Spans of `line` (start, end: character offsets) that each form above gives, whose value
    `made_like_one` accepts (secret_positional.credential_like; an app password is checked by its own shape)."""
    spans: set[tuple[int, int]] = set()
    for form in _FORMS:
        for start, end in form(line):
            if form is _app_passwords or form is _vendor_secrets or made_like_one(line[start:end]):
                spans.add((start, end))
    return spans
