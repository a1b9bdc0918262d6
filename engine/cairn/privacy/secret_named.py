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
from .secret_rules import WORD
from .secret_values import generated_dollar_name, placeholder, reference_lead, validation_rule
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
_PASSWORD_OPTION = re.compile(r"""(?i)(?<!\S)--?([a-z][\w-]*?)?""" + _PASSWORD_END
                              + r"""(?:=|\s+)(['"]?)([^\s'"]{4,200})\2(?!\S)""")


# -- a quoted name and its quoted value --------------------------------------------------------------------------
_QUOTED_PAIR = re.compile(r"""(['"])([A-Za-z_][\w.-]{1,63})\1\s*(?:,|=>|:|\]\s*=)\s*"""
                          r"""(['"])((?:(?!\3)[^\s\\]){4,200})\3""")
# ... and `NAME=VALUE` inside one literal (`putenv('SMTP_PASSWORD=...')`, `"DB_PASS=..."` in a list of env entries).
_QUOTED_ASSIGNMENT = re.compile(r"""(['"])([A-Za-z_][\w.-]{1,63})=((?:(?!\1)[^\s\\]){4,200})\1""")


# -- an application's salt -----------------------------------------------------------------------------------
_APP_SALT = re.compile(r"""(?i)(?<![\w.-])['"]?((?:[\w.-]*[._-])?(?:security|secure[_-]?auth|auth|logged[_-]?in"""
                       r"""|nonce|app|session|cookie|secret|encryption|signing|jwt|password|hash)[._-]?salt)['"]?"""
                       r"""(?:\s*(?:[:=,]|=>|\]\s*=)\s*|[ \t]+)"""
                       r"""(?:(['"])((?:(?!\2)[^\n]){16,200})\2|([^\s'",;)]{16,200}))""")


# -- a web API's key in a query string ---------------------------------------------------------------------------
_QUERY_CREDENTIAL = re.compile(r"""(?i)[?&](?:key|api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token"""
                               r"""|token|secret|client[_-]?secret|password|passwd|pwd)=([^&\s'"#<>]{16,200})""")
_HEX32 = re.compile(r"[0-9A-Fa-f]{32,128}")
_DIGEST_CONTEXT = re.compile(r"(?i)cach|hash|md5|sha-?\d|checksum|digest|etag|integrity|fingerprint")


# -- a game server's credentials ---------------------------------------------------------------------------------
# Source's dedicated server (developer.valvesoftware.com "Command line options", "Steam Game Server Account
# Management"): +sv_setsteamaccount takes the login token, -authkey the Web API key; the password cvars alike.
_GAME_SERVER = re.compile(r"""(?i)(?:(?<![\w+-])[+]?|(?<![\w-])(?:set|seta|sets)\s+)(sv_setsteamaccount|sv_password"""
                          r"""|rcon_password|sv_rcon_password|g_password|rconpassword|-authkey|(?:[\w]+_)?gslt)"""
                          r"""(?:[ \t]+|=)"?([^\s"]{4,200})"?""")


# -- a login after "as" on a line that connects --------------------------------------------------------------
_CONNECTS = re.compile(r"(?i)\b(?:connect\w*|log(?:ged|ging)?[ -]?in|login|logon|authenticat\w*|sign(?:ed|ing)?[ -]in"
                       r"|bind\w*)\b")
_AS_LOGIN = re.compile(r"""(?<!\S)as\s+['"]?[\w.@\\-]{1,64}['"]?\s*/\s*['"]?([^\s/'"]{6,128}?)['"]?(?=[\s.,;)]|$)""")


# -- a URL's password holding "@" ----------------------------------------------------------------------------
_AT_PASSWORD_URL = re.compile(r"""://[^\s:/@'"]*:([^\s/?#'"]*@[^\s/?#'"]*)@[\w-]+(?:\.[\w-]+)*(?::\d+)?(?![\w@])""")


# -- a Tuya device's local key -------------------------------------------------------------------------------
_LOCAL_KEY = re.compile(r"""(?i)['"]?(?:local[_-]?key|localKey)['"]?\s*(?:[:=]|=>)\s*(['"]?)([^\s'",]{10,64})\1"""
                        # tuya-cli's and tinytuya's command lines: `--key KEY` beside `--id`.
                        r"""|\b(?:tuya[\w-]*|tinytuya)\b[^\n]*?--key[=\s]+(['"]?)([^\s'"]{10,64})\3""")
