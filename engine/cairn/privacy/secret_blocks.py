"""A credential whose name and value stand apart: on two lines, in two cells, in two list items.

Run on a whole text, not line by line (scrub.scrub): a Terraform variable's `default`, a container's
env `name:` / `value:` pair, an option and its value as two argument items, a Markdown table's
password column, a value announced on the line above ("...password:" then the value). The names
and the judgement of the value are secret_rules' (credential words) and secret_values'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .secret_rules import (CJK_WORDS, NAMES_BEFORE_VALUE, NEGATING_BEFORE, NOT_A_SECRET_CONTEXT, NOT_THE_VALUE, WORD,
                           WORDS, credential_value, public_context)
from .secret_values import placeholder, public_key, stated_password
from .secret_words import PASSWORD_ABBREVIATIONS, SECRET_ABBREVIATIONS


# -- a credential's name and value on different lines --------------------------------------------------------
# A Terraform variable's default (`variable "db_password" {` ... `default = "..."`), a container's
# environment as name and value (`- name: DB_PASSWORD` / `value: ...`, ECS's {"name": ..., "value": ...}),
# an option and its value as two items of an argument list (`- --requirepass` / `- ...`).
# The name quoted or bare (HCL1's `variable secret_key {`); a session token's default runs to about 1,000 characters;
# an output's literal `value = "..."` as well (`output "db_password" {`; a reference to a resource is unquoted).
_HCL_VARIABLE = re.compile(r'\b(?:variable|output)\s+"?([\w-]+)"?\s*\{([^{}]{0,3000})\}')


_HCL_DEFAULT = re.compile(r'\b(?:default|value)\s*=\s*"([^"\n]{4,2000})"')


# ... in any language's map syntax (`=>` in PHP and Ruby, a Ruby symbol's `:value`), and CloudFormation's
# ParameterKey/ParameterValue, Elastic Beanstalk's OptionName/Value.
_NAME_VALUE = re.compile(r"""(?i)["']?\b(?:parameter|option)?(?:name|key)["']?\s*(?:=>|[:=])\s*["']?"""
                         r"""([A-Za-z_][\w.-]*)["']?\s*,?\s*(?:\n[ \t]*-?[ \t]*)?:?["']?(?:parameter)?value["']?"""
                         r"""\s*(?:=>|[:=])\s*["']?([^\s'",}]{4,300})""")


# A parameter given as an object whose "value" holds it (an Azure Resource Manager parameters file: `"adminPassword":
# {"value": "..."}`, learn.microsoft.com "Create Resource Manager parameter file"); its "value" after other flat keys
# too (`terraform output -json`: `"db_password": {"sensitive": true, "type": "string", "value": "..."}`).
_OBJECT_VALUE = re.compile(r"""["']([A-Za-z_][\w.-]*)["']\s*:\s*\{[^{}]{0,300}?["']value["']\s*:\s*"""
                           r"""["']([^\s'"]{4,300})["']""")
_ARGUMENT_PAIR = re.compile(r"""(?m)^[ \t]*-[ \t]+["']?--?([\w-]+)["']?[ \t]*\n[ \t]*-[ \t]+["']?([^\s'"]{4,300})""")


_SECRET_SETTING_WORDS = frozenset(("password passwd pass passphrase pwd pw token secret credential credentials"
                                   " requirepass masterauth apikey").split() + list(PASSWORD_ABBREVIATIONS)
                                  + list(SECRET_ABBREVIATIONS))


_SECRET_SETTING_PAIRS = frozenset("apikey authkey accesskey secretkey privatekey signingkey encryptionkey masterkey"
                                  " authtoken".split())


def secret_setting(name: str) -> bool:
    """Whether a setting's, variable's or option's name says it holds a credential: its last word is
    one (DB_PASSWORD, api_token, --requirepass, postgresPassword) or its last two make one
    (SECRET_KEY, signingKey); not a name about one (DB_PASSWORD_FILE, ssh_key_name)."""
    words = [w.lower() for w in re.split(r"[-_.\s]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", name) if w]
    return bool(words) and (words[-1] in _SECRET_SETTING_WORDS or "".join(words[-2:]) in _SECRET_SETTING_PAIRS)


# A Markdown table's row: cells between pipes.
_TABLE_ROW = re.compile(r"(?m)^[ \t]*\|(.+)\|[ \t]*$")


