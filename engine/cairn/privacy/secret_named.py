"""Credentials named beside them in forms the rule sets do not read: an option or a key whose name ends in a
password word, a quoted name and value pair, an application's salt, a web API's key in a query, a game server's
login token, a login after "as", a URL's password holding "@", a device's local key, an auth file's lines.

- `--dbpassword VALUE`, `--admin-pwd=VALUE`: an option whose name ends in a word for password (not
  `--password-file`, `--password-stdin`: the name must end in the word).
- `define('DB_PASSWORD', 'VALUE')`, `'password' => 'VALUE'`, `os.Setenv("API_TOKEN", "VALUE")`: a quoted name,
  then its quoted value, in a call or an array (a value holding "(" or "&" is still one literal); not a
  validation rule (`'password' => 'required|min:8'`).
- `basicAuthPassword: VALUE`, `"pwd": "VALUE"`: a short password (5 characters and up) under a password's name
  that does not read as text (a random `ivivp`, not `admin` or `test`: Betterleaks' token-efficiency test).
- `SetEnv APP_SECURITY_SALT VALUE`, `define('AUTH_SALT', ...)`, `Security.salt: ...`: the salt an application
  signs or hashes with (CakePHP's Security.salt, WordPress' *_SALT), secret by its docs; a password hash's own
  `salt` field is not one (no application word before it).
- `?key=VALUE`, `&api_key=VALUE`, `?access_token=VALUE`: a credential a web API takes in its query string.
- `+sv_setsteamaccount TOKEN`, `+rcon_password PASS`, `-authkey KEY`: a Source game server's login token,
  passwords and Web API key on its command line or in server.cfg.
- `Connecting to jdbc:... as USER / PASS`: a login after "as" on a line that connects or logs in.
- `mysql://user:@E4S...@host`: a URL's password holding an unencoded "@" (its last "@" ends it).
- `"local_key": "..."`, tinytuya's `Device(ID, IP, KEY)`, a device record's `"key"` beside its `"id"` and
  `"ip"`: a Tuya device's local key.

Across lines (text_findings): an auth file's user line then password line after the line that names it
(OpenVPN's `auth-user-pass` file: `cat auth.txt`), or written by `printf 'user\\npass' > FILE`; a value put into
a field a password word names in the sentences before ("the field `Password` ... when I insert `VALUE` into
that field").

The value must still be made like a secret (secret_positional.credential_like, passed in) or, under a name that
says password, a short random run (_short_password). Pure functions of strings; secret_positional runs them
beside its own forms.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from .rule_filters import fails_token_efficiency
from .secret_blocks import secret_setting
from .secret_values import placeholder, reference_lead
from .secret_words import PASSWORD_ABBREVIATIONS, PASSWORD_WORDS, alternation

Check = Callable[[str], bool]

# The last word of a name that says password (the English ones and their abbreviations).
_PASSWORD_END = r"(?:password|passwd|passphrase|pass|pwd|pw|" + "|".join(PASSWORD_ABBREVIATIONS) + ")"
_PASSWORD_NAME = re.compile(r"(?i)" + _PASSWORD_END + r"$")


def _short_password(value: str) -> bool:
    """Whether `value` is a short password under a name that says so: 5 to 64 letters and digits with a letter,
    not a placeholder, not text to Betterleaks' token-efficiency test (`ivivp`, `kq7vz`; not `admin`, `hunter2`)."""
    return (re.fullmatch(r"[A-Za-z0-9]{5,64}", value) is not None and any(c.isalpha() for c in value)
            and not value.isdigit() and not placeholder(value) and not fails_token_efficiency(value.lower()))


# -- an option named for a password ----------------------------------------------------------------------------
_PASSWORD_OPTION = re.compile(r"""(?i)(?<!\S)--?([a-z][\w-]*?)""" + _PASSWORD_END
                              + r"""(?:=|\s+)(['"]?)([^\s'"]{4,200})\2(?!\S)""")


# -- a quoted name and its quoted value --------------------------------------------------------------------------
_QUOTED_PAIR = re.compile(r"""(['"])([A-Za-z_][\w.-]{1,63})\1\s*(?:,|=>|:)\s*(['"])((?:(?!\3)[^\s\\]){4,200})\3""")
# A validation rule's or a schema's words (`required|min:8`, `string`, `confirmed`): not a value.
_RULE_LIKE = re.compile(r"(?i)[a-z_]+(?::[\w,.]+)?(?:\|[a-z_]+(?::[\w,.]+)?)+")


# -- an application's salt -----------------------------------------------------------------------------------
_APP_SALT = re.compile(r"""(?i)(?<![\w.-])['"]?((?:[\w.-]*[._-])?(?:security|secure[_-]?auth|auth|logged[_-]?in"""
                       r"""|nonce|app|hashids?|session|cookie|secret|encryption|signing|jwt|password)[._-]?salt)['"]?"""
                       r"""(?:\s*(?:[:=,]|=>)\s*|[ \t]+)['"]?([^\s'",;)]{16,200})""")


