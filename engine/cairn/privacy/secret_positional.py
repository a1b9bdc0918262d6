"""Credentials that their place gives away, with no credential word beside them.

A password is often written where only its position says what it is: the argument after a user name in a call
(`new mysqli(host, user, PASS, db)`, `DriverManager.getConnection(url, user, PASS)`), the literal key of a
signing call (`jwt.sign(payload, 'SECRET')`), the value after a user option (`-u USER -P PASS`, `lftp -u
USER,PASS`), the positional argument of a command that takes one (`poetry config http-basic.REPO USER PASS`,
`snyk auth TOKEN`, `importprivkey KEY`), a mail account's `user@host:PASS`, the segment of a webhook URL after
its hook (`.../bot/v2/hook/UUID`, `hooks.zapier.com/hooks/catch/ID/HOOK/`, Teams'
`/webhook/GROUP@TENANT/IncomingWebhook/...`), the `send` that answers an `expect`ed password prompt, a value
on its own line under a `user:` line, a credentials file's `user:PASS` lines (rsyncd.secrets, chap-secrets,
passwd-s3fs, davfs2), an Oracle `user/PASS@host` connect string, a login before a host (`sa:PASS@10.0.0.5`), a
tool's `HOST sa PASS` arguments, Windows' `/p:PASS`, Dovecot's `{PLAIN}PASS`, and a literal written into a
`$password` variable in prose, a base64 literal its line decodes
(secret_encoded). The place is the signal; the value must still be made like a secret
(credential_like: generated or chosen as a password, not a name, a number, a path, a version or a
placeholder). Pure functions of strings; scrub runs line_findings on each line beside the rule sets
(secret_rules.find) and text_findings on a whole text beside secret_blocks.block_findings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from . import secret_cues, secret_encoded, secret_named
from .secret_blocks import secret_setting
from .secret_rules import ACCOUNT, NOT_A_SECRET_CONTEXT, PASSWORD_WORD, WORD, look_alike
from .secret_values import (generated_token, in_runs, password_like, placeholder, public_key, random_letters,
                            random_looking, short_random, stated_password)
from .secret_words import USER_WORDS, alternation

KIND = "Positional Credential"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def credential_like(value: str, *, uuid: bool = False) -> bool:
    """Whether `value`, found where a credential stands, is made like one: generated (random_looking,
    short_random, random_letters) or a password people choose with a symbol (password_like); not a
    placeholder, a public key, a reference or another look-alike (secret_rules.look_alike). A bare
    UUID counts only where the place says it is a token (uuid=True)."""
    if len(value) < 6 or placeholder(value) or public_key(value):
        return False
    if _UUID.fullmatch(value):
        return uuid
    if look_alike(value, ""):
        return False
    symbol = any(not c.isalnum() for c in value)
    return (random_looking(value) or short_random(value) or random_letters(value)
            or (password_like(value) and symbol))


# -- a call's arguments --------------------------------------------------------------------------------------
# A string literal among a call's arguments.
_LITERAL = re.compile(r"""(?<![\w\\])(?:[bru]?)(['"])((?:(?!\1)[^\n\\]){1,200})\1""")
# A call that opens a connection or a client with a user and a password, by its name.
_CONNECT_CALL = re.compile(r"(?i)(?:connect|connection|login|logon|signin|sign_in|auth|credential|client|session"
                           r"|open|bind|database|password|passwd|mysqli|pdo|sequelize|engine|pool|ftp|smtp|imap|pop3"
                           r"|ldap|__construct)\w*$")
# The name a call's result is assigned to: `client = `, `const conn = new `, `$db := `.
_ASSIGNED_TO = re.compile(r"([A-Za-z_$][\w$]*)\s*(?::=|=)\s*(?:new\s+|await\s+)?$")
# A literal that names where to connect: a URL, a JDBC/ODBC/DSN string, an IP, localhost, a host:port, a host.
_HOST_LITERAL = re.compile(r"(?i)^(?:[a-z][\w+.-]*:(?://|[a-z]+:)|localhost\b|\d{1,3}(?:\.\d{1,3}){3}\b"
                           r"|[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}(?::\d+)?$|[\w.-]+:\d{2,5}$|(?:host|server|data source)=)")
# A user name: a name, an e-mail address, DOMAIN\\user, an account id (Twilio's AC...), a numeric id (a channel's).
_USER_LITERAL = re.compile(r"[A-Za-z_][\w.@\\+-]{0,63}|\d{4,20}")
# A call that issues or makes a token from an id and a secret (`ChannelAccessToken.issue_stateless(c, ID, SECRET)`).
_TOKEN_CALL = re.compile(r"(?i)token|credential")
# A URL or a DSN (user:password@host ...): the URL rules judge its password.
_LOCATOR = re.compile(r"://|^[^\s:@]+:[^\s@]*@|@\w*\(")
_CALL_REACH = 300
# Words before "(" that open no call.
_NOT_CALLEES = frozenset("if elif while for in and or not return yield await assert print with except lambda".split())
# A Google app password as Gmail shows it, four groups of four letters (`server.login(user, "abcd efgh ijkl mnop")`).
_APP_PASSWORD = re.compile(r"[a-z]{4} [a-z]{4} [a-z]{4} [a-z]{4}")
# A signing algorithm's or an encoding's name, an argument of signing calls beside the key.
_ALGORITHM = re.compile(r"(?i)(?:HS|RS|ES|PS)\d{3}|sha-?\d+|md5|hex|base64|utf-?8")
# A call that signs or verifies with a key given as a literal: JWT libraries, HMAC, a secret key spec.
_SIGNING_CALL = re.compile(r"(?i)(?:\b(?:jwt|jws|jose|jsonwebtoken|JWT)\s*\.\s*(?:sign|encode|verify|decode)"
                           r"|\bcreateHmac|\bhmac\s*\.\s*new|\bHMAC(?:SHA\d+)?|\bSecretKeySpec|\bsignWith"
                           r"|\bHS\d{3}\s*\.\s*(?:sign|verify))\s*$")


def _call_of(line: str, position: int) -> tuple[str, int, int, int] | None:
    """(callee name, start, end, where the callee starts) of the innermost call whose parentheses hold
    `position` on `line`, looked for at most _CALL_REACH characters either side (a call's arguments; a
    minified line is not read whole). A call of a call's result (`require('twilio')(...)`) is named by the
    first call."""
    depth = 0
    for at in range(position - 1, max(-1, position - _CALL_REACH - 1), -1):
        c = line[at]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth:
                depth -= 1
                continue
            if c != "(":
                continue  # an object or a list literal inside the call: keep going out
            # The callee, right before "(" (a tuple after `in (` or `= (` is no call).
            callee_end = at
            if line[:at].endswith(")") and "(" in line[max(0, at - 60):at - 1]:
                callee_end = line.rfind("(", max(0, at - 60), at - 1)  # require('twilio')(...): require
            name = re.search(r"([A-Za-z_$][\w$]*(?:\s*(?:\.|->|::)\s*[A-Za-z_$][\w$]*)*)$",
                             line[max(0, callee_end - 120):callee_end])
            end, depth2, stop = at + 1, 0, min(len(line), position + _CALL_REACH)
            while end < stop and (depth2 or line[end] != ")"):
                depth2 += {"(": 1, ")": -1}.get(line[end], 0)
                end += 1
            if name is None or name.group(1) in _NOT_CALLEES:
                return None
            return name.group(1), at + 1, end, callee_end - len(name.group(1))
    return None


def _call_findings(line: str) -> Iterator[tuple[int, int]]:
    """Spans of the passwords given positionally in calls: the literal after a user name's literal in a
    call that connects (by its name, or by a host literal among its arguments); a signing call's key."""
    literals = list(_LITERAL.finditer(line))
    for i, literal in enumerate(literals):
        value = literal.group(2)
        spaced = _APP_PASSWORD.fullmatch(value) is not None
        if (" " in value and not spaced) or _LOCATOR.search(value) or _ALGORITHM.fullmatch(value):
            continue
        if not (spaced or credential_like(value)):
            continue
        call = _call_of(line, literal.start())
        if call is None:
            continue
        name, start, end, callee_start = call
        if _SIGNING_CALL.search(name):
            yield literal.span(2)
            continue
        previous = literals[i - 1] if i else None
        if (previous is None or previous.start() < start or not _USER_LITERAL.fullmatch(previous.group(2))
                or not re.fullmatch(r"\s*,\s*", line[previous.end():literal.start()])):
            continue  # not right after a user name's literal in the same call
        others = [m.group(2) for m in literals if start <= m.start() < end and m is not literal]
        # The call's own name, or the name its result is given (`twilioClient = twilio(sid, secret)`).
        assigned = _ASSIGNED_TO.search(line, 0, callee_start)
        callee = re.split(r"\.|->|::", name)[-1]
        if (_CONNECT_CALL.search(callee) or _TOKEN_CALL.search(name)
                or (assigned is not None and _CONNECT_CALL.search(assigned.group(1)))
                or any(_HOST_LITERAL.match(o) for o in others)):
            yield literal.span(2)


# -- commands ------------------------------------------------------------------------------------------------
# A user option, then (a few options later) a password option: `-u sensor01 -P SECRET`, `--user ci --password X`.
_USER_THEN_PASSWORD = re.compile(
    r"""(?<!\S)(?:-u|-U|--user(?:name)?)[=\s]+['"]?[^\s'",]+['"]?"""
    r"""(?:\s+(?!-[pP]\b|--pass)-{1,2}[\w-]+(?:[=\s]+(?!-)\S+)?){0,4}"""  # other options between
    r"""\s+(?:-[pP]|--pass(?:word|wd)?|--pw)(?:=|\s+)['"]?([^\s'"]{4,200})""")
# A user and a password joined by a comma in a user option (`lftp -u USER,SECRET`).
_USER_COMMA_PASSWORD = re.compile(r"""(?<!\S)(?:-u|--user)\s+['"]?[\w.@\\-]+,([^\s'",]{4,200})""")
# Commands and config lines that take a credential as a positional argument, each with the text a line
# must hold for it to be tried (most lines of prose hold none).
_POSITIONAL_FORMS = (
    (("http-basic",), re.compile(r"""\bpoetry\s+config\s+http-basic\.\S+\s+(?!-)\S+\s+['"]?([^\s'"]{4,200})""")),
    (("bundle",), re.compile(  # bundle config HOST USER:PASS
        r"""\bbundle\s+config\s+(?:--\w+\s+)*(?!-)[\w.-]+\.[\w.-]+\s+['"]?[^\s:'"]+:([^\s'"]{4,200})""")),
    (("privkey", "importwallet"), re.compile(  # a WIF key
        r"""\b(?:importprivkey|importwallet|dumpprivkey)\s+['"]?([1-9A-HJ-NP-Za-km-z]{50,52})""")),
    (("auth", "set-token"), re.compile(  # a command's subcommand: snyk auth TOKEN, ngrok config add-authtoken
        r"""(?m)(?:^|(?<=[$>;&|]))\s*(?:sudo\s+)?(?!(?:the|a|an|my|our|your|this|that|new|old)\s)[\w.-]+"""
        r"""(?:\s+[\w.-]+)?\s+(?:auth|(?:add-)?authtoken|auth-token|set-token)\s+['"]?([^\s'"-][^\s'"]{15,200})""")),
    (("community", "com2sec"), re.compile(  # snmpd.conf
        r"""\b(?:ro|rw)community6?\s+([^\s'"]{4,200})|\bcom2sec6?\s+\S+\s+\S+\s+([^\s'"]{4,200})""")),
    ((" 0 ",), re.compile(r"""\b(?:password|secret)\s+0\s+(\S{4,200})""")),  # Cisco IOS's type 0 (clear text)
    (('" "',), re.compile(r"""^\s*"[\w.@-]+"\s+"([^"\n]{4,200})"\s*$""")),  # PgBouncer's userlist: "user" "password"
)
# A password's hash in PgBouncer's userlist (md5 + 32 hex, SCRAM-SHA-256$...), not the password.
_USERLIST_HASH = re.compile(r"md5[0-9a-f]{32}|SCRAM-SHA-256\$\S+")
# A password stored under a plain-text scheme (Dovecot's passwd-file `user:{PLAIN}SECRET:...`, doc.dovecot.org
# "Password Schemes": PLAIN, CLEAR, CLEARTEXT, PLAIN-TRUNC), not hashed.
_PLAIN_SCHEME = re.compile(r"""\{(?:PLAIN|CLEAR|CLEARTEXT|PLAIN-TRUNC)\}([^\s:'"]{4,200})""")
# A Windows-style password option (xfreerdp's /p:, cmdkey's /pass:, schtasks' /rp, net user's /password:).
_SLASH_PASSWORD = re.compile(r"""(?<!\S)/(?:p|pass|password|rp)(?::|(?<=rp)\s+)['"]?([^\s'"]{4,200})['"]?(?!\S)""")
# A login before a host with no scheme (impacket's `sa:PASS@10.0.0.5`, `user:PASS@db01.acme.io`): its password.
_LOGIN_AT_HOST = re.compile(r"""(?<![\w/:@.%-])[\w.\\-]{1,64}:['"]?([^\s:@/'"]{4,128})['"]?@"""
                            r"""(?:\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z][\w-]*(?:\.[\w-]+)+)(?![\w@])""")
# A mail account's login in a credentials map (Postfix's sasl_passwd, msmtp, fetchmail): user@host:PASS.
_MAIL_LOGIN = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+:([^\s:@/'\"]{8,64})(?!\S)")

# The default of an environment lookup named for a secret: env('SECURITY_SALT', '...'), os.getenv("API_TOKEN",
# "..."), ENV.fetch("SECRET_KEY_BASE", "..."), ${DB_PASSWORD:-...}, Spring's ${jwt.secret:...}; as a keyword
# and across lines too (django-environ's env("SECRET_KEY",\n default="..."), python-decouple's config(...)).
_ENV_DEFAULT = re.compile(r"""(?:\benv(?:\.\w+)?|getenv|environ\.get|ENV\.fetch|getProperty|Env\.get|\bconfig)"""
                          r"""\s*\(\s*['"]([\w.-]+)['"]\s*,\s*(?:default\s*=\s*)?['"]((?:[^'"\n$]|\$(?![{(]))"""
                          # "$" inside is a password's symbol (`2@c3=_$fa)19!...`) unless it opens ${...} or $(...).
                          r"""{8,200})['"]"""
                          r"""|\$\{([\w.-]+):-?([^}\s'"$]{8,200})\}""")


# A user option given a generated token (`mosquitto_pub -u TOKEN`: ThingsBoard's device access token is the MQTT
# user name, thingsboard.io/docs/reference/mqtt-api): the token is the credential.
_TOKEN_USER = re.compile(r"""(?<!\S)(?:-u|--username)[=\s]+['"]?([A-Za-z0-9_-]{16,64})['"]?(?!\S)""")


# A long generated token that ends its line after a colon, a credential's word earlier on the line though a
# sentence ends between (`トークンを発行しました。サーバーに入れてください: TOKEN`): what was issued, given.
_GIVEN_AT_END = re.compile(r"[:：][ \t]*([A-Za-z0-9+/_-]{32,200}={0,2})[ \t]*$")


_SENTENCE_END = re.compile(r"[。．！？]|[.!?]\s")
# A clause's comma (`der API-Key für Staging, bitte nicht weitergeben: TOKEN`): the one clause that
# secret_rules.prose_findings reads stops short of the credential's word, which names the thing itself when no
# word about it follows (`token cache`, `key length`: secret_detectors.about_name).
_CLAUSE_COMMA = re.compile(r"[，]|,\s")
_WORD_THEN = re.compile(r"[\w-]*(?:[\s_-]+([^\W\d_]+))?")


def _given_at_end(line: str) -> Iterator[tuple[int, int]]:
    """The span of _GIVEN_AT_END's token when a sentence ends between the credential's word and the colon, or a
    clause's comma after a word naming the credential itself (in one clause, secret_rules.prose_findings judges
    it; a cache's `key: macOS-gradle-...` is no such line)."""
    match = _GIVEN_AT_END.search(line)
    if not match or not generated_token(match.group(1)):
        return
    ends = [m.start() for m in _SENTENCE_END.finditer(line, 0, match.start())]
    if ends and WORD.search(line, 0, ends[-1]):
        yield match.span(1)
        return
    commas = [m.start() for m in _CLAUSE_COMMA.finditer(line, 0, match.start())]
    words = list(WORD.finditer(line, 0, commas[-1])) if commas else []
    if words and not any(_about_word(line, w.end()) for w in words):
        yield match.span(1)


def _about_word(line: str, end: int) -> bool:
    from .secret_detectors import about_name  # secret_detectors imports detect-secrets: loaded when used

    following = _WORD_THEN.match(line, end)
    word = following.group(1) if following is not None else None
    return word is not None and (word.lower() in _HOLDERS or about_name("x_" + word))


# What holds credentials rather than being one (`token cache`, `key store`, `secret list`).
_HOLDERS = frozenset("cache caches cached store stores storage list lists table vault vaults ring chain".split())


# What a line must hold for each of the other patterns to have a chance.
_COMMAND_CUES = ((("-u", "-U", "--user"), _USER_THEN_PASSWORD), (("-u", "--user"), _USER_COMMA_PASSWORD),
                 (("@",), _MAIL_LOGIN), (("{PLAIN", "{CLEAR"), _PLAIN_SCHEME), (("/p", "/rp"), _SLASH_PASSWORD),
                 (("@",), _LOGIN_AT_HOST))


def _command_findings(line: str) -> Iterator[tuple[int, int]]:
    for cues, pattern in (*_COMMAND_CUES, *_POSITIONAL_FORMS):
        if not any(cue in line for cue in cues):
            continue
        for match in pattern.finditer(line):
            group = next(g for g in range(1, (match.lastindex or 0) + 1) if match.group(g))
            value = match.group(group)
            if (not value.startswith(("$", "%", "<", "{")) and not _USERLIST_HASH.fullmatch(value)
                    and credential_like(value, uuid=(cues, pattern) in _POSITIONAL_FORMS)):
                yield match.span(group)


# -- webhook URLs --------------------------------------------------------------------------------------------
# A URL whose host or path names a hook or a bot: its secret is the path after the hook, or a query's key.
_URL = re.compile(r"""https?://([^\s/'"<>?#]+)(/[^\s'"<>?#]*)?(\?[^\s'"<>#]*)?""")
_HOOK_SEGMENT = re.compile(r"(?i)^(?:web)?hooks?$|^(?:incoming-?)?webhooks?$|^robot$")
_HOOK_HOST = re.compile(r"(?i)^(?:hooks?|webhooks?)\.")
# A path segment that names what the next one is (IFTTT's maker URL: /trigger/EVENT/with/key/KEY).
_NAMED_SEGMENT = re.compile(r"(?i)key|token|secret|apikey|api_key|password")
_HOOK_QUERY = re.compile(r"[?&](?:key|token|access_token|secret|sign)=([^&\s'\"#]{6,200})")
_BROWSING = re.compile(r"/(?:tree|blob|commit|commits|raw|src|edit|pull|pulls|issues|releases|tags?|wiki)(?:/|$)")
# Segments between the hook and its secret: a number (an account), a short word (catch, send, services).
_HOOK_PASSING = re.compile(r"\d+|[a-z]{1,12}|v\d+")
# A hook's first segment that pairs two ids (Microsoft Teams' connector URL: /webhook/GROUP@TENANT/IncomingWebhook/
# KEY/CONNECTOR, learn.microsoft.com "Create an Incoming Webhook"): the rest of the path is its secret.
_ID_PAIR = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}@[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}", re.I)


def _webhook_findings(line: str) -> Iterator[tuple[int, int]]:
    for url in _URL.finditer(line):
        path = url.group(2) or ""
        segments = path.split("/")
        hooked = bool(_HOOK_HOST.match(url.group(1)))
        browsing = _BROWSING.search(path) is not None  # github.com/acme/hooks/commit/3f9a...: a repository's page
        offset = url.start(2)
        for i, segment in enumerate(segments[:-1]):
            following = segments[i + 1]
            if _NAMED_SEGMENT.fullmatch(segment) and credential_like(following):
                start = offset + sum(len(s) + 1 for s in segments[:i + 1])
                yield start, start + len(following)
        for i, segment in enumerate(segments if not browsing else ()):
            if not hooked:
                hooked = bool(_HOOK_SEGMENT.match(segment))
            elif segment and not _HOOK_PASSING.fullmatch(segment):
                if _UUID.fullmatch(segment) or _ID_PAIR.fullmatch(segment) or (
                        re.fullmatch(r"[A-Za-z0-9_-]{6,200}", segment)
                        and re.search(r"\d", segment) and re.search(r"[A-Za-z]", segment)
                        and not re.match(r"[a-z]{2,6}_", segment)):
                    start = offset + sum(len(s) + 1 for s in segments[:i])
                    yield start, url.start(2) + len(path.rstrip("/"))
                break
        if hooked and url.group(3):
            for query in _HOOK_QUERY.finditer(url.group(3)):
                value = query.group(1)
                if _UUID.fullmatch(value) or credential_like(value):
                    yield url.start(3) + query.start(1), url.start(3) + query.end(1)


# -- passphrases of words -----------------------------------------------------------------------------------
# A quoted value of words after an option named for a password (`gpg --passphrase 'violet timber ...'`).
_QUOTED_OPTION = re.compile(r"""(?<!\S)--?[\w-]*(?:pass(?:phrase|word|wd)?|pw|secret|token)(?:=|\s+)"""
                            r"""(['"])([^'"\n$<{%]{4,200})\1""")
# Words after a password word and a colon, to the end of the line (`mật khẩu ví: bridge ledger needle jungle`).
_WORDS_TO_END = re.compile(r"[:=：]\s*((?:[a-z]{3,9}[ .-]){3,11}[a-z]{3,9})\s*$")
# Words after a password word that make the line about passwords, not one: "password reset: ...".
_ABOUT_PASSWORD = re.compile(r"(?i)\s*(?:reset|resets|change[sd]?|expiry|expires|expired|hints?|rules?|requirements?"
                             r"|manager|prompt|policy|strength|length|field|form|page|flow|link|e-?mail)\b")
# Words of prose that a generated passphrase (diceware, BIP-39) does not string together.
_FUNCTION_WORDS = frozenset("""the and for are was not you your our its with from that this have has into onto
    then than when what which who use see ask same set get our out off per via any all new old one two""".split())


def _passphrases(line: str) -> Iterator[tuple[int, int]]:
    for quoted in _QUOTED_OPTION.finditer(line):
        words = quoted.group(2).split()
        if len(words) >= 3 and not _FUNCTION_WORDS.intersection(w.lower() for w in words):
            yield quoted.span(2)
    if _WORDS_TO_END.search(line) is None:
        return  # most lines: WORD's scan below is the costly part
    for word in WORD.finditer(line):
        if not PASSWORD_WORD.search(word.group(0)):
            continue
        match = _WORDS_TO_END.search(line, word.end())
        if (match is None or match.start() - word.end() > 12 or len(line) > 100
                or _ABOUT_PASSWORD.match(line, word.end())):
            continue  # a short line "password: ...", not prose that runs on after the word ("password reset: ...")
        words = re.split(r"[ .-]", match.group(1))
        if len(words) >= 4 and not _FUNCTION_WORDS.intersection(words):
            yield match.span(1)


# -- a generated token as a command option's value ---------------------------------------------------------
# An option's value that a machine generated (secret_values.generated_token), the credential word not needed
# beside it: under a one-letter option (`-p`, `-k`, `-w`, `-K`: opaque, and the usual place of a password or
# key; not the letters that take a file, a name, a tag, a user ...), or under an option whose name holds a
# fragment of one (`--x-api-key`, `--mgmt-tok`, `--dsn`), or as NAME=VALUE (`-e`, `--build-arg`, `--set`)
# whose NAME does; never under an option named for an id, a hash, a cursor, a public value (_NOT_A_SECRET_OPTION).
# An option named for a resource (`--job`, `--run`, `--image`) takes ids that look the same.
_OPTION_VALUE = re.compile(r"""(?<!\S)--?([A-Za-z][\w-]*)(?:=|\s+)['"]?(?:([A-Za-z_][\w.]*)=)?"""
                           r"""([A-Za-z0-9+/_.~=-]{16,200})['"]?(?!\S)""")
_OPAQUE_LETTERS = frozenset("pPkKwWaAsSxXyYzZjJ")
CREDENTIAL_FRAGMENT = re.compile(r"(?i)key|tok|pass|pw|secret|auth|cred|sig|cookie|session|dsn|licen|bearer|otp|cert")
_NOT_A_SECRET_OPTION = re.compile(
    r"(?i)\b(?:id|ids|identifier|uid|uuid|hash|digest|sha\d*|commit|ref|revision|fingerprint|nonce|signature|etag"
    r"|integrity|checksum|md5|request|trace|cursor|page|pagination|continuation|next|marker|sync|resume|state"
    r"|challenge|verifier|public|pub|site|anon|publishable|client"
    r"|file|folder|sheet|doc|video|channel|playlist|device|lineage|serial|address|salt|iv|name|cache|starting|since)\b")


def _option_tokens(line: str) -> Iterator[tuple[int, int]]:
    for match in _OPTION_VALUE.finditer(line):
        option, name, value, start = match.group(1), match.group(2), match.group(3), match.start(3)
        if "://" in value or not generated_token(value.rstrip(".")):
            continue
        named = name or option
        opaque = len(option) == 1 and option in _OPAQUE_LETTERS and not name
        if not opaque and not CREDENTIAL_FRAGMENT.search(named):
            continue
        if any(_NOT_A_SECRET_OPTION.search(n.replace("_", "-")) for n in (named, option)):
            continue
        yield start, start + len(value.rstrip("."))


# -- a password of digits ------------------------------------------------------------------------------------
# A value of digits only under a name whose last word is a password's (`--set redisPassword=73870879`,
# `DB_PASS: "48291736"`): the assignment rules take digits for a setting (a port, a timeout), but a name
# that says password holds a password, a PIN-like one; not a name about one (`PASSWORD_MIN_LENGTH=12`).
_DIGITS_PASSWORD = re.compile(r"""(?i)(?<![\w.-])([a-z][\w.-]*?"""
                              r"""(?:pass(?:word|wd|phrase)?|pwd|requirepass|masterauth))['"]?\s*(?:=|:)\s*['"]?(\d{6,32})(?![\w.:/-])""")
_PASSWORD_SETTING = re.compile(r"(?i)(?:pass(?:word|wd|phrase)?|pwd|requirepass|masterauth)$")


def _digit_passwords(line: str) -> Iterator[tuple[int, int]]:
    for match in _DIGITS_PASSWORD.finditer(line):
        name, digits = match.group(1), match.group(2)
        # Six digits or more, not a run or a repeat (123456, 000000, 654321: a placeholder or a default).
        run = all((int(b) - int(a)) % 10 in (0, 1, 9) for a, b in zip(digits, digits[1:]))
        if secret_setting(name) and _PASSWORD_SETTING.search(name) and not run and len(set(digits)) >= 4:
            yield match.span(2)


def line_findings(line: str) -> list[tuple[str, tuple[int, int]]]:
    """(kind, span) of each credential `line` gives by its place (the module docstring)."""
    spans: set[tuple[int, int]] = set()
    if "(" in line and ("'" in line or '"' in line):
        spans.update(_call_findings(line))
    if " " in line or "}" in line:
        spans.update(_command_findings(line))
    if "://" in line:
        spans.update(_webhook_findings(line))
    if "/" in line and "@" in line:
        spans.update(_connect_strings(line))
    if "'" in line or '"' in line or "`" in line:
        spans.update(_literals_into(line))
    if "." in line and " " in line:
        spans.update(_host_account_passwords(line))
    if " " in line:
        spans.update(_passphrases(line))
    if " -" in line:
        spans.update(_option_tokens(line))
        spans.update(m.span(1) for m in _TOKEN_USER.finditer(line) if generated_token(m.group(1)))
    if ":" in line or "：" in line:
        spans.update(_given_at_end(line))
    if ("ass" in line or "ASS" in line or "wd" in line or "WD" in line or "auth" in line) and (
            _DIGITS_PASSWORD.search(line)):
        spans.update(_digit_passwords(line))
    spans.update(secret_cues.line_findings(line, credential_like))
    spans.update(secret_named.line_findings(line, credential_like))
    spans.update(secret_encoded.line_findings(line, credential_like))
    return [(KIND, span) for span in sorted(spans)]


# -- across lines --------------------------------------------------------------------------------------------
# An expect script's answer to a password prompt: `expect "password:"` then `send "SECRET\r"`.
_EXPECT_SEND = re.compile(r"""(?im)^[ \t]*expect\s+(?:-\w+\s+)*[{"']?([^\n]*)\n(?:[ \t]*\n)?[ \t]*"""
                          r"""send\s+(?:--\s+)?["{]([^"}\n\\$]{4,200})(?:\\[rn])*["}]""")
# A line that names a user, then a value alone on the next line (a chat message's login and password).
_USER_LINE = re.compile(r"(?im)^[ \t]*[-*•]?[ \t]*(?:" + alternation(USER_WORDS) + r")[ \t]*[:=：][ \t]*"
                        r"[^\s:][^\n:]{0,60}\n(?:[ \t]*\n)?[ \t]*([^\s'\"`:]{8,64})[ \t]*$")
# A value alone on its line, then a line that says it was the password ("(that's the password, ...)").
_SAID_AFTER = re.compile(r"(?im)^[ \t]*([^\s'\"`:]{8,64})[ \t]*\n(?:[ \t]*\n)?[ \t]*\(?\s*"
                         r"(?:that'?s|that is|this is|it'?s)\s+the\s+(?:[\w-]+\s+)?"
                         r"(?:password|passphrase|passcode|pin|token|secret|key)\b")


# A shell prompt's command, then one value alone on the next line: what the command printed.
_PROMPT_OUTPUT = re.compile(r"(?m)^[ \t]*[$#>][ \t]+([^\n]{3,200})\n[ \t]*([^\s'\"`]{8,200})[ \t]*$")


def _printed_credentials(text: str) -> Iterator[tuple[int, int]]:
    """Spans of what a command printed whose own name or subcommand names a credential (`argocd admin
    initial-password`, `gh auth token`: the words before its first option); not a word in an option or an
    assignment (`docker run -e DB_PASSWORD=... postgres` prints a container's id) nor in a file's name
    (`cat credentials.yml.enc`)."""
    for match in _PROMPT_OUTPUT.finditer(text):
        words = []  # the command and its subcommands: the words before its first option
        for word in match.group(1).split():
            if word.startswith("-") or word in ("|", "&&", ";"):
                break
            words.append(word)
        parts = [part for w in words if not any(c in w for c in "=./$") for part in re.split(r"[-_]", w)]
        if any(WORD.fullmatch(part) for part in parts) and credential_like(match.group(2)):
            yield match.span(2)


def _env_defaults(text: str) -> Iterator[tuple[int, int]]:
    for match in _ENV_DEFAULT.finditer(text):
        name, value = match.group(1) or match.group(3), match.group(2) or match.group(4)
        if (secret_setting(name) or name.lower().endswith("salt")) and credential_like(value):
            yield match.span(2 if match.group(2) else 4)


# A connecting call's arguments one a line, each line's comment after it (`new Sequelize(\n 'db', // ...\n
# 'root', // ...\n 'SECRET', // ...`): the literal after the user name's, as on one line (_call_findings).
_CALL_OPENS = re.compile(r"([A-Za-z_$][\w$]*)\s*\([ \t]*\n")
_ARG_LINE = re.compile(r"""[ \t]*(['"])([^'"\n]{1,200})\1[ \t]*,?[ \t]*(?:(?://|#|--)[^\n]*)?(?:\n|$)""")


def _call_lines(text: str) -> Iterator[tuple[int, int]]:
    """Spans of the passwords of connecting calls whose literal arguments stand one a line, each maybe with a
    comment in any language (`new Sequelize(\n 'db', // ...\n 'root',\n 'SECRET',`): the literal after a
    user name's, as _call_findings judges one line."""
    for call in _CALL_OPENS.finditer(text):
        if not _CONNECT_CALL.search(call.group(1)):
            continue
        at, args = call.end(), list[re.Match[str]]()
        while len(args) < 6 and (arg := _ARG_LINE.match(text, at)):
            args.append(arg)
            at = arg.end()
        for user, password in zip(args, args[1:]):
            if _USER_LITERAL.fullmatch(user.group(2)) and credential_like(password.group(2)):
                yield password.span(2)


# -- credentials files and connect strings -------------------------------------------------------------------
# A file that holds logins one a line as `user:password` (rsync's secrets file, rsyncd.conf(5) "secrets file";
# pppd's chap-secrets/pap-secrets; s3fs' passwd-s3fs `KEY:SECRET`): named on a line (a comment, a `cat`), then
# its lines; or written by an `echo "user:pass" > FILE`.
_SECRETS_FILE = r"""[\w./~-]*(?:[.-]secrets|davfs2/secrets|passwd-s3fs|\.rsync[\w.-]*\.pass(?:word)?)(?![\w-])"""
_NAMED_FILE = re.compile(r"(?m)^[^\n]*?" + _SECRETS_FILE + r"[^\n]*\n")
_LOGIN_LINE = re.compile(r"""[ \t]*[\w.@+-]{1,64}:([^\s:'"`]{6,200})[ \t]*(?:\n|$)""")
# pppd's chap-secrets and pap-secrets line: client, server, secret, addresses (pppd(8) "AUTHENTICATION"); davfs2's
# secrets line: a URL or mount point, a user, a password (davfs2.conf(5)).
_PPP_LINE = re.compile(r"""[ \t]*"?[\w.@+-]{1,64}"?[ \t]+(?:\*|"?[\w.-]+"?)[ \t]+"?([^\s"]{6,200})"?[^\n]*(?:\n|$)""")
_DAVFS_LINE = re.compile(r"""[ \t]*\S+[ \t]+"?[\w.@+\\-]{1,64}"?[ \t]+"?([^\s"]{6,200})"?[ \t]*(?:\n|$)""")
_ECHO_INTO = re.compile(r"""\becho\s+(?:-\w+\s+)?(['"]?)(?:[\w.@+-]{1,64}:)?([^\s:'"`$]{6,200})\1\s*>>?\s*"""
                        + _SECRETS_FILE)
# Oracle's user/password@host connect string (sqlplus scott/PASS@db, jdbc:oracle:thin:scott/PASS@//host:1521/SID,
# impdp, exp, rman target sys/PASS@cdb): the password between the "/" and the "@".
_USER_SLASH_PASS = re.compile(r"""(?:(?<=jdbc:oracle:thin:)|(?<=jdbc:oracle:oci:)|(?<![\w/@:.-]))"""
                              r"""[A-Za-z_][\w$#]{0,29}/([^\s/@'"]{4,128})@(?://)?[\w.-]+(?::\d+)?""")


def _credentials_files(text: str) -> Iterator[tuple[int, int]]:
    for named in _NAMED_FILE.finditer(text):
        at = named.end()
        form = (_PPP_LINE if "ap-secrets" in named.group(0) else _DAVFS_LINE if "davfs2/" in named.group(0)
                else _LOGIN_LINE)
        while (line := form.match(text, at)) is not None:
            if credential_like(line.group(1)):
                yield line.span(1)
            if line.end() == at or not text.endswith("\n", 0, line.end()):
                break  # the end of the text
            at = line.end()
    for echo in _ECHO_INTO.finditer(text):
        if credential_like(echo.group(2)):
            yield echo.span(2)


# A literal given to a code variable named for a credential, in prose of any language ("escribiendo 'X' en la
# variable $password", "put 'X' into $db_pass", "mets 'X' dans $password"). The variable is one by its sigil, by a
# word for a variable before it ("la variable DB_PASSWORD"), or by its shape (an environment variable's UPPER_SNAKE
# name, a dotted property: spring.datasource.password).
_LITERAL_INTO = re.compile(r"""(['"`])([^\s'"`]{6,64})\1[^\n'"`$@]{1,40}?(?:[$@]|(?<=\s)(?=(?:[A-Z][A-Z0-9]*_"""
                           r"""[A-Z0-9_]+|[a-z][\w-]*(?:\.[\w-]+)+)\b)|\b(?i:variable|var|champ|campo|feld|field)\s+)"""
                           r"""([A-Za-z_][\w.-]{0,60})\b""")


# A tool's positional host, system account and password (`SharpSQLTools.exe 10.0.0.5 sa PASS master`, `mssqlclient
# HOST sa PASS`, `tool db01.acme.io:1433 root PASS`): after an address and an account that comes with a system.
_HOST_ACCOUNT_PASSWORD = re.compile(r"""(?i)(?<!\S)(?:\d{1,3}(?:\.\d{1,3}){3}|[a-z][\w-]*(?:\.[\w-]+)+)"""
                                    r"""(?::\d{1,5})?\s+""" + ACCOUNT + r"""\s+(['"]?)(\S{6,128}?)\1(?=\s|$)""")


def _host_account_passwords(line: str) -> Iterator[tuple[int, int]]:
    for match in _HOST_ACCOUNT_PASSWORD.finditer(line):
        value = match.group(2)
        if not value.startswith(("-", "$", "%", "<", "{")) and (credential_like(value) or password_like(value)):
            yield match.span(2)


def _literals_into(line: str) -> Iterator[tuple[int, int]]:
    for match in _LITERAL_INTO.finditer(line):
        value = match.group(2)  # stated as the credential by the sentence: made like a password is enough (`grupo87`)
        stated = (stated_password(value, 6) and not in_runs(value) and not placeholder(value)
                  and not look_alike(value, "") and not any(c in value for c in "./\\~"))
        if secret_setting(match.group(3)) and (credential_like(value) or stated):
            yield match.span(2)


# What follows the "@" of an image's, a package's or an action's reference, where a connect string has its host:
# a digest (`grafana/grafana:11.2.0@sha256:...`), a version (`actions/checkout@v4`, `org/pkg@1.2.3`: not an IPv4
# address), a tag or a branch.
_NOT_A_HOST = re.compile(r"@(?:(?:sha\d+|sha|md5|blake\d*):|v\d|\d+(?:\.\d+){0,2}(?!\.?\d)"
                         r"|(?:latest|main|master|next|stable|beta|canary|head|dev)\b)", re.IGNORECASE)


def _connect_strings(line: str) -> Iterator[tuple[int, int]]:
    for match in _USER_SLASH_PASS.finditer(line):
        if _NOT_A_HOST.match(line, match.end(1)):
            continue
        if credential_like(match.group(1)) and not match.group(1).startswith(("$", "<", "{", "%")):
            yield match.span(1)


# A command's `-u USER:PASS` on a line continued from the one before (`curl -X POST URL \` then `  -u ACsid:TOKEN`,
# a shell's "\", cmd's "^", PowerShell's "`"): the rule sets want the command's name on the option's line. The
# user may be public (Twilio's account SID); the password after it is the secret (an auth token: 32 hex).
_CONTINUED_USER = re.compile(r"""(?:\\|\^|`)[ \t]*\r?\n[ \t]*(?:-u|--user)[=\s]+(['"]?)[^\s:'"]+:"""
                             r"""([^\s'"]{6,200})\1(?!\S)""")
_HEX_TOKEN = re.compile(r"[0-9a-f]{32,64}")


def _continued_users(text: str) -> Iterator[tuple[int, int]]:
    for match in _CONTINUED_USER.finditer(text):
        value = match.group(2)
        if not value.startswith(("$", "<", "{", "%")) and (credential_like(value) or _HEX_TOKEN.fullmatch(value)):
            yield match.span(2)


def text_findings(text: str) -> list[tuple[str, tuple[int, int]]]:
    """(kind, span in `text`) of each credential a whole text gives by its place across lines, or on one
    (an environment lookup's default)."""
    out = []
    if "secrets" in text or ".pass" in text or "passwd-s3fs" in text:
        out += [(KIND, span) for span in _credentials_files(text)]
    if any(cue in text for cue in ("env", "Env", "ENV", "getProperty", "${", "config")):
        out += [(KIND, span) for span in _env_defaults(text)]
    if "send" in text:
        for match in _EXPECT_SEND.finditer(text):
            prompt = match.group(1)
            if WORD.search(prompt) and not placeholder(match.group(2)):
                out.append((KIND, match.span(2)))
    if "\n" in text:
        out += [(KIND, span) for span in _printed_credentials(text)]
    if "-u" in text or "--user" in text:
        out += [(KIND, span) for span in _continued_users(text)]
    if "(\n" in text or "( \n" in text:
        out += [(KIND, span) for span in _call_lines(text)]
    out += [(KIND, span) for span in sorted(secret_named.text_findings(text, credential_like))]
    for pattern in (_USER_LINE, _SAID_AFTER):
        for match in pattern.finditer(text):
            value = match.group(1).rstrip(".,;")
            if credential_like(value) and not NOT_A_SECRET_CONTEXT.search(match.group(0)):
                out.append((KIND, (match.start(1), match.start(1) + len(value))))
    return out