_TUYA_CALL = re.compile(r"""\b(?:tinytuya\.)?(?:Outlet|Bulb|Cover)?Device\(\s*(?:dev_id\s*=\s*)?(['"])[\w]+\1\s*,\s*"""
                        r"""(?:address\s*=\s*)?(['"])[\w.]+\2\s*,\s*(?:local_key\s*=\s*)?(['"])([^'"\n]{10,64})\3""")
_RECORD_KEY = re.compile(r""""key"\s*:\s*"([^"\n]{10,64})\"""")
_DEVICE_RECORD = re.compile(r""""(?:id|gwId|devId|dev_id)"\s*:""")
_DEVICE_ADDRESS = re.compile(r""""(?:ip|address|mac)"\s*:""")
_YAML_DEVICE_KEY = re.compile(r"""(?m)^[ \t]*-?[ \t]*(?:local_)?key:[ \t]*['"]?([^\s'"]{10,64}?)['"]?[ \t]*$""")
_YAML_DEVICE_ID = re.compile(r"(?m)^[ \t]*-?[ \t]*(?:id|dev_id|device_id|gwId|devId):")
_YAML_DEVICE_ADDRESS = re.compile(r"(?m)^[ \t]*-?[ \t]*(?:ip|address|host|mac):")


def _options(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _PASSWORD_OPTION.finditer(line):
        value = match.group(3)
        if not value.startswith(("-", "$", "%", "<", "{")) and (check(value) or _short_password(value)):
            yield match.span(3)


def _quoted_pairs(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _QUOTED_PAIR.finditer(line):
        name, value = match.group(2), match.group(4)
        if not secret_setting(name) or validation_rule(value) or reference_lead(value):
            continue
        password = _PASSWORD_NAME.search(re.split(r"[-_.]|(?<=[a-z])(?=[A-Z])", name)[-1]) is not None
        if check(value) or (password and _short_password(value)):
            yield match.span(4)
    for match in _QUOTED_ASSIGNMENT.finditer(line):
        value = match.group(3)
        if secret_setting(match.group(2)) and not reference_lead(value) and check(value):
            yield match.span(3)


_KEYED = re.compile(r"""(?<![\w.-])['"]?([A-Za-z_][\w.-]{0,63})['"]?[ \t]*(?::|=|=>)[ \t]*"""
                    r"""(['"]?)([A-Za-z0-9]{5,64})\2[ \t]*(?:[,;}]|$)""")


def _short_passwords(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _KEYED.finditer(line):
        name = match.group(1)
        last = re.split(r"[-_.]|(?<=[a-z])(?=[A-Z])", name)[-1]
        if secret_setting(name) and _PASSWORD_NAME.fullmatch(last) and _short_password(match.group(3)):
            yield match.span(3)


def _salts(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _APP_SALT.finditer(line):
        group = 3 if match.group(3) else 4  # quoted (WordPress' salts hold any symbol) or bare
        value = match.group(group)
        if (" " not in value and not reference_lead(value) and not placeholder(value)
                and (_HEX32.fullmatch(value) or check(value))):
            yield match.span(group)


def _queries(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _QUERY_CREDENTIAL.finditer(line):
        value = match.group(1)
        # A digest as a cache's or an object's key (`/cache?key=<md5>`): its line says hash, checksum, cache.
        if _DIGEST_CONTEXT.search(line) and _HEX32.fullmatch(value):
            continue
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
        group = 2 if match.group(2) else 4
        if check(match.group(group)):
            yield match.span(group)
    for match in _TUYA_CALL.finditer(line):
        if check(match.group(4)):
            yield match.span(4)


# -- a quoted literal led by "$" --------------------------------------------------------------------------------
# `$dbpass = '$UiLggBuJ6c9Hu';`, `DB_PASSWORD: "$k8Qz3mVw"`: detect-secrets drops any value led by "$" as a
# variable (its is_prefixed_with_dollar_sign filter); a generated name after the "$" makes it a password's symbol.
_DOLLAR_LITERAL = re.compile(r"""(?<![\w.-])\$?['"]?([A-Za-z_][\w.-]{1,63})['"]?[ \t]*(?::=|=>|[:=])[ \t]*"""
                             r"""(['"])(\$(?:(?!\2)[^\s\\]){7,200})\2""")


def _dollar_literals(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _DOLLAR_LITERAL.finditer(line):
        value = match.group(3)
        name = match.group(1)
        # A name glued to its password word counts too (`$dbpass`, `mysqlpwd`).
        password = _PASSWORD_NAME.search(re.split(r"[-_.]|(?<=[a-z])(?=[A-Z])", name)[-1]) is not None
        if (secret_setting(name) or password) and generated_dollar_name(value) and check(value):
            yield match.span(3)


# -- a value where a lookup's name goes -----------------------------------------------------------------------
# `'PASSWORD': config('icav3XfwAB$$e')`, `DB_PASS = os.getenv("k9#Qz!2mWx")`: the setting's own value written
# into an environment lookup (python-decouple's config, django-environ's env, os.getenv ...), which takes a
# variable's name; a literal no variable can be named (a symbol besides "_", ".", "-") is the value itself.
_LOOKUP_GIVEN_VALUE = re.compile(r"""(?<![\w.-])\$?['"]?([A-Za-z_][\w.-]{1,63})['"]?[ \t]*(?::=|=>|[:=])[ \t]*"""
                                 r"""(?:\w+\.)*(?:config|env|getenv|get_env|environ\.get|ENV\.fetch|getProperty)"""
                                 r"""[ \t]*\([ \t]*(['"])((?:(?!\2)[^\s\\]){6,200})\2""")


def _lookups_given_values(line: str, check: Check) -> Iterator[tuple[int, int]]:
    for match in _LOOKUP_GIVEN_VALUE.finditer(line):
        name, value = match.group(1), match.group(3)
        password = _PASSWORD_NAME.search(re.split(r"[-_.]|(?<=[a-z])(?=[A-Z])", name)[-1]) is not None
        if ((secret_setting(name) or password) and re.fullmatch(r"[\w.-]+", value) is None
                and not reference_lead(value) and check(value)):
            yield match.span(3)


_FORMS: tuple[tuple[tuple[str, ...], Callable[[str, Check], Iterator[tuple[int, int]]]], ...] = (
    (("-",), _options), (("'", '"'), _quoted_pairs), ((":", "="), _short_passwords), (("alt", "ALT", "Salt"), _salts),
    (("?", "&"), _queries), (("sv_", "rcon", "authkey", "g_password", "gslt", "GSLT"), _game_servers),
    ((" as ",), _as_logins),
    (("://",), _at_passwords), (("ocal", "Device(", "tuya"), _local_keys),
    (("'$", '"$'), _dollar_literals), (("(",), _lookups_given_values))


# A regular expression's marks (`([a-z0-9]+)`, `\d{6}`, `(?:...)`, `.*`): a pattern that matches a secret, not one.
_PATTERN = re.compile(r"\[[^\]]*-[^\]]*\][+*?{]|\\[dwsSbB]|\(\?|\)[+*?]|\.\*|\.\+")


def line_findings(line: str, made_like_one: Check) -> set[tuple[int, int]]:
    """Spans of `line` (start, end: character offsets) that each form above gives, whose value `made_like_one`
    accepts (secret_positional.credential_like) or, under a password's name, _short_password; not a regular
    expression's pattern (`token=([a-z0-9]+)`)."""
    spans: set[tuple[int, int]] = set()
    for cues, form in _FORMS:
        if any(cue in line for cue in cues):
            spans.update(span for span in form(line, made_like_one) if not _PATTERN.search(line[slice(*span)]))
    return spans


# -- across lines ----------------------------------------------------------------------------------------------
# A line that names an auth file (OpenVPN's `auth-user-pass FILE`, a `cat` of auth.txt, pass.txt, login.conf ...),
# then its two lines: a user, then a password.
_AUTH_FILE = (r"""(?:auth-user-pass\s+\S+|[\w./~-]*(?<![\w-])(?:auth|pass|passwd|password|login|logins|creds?"""
              r"""|credentials|userpass|up)\.(?:txt|conf|cfg))""")
# The file's name starts where a path does (not inside a run of path characters): a long line is read once, not
# once from each of its characters.
_AUTH_FILE_LINES = re.compile(r"(?m)^[^\n]*?(?<![\w./~-])" + _AUTH_FILE
                              + r"""[^\n]*\n[ \t]*[\w.@+\\-]{1,64}[ \t]*\n[ \t]*([^\s'"`]{6,200})[ \t]*$""")
_PRINTF_LOGIN = re.compile(r"""\b(?:printf|echo\s+-e)\s+(['"])[\w.@+-]{1,64}\\n([^\s'"\\]{6,200})(?:\\n)?\1"""
                           r"""\s*>>?\s*\S""")
# A value put into a field ("When I insert `VALUE` into that field", "type 'VALUE' in the box"): a password's when
# a password word stands in the sentences before it (the field's name) or in the field's own words.
_INTO_FIELD = re.compile(r"""(?i)\b(?:insert|enter|type|put|paste|fill\s+in|write|wrote)(?:s|ed|d|ing)?\s+"""
                         r"""(?:in\s+)?([`'"])([^\s`'"]{4,64})\1\s+(?:in|into|as)\s+(?:that|the|this|my|your)\s+(?:[\w-]+\s+){0,2}?(?:field|box|input|prompt"""
                         r"""|textbox)\b""")
# ... and the field first: "In the API Key field I pasted `VALUE`", "in the password box, type 'VALUE'".
_FIELD_THEN_VALUE = re.compile(r"""(?i)\bin\s+(?:the|that|this|my)\s+([^\n.;,]{1,40}?)\s+"""
                               r"""(?:field|box|input|prompt|textbox)\b[\s,]+(?:I\s+|we\s+|you\s+)?(?:then\s+)?(?:insert|enter|type|put|paste|write|wrote)"""
                               r"""(?:s|ed|d|ing)?\s+([`'"])([^\s`'"]{4,64})\2""")
_PASSWORD_MENTION = re.compile(r"(?i)\b(?:" + _PASSWORD_END + r"|" + alternation(PASSWORD_WORDS) + r")\b")


_AUTH_USER_PASS = re.compile(r"\bauth-user-pass[ \t]+['\"]?([^\s'\"]+)")
_TWO_LINES = r"""[^\n]*\n[ \t]*[\w.@+\\-]{1,64}[ \t]*\n[ \t]*([^\s'"`]{6,200})[ \t]*$"""


def text_findings(text: str, made_like_one: Check) -> set[tuple[int, int]]:
    """Spans of `text` for the forms across lines above (an auth file's lines, a value put into a password field)."""
    spans: set[tuple[int, int]] = set()
    if "\n" in text:
        spans.update(m.span(1) for m in _AUTH_FILE_LINES.finditer(text) if made_like_one(m.group(1)))
        # The file an OpenVPN config's auth-user-pass names, named again on a later line (`# /etc/openvpn/creds:`).
        for named in _AUTH_USER_PASS.finditer(text):
            again = re.compile(r"(?m)^[^\n]*" + re.escape(named.group(1).rsplit("/", 1)[-1]) + _TWO_LINES)
            spans.update(m.span(1) for m in again.finditer(text, named.end()) if made_like_one(m.group(1)))
    if "\\n" in text:
        spans.update(m.span(2) for m in _PRINTF_LOGIN.finditer(text) if made_like_one(m.group(2)))
    for match in _INTO_FIELD.finditer(text):
        value = match.group(2)
        if ((made_like_one(value) or _short_password(value))
                and _PASSWORD_MENTION.search(text, max(0, match.start() - 300), match.end())):
            spans.add(match.span(2))
    for match in _FIELD_THEN_VALUE.finditer(text):
        value, field = match.group(3), match.group(1)
        if ((made_like_one(value) and WORD.search(field))
                or (_short_password(value) and _PASSWORD_MENTION.search(field))):
            spans.add(match.span(3))
    for match in _YAML_DEVICE_KEY.finditer(text):  # a device list in YAML: `- id: ...`, `key: ...`, `ip: ...`
        around = text[max(0, match.start() - 200):match.end() + 200]
        if _YAML_DEVICE_ID.search(around) and _YAML_DEVICE_ADDRESS.search(around) and made_like_one(match.group(1)):
            spans.add(match.span(1))
    for match in _RECORD_KEY.finditer(text):  # a device record: {"id": ..., "key": ..., "ip": ...}
        start, end = text.rfind("{", 0, match.start()), text.find("}", match.end())
        record = text[start:end] if start >= 0 and end > 0 else ""
        if _DEVICE_RECORD.search(record) and _DEVICE_ADDRESS.search(record) and made_like_one(match.group(1)):
            spans.add(match.span(1))
    return spans