# -- a web API's key in a query string ---------------------------------------------------------------------------
_QUERY_CREDENTIAL = re.compile(r"""(?i)[?&](?:key|api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token"""
                               r"""|token|secret|client[_-]?secret|password|passwd|pwd)=([^&\s'"#<>]{16,200})""")
_HEX32 = re.compile(r"[0-9A-Fa-f]{32,128}")


# -- a game server's credentials ---------------------------------------------------------------------------------
# Source's dedicated server (developer.valvesoftware.com "Command line options", "Steam Game Server Account
# Management"): +sv_setsteamaccount takes the login token, -authkey the Web API key; the password cvars alike.
_GAME_SERVER = re.compile(r"""(?i)(?:(?<![\w+-])[+]?|(?<![\w-])(?:set|seta|sets)\s+)(sv_setsteamaccount|sv_password"""
                          r"""|rcon_password|sv_rcon_password|g_password|rconpassword|-authkey)[ \t]+"?([^\s"]{4,200})"?""")


# -- a login after "as" on a line that connects --------------------------------------------------------------
_CONNECTS = re.compile(r"(?i)\b(?:connect\w*|log(?:ged|ging)?[ -]?in|login|logon|authenticat\w*|sign(?:ed|ing)?[ -]in"
                       r"|bind\w*)\b")
_AS_LOGIN = re.compile(r"""(?<!\S)as\s+['"]?[\w.@\\-]{1,64}['"]?\s*/\s*['"]?([^\s/'"]{6,128}?)['"]?(?=[\s.,;)]|$)""")


# -- a URL's password holding "@" ----------------------------------------------------------------------------
_AT_PASSWORD_URL = re.compile(r"""://[^\s:/@'"]+:([^\s/?#'"]*@[^\s/?#'"]*)@[\w-]+(?:\.[\w-]+)*(?::\d+)?(?![\w@])""")


# -- a Tuya device's local key -------------------------------------------------------------------------------
_LOCAL_KEY = re.compile(r"""(?i)['"]?(?:local[_-]?key|localKey)['"]?\s*[:=]\s*(['"]?)([^\s'",]{10,64})\1""")
_TUYA_CALL = re.compile(r"""\b(?:tinytuya\.)?(?:Outlet|Bulb|Cover)?Device\(\s*(?:dev_id\s*=\s*)?(['"])[\w]+\1\s*,\s*"""
                        r"""(?:address\s*=\s*)?(['"])[\w.]+\2\s*,\s*(?:local_key\s*=\s*)?(['"])([^'"\n]{10,64})\3""")
_RECORD_KEY = re.compile(r""""key"\s*:\s*"([^"\n]{10,64})\"""")
_DEVICE_RECORD = re.compile(r""""(?:id|gwId|devId|dev_id)"\s*:""")
_DEVICE_ADDRESS = re.compile(r""""(?:ip|address|mac)"\s*:""")