def _table_cells(text: str) -> list[tuple[str, str, int]]:
    """(column name, cell, offset of the cell in `text`) of each body cell of each Markdown table of
    `text` under a header cell that names a credential (a password, key, token or secret column)."""
    out: list[tuple[str, str, int]] = []
    header: list[str] | None = None
    for row in _TABLE_ROW.finditer(text):
        cells, offsets, at = [], [], row.start(1)
        for cell in row.group(1).split("|"):
            cells.append(cell.strip())
            offsets.append(at + len(cell) - len(cell.lstrip()))
            at += len(cell) + 1
        previous = text[:max(0, row.start() - 1)].rsplit("\n", 1)[-1].strip() if row.start() else ""
        if header is None or not (previous.startswith("|") and previous.endswith("|")):  # a table's header
            header = cells
            continue
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells if c) or NOT_A_SECRET_CONTEXT.search(row.group(1)):
            continue  # the separator row, or a row about a hash, a commit, a fingerprint ...
        for name, cell, offset in zip(header, cells, offsets):
            if WORD.fullmatch(name.strip("*_` ")) and cell:
                out.append((name.strip("*_` "), cell.strip("`"), offset + (1 if cell.startswith("`") else 0)))
    return out


# A value alone on its line under a line that announces it: the line names a credential and ends with
# ":" (tool output, "Please use the following password:"), a YAML block scalar's ">-" or "|", or a shell
# line continuation ("aws configure set aws_secret_access_key \\"); a blank line may stand between.
# Not a shell prompt's command and what it prints: a container's id after `docker run -e ..._PASSWORD`,
# an encrypted file's contents after `cat credentials.yml.enc` are output, not the credential.
_ANNOUNCED = re.compile(r"(?im)^[^\n]{0,160}?(?<![a-z0-9])(" + WORDS + "|" + CJK_WORDS + r")(?![a-z0-9])[^\n]{0,160}?"
                        r"(?::|:\s*[>|][-+]?|\s\\)[ \t]*\n(?:[ \t]*\n)?[ \t]*([^\s'\"`]{8,300})[ \t]*(?:\\)?$")


_ANNOUNCING_END = re.compile(r"(?::|:\s*[>|][-+]?|\s\\)[ \t]*\n")


def _announced(text: str) -> Iterator[re.Match]:
    """_ANNOUNCED's matches in `text`, tried only at the lines that end as an announcement does (the
    pattern's lazy scan of every line costs about 1 ms on 2 KB of prose)."""
    for end in _ANNOUNCING_END.finditer(text):
        start = text.rfind("\n", 0, end.start()) + 1
        match = _ANNOUNCED.match(text, start)
        if match:
            yield match


# A command that prints a stored secret's field, then what it printed alone on the next line: `kubectl get
# secret S -o jsonpath="{.data.password}" | base64 -d` (a Secret's data is base64: kubernetes.io/docs/concepts/
# configuration/secret), `vault kv get -field=password secret/db`.
_PRINTED = re.compile(r"""(?m)^[^\n]*?(?:\bget\s+secrets?\b[^\n]*?\.data\.([\w-]+)[^\n]*?"""
                      r"""\|\s*base64\s+(?:-d|-D|--decode)\b|\bvault\s+(?:kv\s+get|read)\b[^\n]*?-field=([\w-]+))"""
                      r"""[^\n]*\n[ \t]*([^\s'"`$]{8,300})[ \t]*$""")


# A key generator's command, then what it printed alone on the next line: what a generator prints is a
# secret (`openssl rand -hex 16`, PHP's `bin2hex(random_bytes(20))`, Python's `secrets.token_hex()`, `pwgen`,
# `head -c 32 /dev/urandom | base64`; a REPL quotes it), as is what `cat` prints of a key's or a secret's
# file (`cat config/master.key`).
_GENERATED = re.compile(r"""(?m)^[^\n]*?(?:\bopenssl\s+rand\b|\brandom_bytes\s*\("""
                        r"""|\bsecrets\.token_(?:hex|urlsafe|bytes)\b|\bpwgen\b|/dev/u?random\b"""
                        r"""|\bcat\s+\S*(?:\.key|secret|token|passw(?:or)?d)[\w.-]*[ \t]*$)"""
                        r"""[^\n]*\n[ \t]*(['"]?)([A-Za-z0-9+/=_-]{16,300})\1[ \t]*$""")


def _generated(text: str, low: str) -> list[tuple[str, tuple[int, int]]]:
    """Spans of what a generator printed (_GENERATED): a token, not a placeholder nor a sequence of words."""
    if "rand" not in low and "pwgen" not in low and "cat " not in low and "token_" not in low:
        return []
    return [("Credential In Prose", m.span(2)) for m in _GENERATED.finditer(text)
            if not placeholder(m.group(2)) and not public_key(m.group(2)) and len(set(m.group(2))) >= 8]


# Words that make an announced value ciphertext ("Encrypted password:", "ciphertext of the token:").
_CIPHERTEXT_WORD = re.compile(r"(?i)\b(?:encrypted|encryption of|ciphertext|cipher text|sealed|wrapped)\b")


def block_findings(text: str) -> list[tuple[str, tuple[int, int]]]:
    """(kind, span in `text`) of each credential whose name and value stand apart, on different lines
    or in a name/value pair (_HCL_VARIABLE, _NAME_VALUE, _ARGUMENT_PAIR), printed by a command that reads
    it (_PRINTED) or under a Markdown table's column named as a credential (_table_cells): a name that
    secret_setting accepts, a value that credential_value accepts as introduced by it (a printed one:
    made like a password, stated_password)."""
    found = []
    low = text.lower()
    if "|" in text:
        found += _table_cells(text)
    # As in prose (prose_findings): not a hash's, an id's or a public key's line, not a word made public or an
    # example by what precedes it ("site key:"), not a word that names something else ("password policy:").
    announced = [(m.group(1), m.group(2), m.start(2)) for m in _announced(text)
                 if not NOT_A_SECRET_CONTEXT.search(m.group(0)) and not _CIPHERTEXT_WORD.search(m.group(0))
                 and not public_context(m.group(0), m.start(2) - m.start())
                 and not NEGATING_BEFORE.search(text, m.start(), m.start(1))
                 and not NOT_THE_VALUE.match(text, m.end(1))
                 and not NAMES_BEFORE_VALUE.search(text, m.end(1), m.start(2))]
    # What such a command printed is the secret itself: made like a password is enough (stated_password).
    printed = [("Credential In Prose", m.span(3)) for m in _PRINTED.finditer(text)
               if secret_setting(m.group(1) or m.group(2)) and stated_password(m.group(3))
               and not placeholder(m.group(3))] if "base64" in low or "-field=" in low else []
    if "variable" in low or "value" in low or "- -" in text or found:  # else none of their forms is in the text
        found += _block_pairs(text)
    found += announced
    return _judge_pairs(found) + printed + _generated(text, low) + _next_line_values(text)


# A credential on the line after what names it: an SMTP AUTH LOGIN dialogue's password line (the base64
# sent after the server's `334 UGFzc3dvcmQ6`, base64 of "Password:", RFC 4954 / draft-murchison-sasl-login),
# and the pass of a user/pass object literal spread over lines (nodemailer's `auth: {user: ..., pass: ...}`).
_NEXT_LINE_FORMS = (
    # The client's line may carry a log's prefix (`[2018-05-16 09:12:44] DEBUG [id] C: `): the line's last token.
    re.compile(r"334 UGFzc3dvcmQ6[ \t]*\r?\n(?:[^\n]{0,100}?[\s:>])?(?P<v>[A-Za-z0-9+/]{4,300}={0,2})[ \t\r]*(?=\n|$)"),
    re.compile(r"""(?i)\buser\s*:\s*(['"`])[^'"`\n]{1,200}\1\s*,?[ \t]*\r?\n[ \t]*pass(?:word)?\s*:\s*"""
               r"""(['"`])(?P<v>[^'"`\n$]{4,200})\2"""),
)


def _next_line_values(text: str) -> list[tuple[str, tuple[int, int]]]:
    """(kind, span) of each _NEXT_LINE_FORMS value that is no placeholder ("your app password", "<pass>")."""
    if "334 UGFzc3dvcmQ6" not in text and "pass" not in text.lower():
        return []
    return [("Credential In Prose", m.span("v")) for form in _NEXT_LINE_FORMS for m in form.finditer(text)
            if not placeholder(m.group("v")) and not re.match(r"[<{%]|(?i:your|my|the|enter)\b", m.group("v"))]


_AUTH_NAME = re.compile(r"(?i)(?:^|[-_.])(?:auth|basic_?auth|credentials?|login)$")
_USER_PASS = re.compile(r"[\w.@+-]{1,64}:([^\s:@]{6,200})")


def _block_pairs(text: str) -> list[tuple[str, str, int]]:
    """(name, value, start of value) of each Terraform default, name/value pair and argument pair in `text`."""
    found = []
    for variable in _HCL_VARIABLE.finditer(text):
        default = _HCL_DEFAULT.search(variable.group(2))
        if default and secret_setting(variable.group(1)):
            start = variable.start(2) + default.start(1)
            found.append((variable.group(1), default.group(1), start))
    for pattern in (_NAME_VALUE, _OBJECT_VALUE, _ARGUMENT_PAIR):
        for match in pattern.finditer(text):
            if secret_setting(match.group(1)):
                found.append((match.group(1), match.group(2), match.start(2)))
            elif _AUTH_NAME.search(match.group(1)) and (login := _USER_PASS.fullmatch(match.group(2))):
                # An auth setting given `user:password` (Basic auth's pair): the password is the secret.
                found.append(("password", login.group(1), match.start(2) + login.start(1)))
    return found


def _judge_pairs(found: list[tuple[str, str, int]]) -> list[tuple[str, tuple[int, int]]]:
    """The pairs whose value credential_value accepts as introduced by the name's last word."""
    out = []
    for name, value, start in found:
        value = value.rstrip(".,;")
        word = re.split(r"[-_.]|(?<=[a-z0-9])(?=[A-Z])", name)[-1]
        if value.startswith(("{", "$", "<", "%")) or placeholder(value) or public_key(value):
            continue
        if credential_value(value, "", word, introduced=True):
            out.append(("Credential In Prose", (start, start + len(value))))
    return out