def _options(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _PASSWORD_OPTION.finditer(line):
        value = match.group(3)
        if not value.startswith(("-", "$", "%", "<", "{")) and (check(value) or _short_password(value)):
            yield match.span(3)


def _quoted_pairs(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _QUOTED_PAIR.finditer(line):
        name, value = match.group(2), match.group(4)
        if not secret_setting(name) or _RULE_LIKE.fullmatch(value) or reference_lead(value):
            continue
        password = _PASSWORD_NAME.search(re.split(r"[-_.]|(?<=[a-z])(?=[A-Z])", name)[-1]) is not None
        if check(value) or (password and _short_password(value)):
            yield match.span(4)


_KEYED = re.compile(r"""(?<![\w.-])['"]?([A-Za-z_][\w.-]{0,63})['"]?[ \t]*(?::|=|=>)[ \t]*(['"]?)([A-Za-z0-9]{5,64})\2"""
                    r"""[ \t]*(?:[,;}]|$)""")


def _short_passwords(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _KEYED.finditer(line):
        name = match.group(1)
        last = re.split(r"[-_.]|(?<=[a-z])(?=[A-Z])", name)[-1]
        if secret_setting(name) and _PASSWORD_NAME.fullmatch(last) and _short_password(match.group(3)):
            yield match.span(3)


def _salts(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _APP_SALT.finditer(line):
        value = match.group(2)
        if not reference_lead(value) and not placeholder(value) and (_HEX32.fullmatch(value) or check(value)):
            yield match.span(2)


def _queries(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _QUERY_CREDENTIAL.finditer(line):
        value = match.group(1)
        if not placeholder(value) and (check(value) or _HEX32.fullmatch(value)):
            yield match.span(1)


def _game_servers(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _GAME_SERVER.finditer(line):
        value = match.group(2)
        if not placeholder(value) and (check(value) or _HEX32.fullmatch(value) or _short_password(value)):
            yield match.span(2)


def _as_logins(line: str, check: Check) -> Iterator[tuple[int, int]]:
    connects = _CONNECTS.search(line)
    if connects is None:
        return
    for match in _AS_LOGIN.finditer(line, connects.end()):
        if check(match.group(1)):
            yield match.span(1)


def _at_passwords(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _AT_PASSWORD_URL.finditer(line):
        if check(match.group(1).replace("@", "")):
            yield match.span(1)


def _local_keys(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _LOCAL_KEY.finditer(line):
        if check(match.group(2)):
            yield match.span(2)
    for match in _TUYA_CALL.finditer(line):
        if check(match.group(4)):
            yield match.span(4)


_FORMS: tuple[tuple[tuple[str, ...], Callable[[str, Check], Iterator[tuple[int, int]]]], ...] = (
    (("-",), _options), (("'", '"'), _quoted_pairs), ((":", "="), _short_passwords), (("alt", "ALT", "Salt"), _salts),
    (("?", "&"), _queries), (("sv_", "rcon", "authkey", "g_password"), _game_servers), ((" as ",), _as_logins),
    (("://",), _at_passwords), (("ocal", "Device("), _local_keys))


def line_findings(line: str, made_like_one: Check) -> set[tuple[int, int]]:
    """Spans of `line` (start, end: character offsets) that each form above gives, whose value `made_like_one`
    accepts (secret_positional.credential_like) or, under a password's name, _short_password."""
    spans: set[tuple[int, int]] = set()
    for cues, form in _FORMS:
        if any(cue in line for cue in cues):
            spans.update(form(line, made_like_one))
    return spans


# -- across lines ----------------------------------------------------------------------------------------------
# A line that names an auth file (OpenVPN's `auth-user-pass FILE`, a `cat` of auth.txt, pass.txt, login.conf ...),
# then its two lines: a user, then a password.
_AUTH_FILE = (r"""(?:auth-user-pass\s+\S+|[\w./~-]*(?<![\w-])(?:auth|pass|passwd|password|login|logins|creds?"""
              r"""|credentials|userpass|up)\.(?:txt|conf|cfg))""")
_AUTH_FILE_LINES = re.compile(r"(?m)^[^\n]*?" + _AUTH_FILE + r"""[^\n]*\n[ \t]*[\w.@+\\-]{1,64}[ \t]*\n[ \t]*"""
                              r"""([^\s'"`]{6,200})[ \t]*$""")
_PRINTF_LOGIN = re.compile(r"""\b(?:printf|echo\s+-e)\s+(['"])[\w.@+-]{1,64}\\n([^\s'"\\]{6,200})(?:\\n)?\1\s*>>?\s*\S""")
# A value put into a field ("When I insert `VALUE` into that field", "type 'VALUE' in the box"): a password's when
# a password word stands in the sentences before it (the field's name) or in the field's own words.
_INTO_FIELD = re.compile(r"""(?i)\b(?:insert|enter|type|put|paste|fill\s+in|write)\s+(?:in\s+)?([`'"])([^\s`'"]{4,64})\1"""
                         r"""\s+(?:in|into|as)\s+(?:that|the|this|my|your)\s+(?:[\w-]+\s+){0,2}?(?:field|box|input|prompt"""
                         r"""|textbox)\b""")
_PASSWORD_MENTION = re.compile(r"(?i)\b(?:" + _PASSWORD_END + r"|" + alternation(PASSWORD_WORDS) + r")\b")


def text_findings(text: str, made_like_one: Check) -> set[tuple[int, int]]:
    """Spans of `text` for the forms across lines above (an auth file's lines, a value put into a password field)."""
    spans: set[tuple[int, int]] = set()
    if "\n" in text:
        spans.update(m.span(1) for m in _AUTH_FILE_LINES.finditer(text) if made_like_one(m.group(1)))
    if "\\n" in text:
        spans.update(m.span(2) for m in _PRINTF_LOGIN.finditer(text) if made_like_one(m.group(2)))
    for match in _INTO_FIELD.finditer(text):
        value = match.group(2)
        if ((made_like_one(value) or _short_password(value))
                and _PASSWORD_MENTION.search(text, max(0, match.start() - 300), match.end())):
            spans.add(match.span(2))
    for match in _RECORD_KEY.finditer(text):  # a device record: {"id": ..., "key": ..., "ip": ...}
        start, end = text.rfind("{", 0, match.start()), text.find("}", match.end())
        record = text[start:end] if start >= 0 and end > 0 else ""
        if _DEVICE_RECORD.search(record) and _DEVICE_ADDRESS.search(record) and made_like_one(match.group(1)):
            spans.add(match.span(1))
    return spans
