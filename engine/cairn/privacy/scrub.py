"""What never reaches a store from a captured session: `<private>` spans and secrets.

`scrub(text)` is applied to every captured turn before anything is written (the turn's text, its
index keys and its vector all come from the scrubbed text):
1. Everything between `<private>` and `</private>` is removed, across lines and inside code fences
   alike (a tag is a tag wherever it stands); an unclosed `<private>` hides the rest of the turn.
2. Secrets are replaced by `[REDACTED:<type>]`, found by Yelp's detect-secrets (its detectors for
   cloud and SaaS keys and tokens, private keys, passwords in URLs and in assignments). Its two
   high-entropy detectors are left out: on a free line of prose they flag commit hashes, uuids and
   ordinary words, which would make exactly what session search is for (a hash, an id) unfindable.
   A private key's whole PEM block is redacted, not just its BEGIN line. Cairn adds detectors of
   its own (secret_detectors.py) for what those miss: Anthropic and OpenAI project keys, unquoted
   `PGPASSWORD=...`-style assignments, a password given in prose.
3. Then Betterleaks' and Microsoft's rule sets (secret_rules.py: ~480 vendor formats and a
   keyword-and-entropy generic rule) and Cairn's rules in the same format (assets/cairn-rules.toml:
   passwords given to commands, Authorization headers of any scheme, URLs' credentials, hyphenated
   vendor prefixes such as `sk-live-` ...) and in prose (secret_rules.prose_findings: a credential
   introduced in a sentence, "the key for the sandbox is ...", a password beside a system account's
   name, a literal its line's comment names a secret), on what detect-secrets left; and, on the whole
   text, a credential whose name and value stand on different lines (secret_blocks.block_findings: a
   Terraform variable's default, a container's env name/value, an option and its value as two
   argument items); and a credential its place gives away with no credential word beside it
   (secret_positional: a password after a user name in a call or a command, a signing call's key, a
   webhook URL's token, expect's answer to a password prompt, a generated token as an option's value, a
   credentials file's lines, an Oracle connect string; and, through it, secret_cues' and secret_named's forms: an
   option or a quoted pair named for a password, an application's salt, a web API's key in a query, a game
   server's token, a login after "as", an auth file's lines).
   Measured on a labelled set of credential sentences and innocent look-alikes
   (bench/secrets_compare.py; figures in docs/benchmarks.md).
4. Whatever found it, a value is kept when it is a placeholder (`your-token-here`, `mypassword`, a
   short lower-case word such as `test`, a Basic credential that decodes to one, words that say what
   goes there: `ghp_yourActualTokenHere`, `myServicePrincipalPassword`, one of the commonest passwords:
   `P@ssw0rd`; secret_values.stand_in, common_password), cut short ("sk-..."), a key its vendor
   documents as public, a public key's DER or a published example (secret_values.public_key), shown as
   a sample by its sentence ("will look something like this:", "e.g." after the form with
   placeholders: secret_rules.sample_context), named public by its sentence (secret_rules.public_context) or by its
   prefix (`client-...`), a Google API key in a Firebase app's config, a password's hash
   (secret_values.hashed), ciphertext (SOPS, Ansible Vault, a SealedSecret, Jasypt's ENC(...), Druid's
   encrypted password), or a URL's default or placeholder login (postgres:postgres), or said public,
   an example or a cache key by its line's trailing comment; a generic rule's value faces the prose
   look-alike tests. An assignment's value that is code (a generator such as `openssl rand -hex 32` or
   `$(...)`, a variable passed to a call, a tuple) or a dummy (`abc123`, a two-word phrase) is no secret,
   nor a word given to another option than a credential's (`--role="Contributor"`).
5. Last, a learned judge (secret_judge: a logistic regression on the finding's rule family, value shape and
   context, chosen by leave-one-split-out) may veto what a keyword, prose, positional, URL or command rule found;
   never a vendor's format. Its asset says whether it is on.

Only counts leave this module (by detector type), never a value.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import secret_blocks, secret_judge, secret_positional, secret_rules, secret_values
from .rule_filters import fails_token_efficiency

PRIVATE_KIND = "<private>"  # the kind a removed private span has in a write's redaction report
_PRIVATE = re.compile(r"<private\b[^>]*>.*?(?:</private\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_PEM_END = re.compile(r"-----END[ A-Z0-9]*PRIVATE KEY( BLOCK)?-----|-----END OpenVPN Static key V\d-----|\Z")
# The first line of a private key block that detect-secrets' list misses: PKCS#8 "BEGIN ENCRYPTED
# PRIVATE KEY", PuTTY's version 3 files (its block ends at the MAC line), OpenVPN's shared static key
# (tls-auth / tls-crypt / secret; a symmetric key, as secret as a private one).
_KEY_BEGIN = re.compile(r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
                        r"|-----BEGIN OpenVPN Static key V\d-----|PuTTY-User-Key-File-\d+:")
_PUTTY_END = re.compile(r"Private-MAC:\s*\S+|\Z")
# What follows a PEM BEGIN line when a key is pasted: its base64 (after a newline, a JSON "\\n" or a
# space) or its headers (Proc-Type: ...). A BEGIN line in prose with no body ("the file starts with
# -----BEGIN ENCRYPTED PRIVATE KEY----- so ...") names a format; there is nothing to redact.
_PEM_MARKER = re.compile(r"-----BEGIN[^\n]*?-----")
_KEY_BODY = re.compile(r"""(?:\s|\\[nr]|["'])*(?:[A-Za-z0-9+/=]{16,}|[A-Z][A-Za-z-]+:[ \t])""")
# Encrypted values, safe to store and random-looking: a SOPS value (ENC[AES256_GCM,data:...,type:str]),
# an Ansible Vault block ($ANSIBLE_VAULT;1.1;AES256 and its hex lines), a SealedSecret's encryptedData.
_SOPS = re.compile(r"ENC\[[A-Z0-9_]+,data:[^\]]*\]")
# Spring Cloud Config's encrypted property, `{cipher}` then hex or base64 (docs.spring.io/spring-cloud-config,
# "Encryption and Decryption"; an optional `{key:name}` prefix names the key), decrypted by the config server.
_SPRING_CIPHER = re.compile(r"\{cipher\}(?:\{[\w:.-]+\})*[A-Za-z0-9+/=]+")
# HashiCorp Vault's transit ciphertext (`vault:v1:<base64>`, developer.hashicorp.com/vault/docs/secrets/transit) and
# Mule's secure property placeholder value (`![<base64>]`, docs.mulesoft.com "Secure Configuration Properties").
_VAULT_TRANSIT = re.compile(r"vault:v\d+:[A-Za-z0-9+/=]{16,}|!\[[A-Za-z0-9+/=]{16,}\]")
_VAULT_HEADER = re.compile(r"\$ANSIBLE_VAULT;\d")
_SEALED_HEADER = re.compile(r"^(\s*)encryptedData:\s*$")
_FIREBASE_CONFIG = re.compile(r"firebaseapp\.com|firebaseio\.com|firebase\.initializeApp|initializeApp\("
                              r"|mobilesdk_app_id|firebase_url|\bfirebaseConfig\b|[\"']current_key[\"']\s*:")
_GOOGLE_API_KEY = re.compile(r"AIza[\w-]{35}")
# Jasypt's encrypted property, ENC(base64) (jasypt.org/encrypting-configuration.html).
_JASYPT = re.compile(r"ENC\([A-Za-z0-9+/=_-]{8,}\)")
# Alibaba Druid's ConfigFilter: `config.decrypt=true` says the data source's password is encrypted with the
# key pair whose public key `config.decrypt.key` gives (github.com/alibaba/druid, ConfigFilter).
_DRUID_DECRYPT = re.compile(r"config\.decrypt\s*=\s*true")
_DRUID_PASSWORD = re.compile(r"(?m)^\s*[\w.-]*password\s*[:=]\s*([A-Za-z0-9+/]{40,}={0,2})\s*$")
# Detectors for what detect-secrets' own miss (Anthropic and OpenAI project keys, unquoted
# `PGPASSWORD=...` assignments, a password given in prose), loaded through its plugin-path setting.
_DETECTORS = Path(__file__).with_name("secret_detectors.py")
# detect-secrets detectors not used (see the module docstring).
_LEFT_OUT = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
_TOKEN_BACK = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOKEN_ON = _TOKEN_BACK | frozenset("+/=.")
_lock = threading.Lock()  # detect-secrets keeps its settings in a module-level global
_plugins_config: list[dict[str, str]] | None = None


@dataclass
class Scrubbed:
    """A scrubbed text and what was taken out: private spans removed, secrets redacted by type."""

    text: str
    private_spans: int = 0
    redactions: Counter = field(default_factory=Counter)
    # Where each redacted secret stood in the text as given: (kind, start, end), character offsets,
    # end exclusive. Never the value.
    places: list[tuple[str, int, int]] = field(default_factory=list)


def strip_private(text: str) -> tuple[str, int]:
    """`text` without its `<private>...</private>` spans, and how many there were."""
    out, n = _PRIVATE.subn("", text)
    return out, n


def private_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each `<private>...</private>` span of `text`, tags included."""
    return [(m.start(), m.end()) for m in _PRIVATE.finditer(text)]


def _original_offset(text: str, position: int) -> int:
    """A position in strip_private(text)'s output, as a position in `text`."""
    removed = 0
    for match in _PRIVATE.finditer(text):
        if match.start() - removed > position:
            break
        removed += match.end() - match.start()
    return position + removed


def _plugins() -> list[dict[str, str]]:
    global _plugins_config
    if _plugins_config is None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class, get_plugins_from_file

        mapping: dict[str, type] = get_mapping_from_secret_type_to_class()
        ours_classes: list[type] = list(get_plugins_from_file(str(_DETECTORS)))
        names = sorted({c.__name__ for c in mapping.values()} - _LEFT_OUT)
        ours = f"file://{_DETECTORS}"
        _plugins_config = [{"name": n} for n in names] + [{"name": c.__name__, "path": ours} for c in ours_classes]
        # detect-secrets caches its name-to-class map on first use: built again under settings
        # that name our file, it holds our detectors too.
        get_mapping_from_secret_type_to_class.cache_clear()
    return _plugins_config


def _detections(line: str) -> list[tuple[str, list[tuple[int, int]]]]:
    """(secret type, spans to redact in `line`) for each secret detect-secrets finds in it."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.core.scan import scan_line

    classes: dict[str, type] = get_mapping_from_secret_type_to_class()
    found: list[tuple[str, list[tuple[int, int]]]] = []
    for secret in scan_line(line):
        value = secret.secret_value or ""
        spans = [m.span() for m in re.finditer(re.escape(value), line)] if value else []
        denylist = getattr(classes.get(secret.type), "denylist", None) or []
        # Some regex detectors report only the token's prefix ("ghp" of a GitHub token): then the
        # whole match is redacted. Others report the secret itself (a URL's password, not its user).
        whole = [m.span() for regex in denylist for m in regex.finditer(line)
                 if m.group(0) != value and m.group(0).startswith(value)]
        if whole and secret.type != "Private Key":
            spans = whole
        if secret_values.public_key(value):
            spans = []  # a Twilio account SID (AC...) in an API URL: public as reported, not widened into the path
        if spans and secret.type != "Private Key":
            spans = [_whole_token(line, start, end) for start, end in spans]
        if secret.type != "Private Key":  # "ghp_XXXX...", "USER:PASSWORD", os.environ[...]: not secrets
            spans = [span for span in spans if not _not_a_secret(line, span)]
        elif _ELIDED_PEM.search(line):  # `# -----BEGIN RSA PRIVATE KEY----- ...`: a header, its body left out
            spans = []
        if secret.type == "Basic Auth Credentials" and _default_credentials(line, value):
            spans = []
        if secret.type == "Secret Keyword":  # `api_key_header = "X-API-Key"`: a name about a secret
            spans = [span for span in spans if not _about_name_before(line, span[0])
                     and not _setting_value(line[slice(*span)]) and not _NAME_AT.fullmatch(line[slice(*span)])]
        if secret.type in ("Secret Keyword", "Secret Assignment"):  # `TOKEN=...  # project token, public`
            spans = [span for span in spans if not secret_rules.commented_public(line, span[1])
                     and not _dummy(line[slice(*span)])]
        if spans:
            found.append((secret.type, spans))
    found += _rule_detections(line, [span for _, spans in found for span in spans])
    every = [span for _, spans in found for span in spans]
    return [(kind, kept) for kind, spans in found
            if (kept := [s for s in spans if not any(_past_at(line, o, s) for o in every)])]


def _past_at(line: str, longer: tuple[int, int], shorter: tuple[int, int]) -> bool:
    """Whether `longer` holds `shorter` and goes on past the "@" that ends it: a URL's password holding "@"
    (`mysql://root:Kq8@I3@localhost`), which a detector stopped at the first "@" and another read to the last."""
    return (longer != shorter and longer[0] <= shorter[0] and shorter[1] < longer[1]
            and line.startswith("@", shorter[1]))


# An ssh or scp destination, user@host[:path] (`scp f root@192.168.0.1:/home`): an address, where a password
# holding "@" has no IPv4 address nor a remote path after it.
_REMOTE_TARGET = re.compile(r"[\w.-]+@(?:\d{1,3}(?:\.\d{1,3}){3}(?::[\w./~-]*)?"
                            r"|[a-z0-9-]+(?:\.[a-z0-9-]+)+:[/~][\w./~-]*)")


# A keyword's value found again where it stands as the name (`password="password"`: the name `password=`
# too): the name, not a value.
_NAME_AT = re.compile(r"[\w.-]+\s*[:=]")


# A PEM header followed on its line by an ellipsis, not a body: what a comment or a doc writes of a key.
_ELIDED_PEM = re.compile(r"PRIVATE KEY\s*-{2,}\s*(?:\.{3}|…)\s*$")


# The rules that say least about what a secret is: a more specific rule's finding on the same span wins.
_GENERIC_RULES = ("Generic Api Key", "Credential In Prose")


def _rule_detections(line: str, taken: list[tuple[int, int]]) -> list[tuple[str, list[tuple[int, int]]]]:
    """gitleaks' rules, Cairn's (secret_rules.py) and the positional forms (secret_positional.py) on `line`:
    what detect-secrets did not already find, one detection per span (a vendor's rule before the generic ones)."""
    found = []
    positional = [secret_rules.Finding(kind, span, "positional")
                  for kind, span in secret_positional.line_findings(line)]  # a password after a user name ...
    for kind, span, _ in sorted(secret_rules.find(line) + positional, key=lambda f: f.kind in _GENERIC_RULES):
        # The whole token: a prose value stops at its clause's length limit, and what a rule leaves
        # of a longer key is as secret as what it matched.
        span = _to_closing_quote(line, *_whole_token(line, *span))
        value = line[slice(*span)]
        if _not_a_secret(line, span) or (kind == "Url Password" and _default_credentials(line, value)):
            continue
        # A generic rule's value (a credential word, then a value) faces prose's look-alike tests, and
        # what its line's trailing comment says of it ("// cache key", "# reCAPTCHA site key, public").
        if kind in (*_GENERIC_RULES, secret_positional.KIND) and secret_rules.commented_public(line, span[1]):
            continue
        # A pagination cursor (`next_page_token=...`, `--continuation-token ...`), named so by what it is assigned to.
        if kind in (*_GENERIC_RULES, "Command Line Secret") and _paging_name(line, span[0]):
            continue
        if _other_option(line, span[0], value):
            continue
        if kind == "Generic Api Key" and (
                secret_rules.look_alike(value, line[max(0, span[0] - 60):span[0]], _generic_word(line, span[0]))
                or _generic_word(line, span[0]).lower() in _NOT_SECRET_LAST_WORDS):
            continue
        # A value given to what is named public (`setPublishableKey("...")`, `PUBLIC_KEY = ...`) by any form.
        if kind in (*_GENERIC_RULES, secret_positional.KIND) and _named_public(line, span[0]):
            continue
        if kind in _GENERIC_RULES and _key_fingerprint(line, span[0], value):
            continue
        if not any(span[0] < end and start < span[1] and not _past_at(line, span, (start, end))
                   for start, end in taken):
            found.append((kind, [span]))
            taken.append(span)
    return found


# A long option right before a value (`--role="`, `--name `): the value is that option's. (A one-letter
# option is opaque: `-p` is a password's.)
_OPTION_BEFORE = re.compile(r"""(?<!\S)--([A-Za-z][\w-]+)(?:=|\s+)['"]?$""")


def _other_option(line: str, start: int, value: str) -> bool:
    """Whether a rule's value is a word given to another option than a credential's, later on the line of one
    (`--password=$SP_PASSWORD --role="Contributor"`): the long option before it names no credential
    (secret_positional.CREDENTIAL_FRAGMENT) and the value reads as text (Betterleaks' token-efficiency test)."""
    option = _OPTION_BEFORE.search(line, max(0, start - 60), start)
    value = value.strip("'\"`")
    # A UUID given to such an option (`az login ... --tenant <uuid>`) is the id of what it names.
    return (option is not None and not secret_positional.CREDENTIAL_FRAGMENT.search(option.group(1))
            and (fails_token_efficiency(value) or _UUID.fullmatch(value) is not None))


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


_NAME_BEFORE = re.compile(r"([A-Za-z][\w.-]*)\W{0,5}$")
# The last word of a name that makes its value no secret: an id (Tencent's SecretId, AccessKeyId), a key
# named public (Mailjet's MJ_APIKEY_PUBLIC).
_NOT_SECRET_LAST_WORDS = frozenset(("id", "ids", "public", "publishable"))


def _generic_word(line: str, start: int) -> str:
    """The last word of the name a generic rule's value is assigned to (`API_TOKEN = ...`: "TOKEN")."""
    match = _NAME_BEFORE.search(line, max(0, start - 60), start)
    return re.split(r"[_.-]|(?<=[a-z])(?=[A-Z])", match.group(1))[-1] if match else ""


def _named_public(line: str, start: int) -> bool:
    """Whether the name a value is assigned to says it is public and not private (`NEXT_PUBLIC_ALGOLIA_KEY`,
    `MJ_APIKEY_PUBLIC`; Next.js, Expo and Nuxt ship `*_PUBLIC_*` variables in the client bundle)."""
    match = _NAME_BEFORE.search(line, max(0, start - 60), start)
    words = {w.lower() for w in re.split(r"[_.-]|(?<=[a-z])(?=[A-Z])", match.group(1))} if match else set()
    # Keys their vendor documents for the browser, beside a secret that signs: Pusher's app key
    # (PUSHER_APP_KEY, VITE_PUSHER_APP_KEY, Laravel Echo's `broadcaster: "pusher", key: ...`;
    # pusher.com/docs/channels/server_api/http-api: "key" is public, "secret" signs), a CAPTCHA's site key
    # (RECAPTCHA_SITE_KEY, TURNSTILE_SITEKEY: reCAPTCHA's, hCaptcha's and Turnstile's docs put it in the page).
    pusher = {"pusher", "key"} <= words or (words == {"key"} and "pusher" in line.lower())
    public = words & {"public", "publishable"} or pusher or {"site", "key"} <= words or "sitekey" in words
    return bool(public) and not words & {"secret", "private", "server", "admin", "write"}


# A host key's fingerprint as SSH tools print it: paramiko's demo server `Read key: <hex>`, `Host key: ...`,
# `key fingerprint is ...`; an MD5 (32 hex, or 16 pairs with colons) or a SHA-1/SHA-256 digest in hex.
_FINGERPRINT_CUE = re.compile(r"(?i)(?:\bread key|\bhost[ _-]?key|\bserver key|fingerprint(?: is)?)\W{0,5}$")
_HEX_DIGEST = re.compile(r"(?i)[0-9a-f]{32}|[0-9a-f]{40}|[0-9a-f]{64}|[0-9a-f]{2}(?::[0-9a-f]{2}){15}")


def _key_fingerprint(line: str, start: int, value: str) -> bool:
    """Whether `value` is a key's fingerprint its line names (_FINGERPRINT_CUE, _HEX_DIGEST): a digest of a
    public key, which identifies it and opens nothing."""
    return (_HEX_DIGEST.fullmatch(value.strip("'\"`")) is not None
            and _FINGERPRINT_CUE.search(line, max(0, start - 40), start) is not None)


def _paging_name(line: str, start: int) -> bool:
    """Whether the name a value is assigned to names a pagination cursor (`next_page_token=...`)."""
    from . import secret_detectors

    match = _NAME_BEFORE.search(line, max(0, start - 60), start)
    words = re.split(r"[_.-]|(?<=[a-z])(?=[A-Z])", match.group(1)) if match else []
    return bool(secret_detectors.PAGING_WORDS.intersection(w.lower() for w in words))


_ASSIGNED_NAME = re.compile(r"""([A-Za-z_][\w.-]*)['"]?\s*(?::=|=>|[:=])\s*['"`]?$""")


def _setting_value(value: str) -> bool:
    """Whether a value assigned to a secret's name is a setting: a boolean, a number, a path, a URL
    (`MYSQL_ALLOW_EMPTY_PASSWORD: "yes"`; secret_detectors.not_secret_value)."""
    from . import secret_detectors

    return secret_detectors.not_secret_value(value)


def _about_name_before(line: str, start: int) -> bool:
    """Whether the value at `start` is assigned to a name about a secret (secret_detectors.about_name)."""
    from . import secret_detectors

    match = _ASSIGNED_NAME.search(line, max(0, start - 80), start)
    return match is not None and secret_detectors.about_name(match.group(1))


def _not_a_secret(line: str, span: tuple[int, int]) -> bool:
    """Whether the token at `span` is a placeholder, a public key or a published example, a key its
    clause names as public (secret_rules.public_context), was cut short on purpose ("sk-lf-...",
    "xapp-…": what follows the span says so), or is an option list's next option (_NEXT_OPTION)."""
    value = line[slice(*span)]
    truncated = line.startswith(("...", "…"), span[1]) or _NOTED_DEFAULT.match(line, span[1]) is not None
    return (truncated or secret_values.masked(value) or secret_values.bracketed(line, span[0])
            or _REMOTE_TARGET.fullmatch(value) is not None
            or any(secret_values.placeholder(v) for v in {value, value.strip("'\"`")})
            or secret_values.public_key(value) or secret_values.public_by_place(line, *span)
            or secret_rules.public_context(line, span[0]) or secret_values.hashed(line, *span)
            or _CLIENT_PREFIX.match(value) is not None or _placeholder_login(value)
            or _IN_TEMPLATE.search(line, max(0, span[0] - 80), span[0]) is not None
            or _NEXT_OPTION.match(value) is not None)


# An option list's next `,name=value` (`password=<password>,vers=3.0`): read past a placeholder, the list goes on.
_NEXT_OPTION = re.compile(r"[,;&][ \t]*[A-Za-z_][\w.-]*=")


# A value its line notes as the documented default (`DB_PASS: P4ssb0lt (->default)`, `pass: admin (default)`):
# what the software's documentation prints, not a secret of this setup.
_NOTED_DEFAULT = re.compile(r"['\"`]?[ \t]*[(\[][ \t]*(?:->|→|=>)?[ \t]*(?:the[ \t]+)?default\b", re.IGNORECASE)


# Inside a template's expression (`{{ Base64Encode .Secrets.x }}`, `${{ secrets.X }}`): what a renderer fills in.
_IN_TEMPLATE = re.compile(r"\{\{-?[^{}]*$")


# Two words of text in lower case (express-session's documented `secret: 'keyboard cat'`, `'clave_bacan'`): a
# phrase, where a generated passphrase draws three words or more.
_TWO_WORDS = re.compile(r"([a-z]{3,12})[ _-]([a-z]{3,12})")


def _dummy(value: str) -> bool:
    """Whether a keyword's or an assignment's value (no vendor's format) is a dummy: an alphabet's or a
    keyboard's run (`abcdefg`, `1234567`: secret_values.SEQUENCE), letters and digits in runs alone
    (`abc123`, `abcd1234`), a validation rule (`required|min:8`), or a phrase of two words of text (_TWO_WORDS)."""
    value = value.strip("'\"`")
    if secret_values.SEQUENCE.search(value) or secret_values.in_runs(value) or secret_values.validation_rule(value):
        return True
    pair = _TWO_WORDS.fullmatch(value)
    return pair is not None and all(fails_token_efficiency(w) for w in pair.groups())


def _placeholder_login(value: str) -> bool:
    """Whether `value` is a URL (a connection string) or a bare `user:password` (curl -u admin:admin) whose
    password is a placeholder (`myusername:mypassword@`), its user name, or a service's default."""
    login = _USER_INFO.search(value) if "://" in value else _LOGIN_PAIR.fullmatch(value)
    return login is not None and (secret_values.placeholder(login.group(2)) or login.group(1) == login.group(2)
                                  or login.group(2).lower() in _DEFAULT_PASSWORDS)


_LOGIN_PAIR = re.compile(r"([^\s:/@]+):([^\s:/@]+)")


# A key its prefix names a client's or a public one (Statsig's `client-...`, documented as safe in an app;
# `public-`, `publishable-`; Toss Payments' client keys live_ck_/test_ck_ and widget keys gck_, which Toss
# documents for the browser beside its secret keys sk_): a secret's prefix says so instead (`secret-...`).
_CLIENT_PREFIX = re.compile(r"(?i)(?:client|public|publishable)[-_](?!secret|private|server)|(?:live|test)_g?ck_")


# Passwords that are a service's documented default, written in local setups and examples.
_DEFAULT_PASSWORDS = frozenset("password postgres root admin secret guest mysql test pass changeme".split())
_USER_INFO = re.compile(r"://([^\s:/@]*):([^\s@/]*)@")


def _default_credentials(line: str, password: str) -> bool:
    """Whether a URL's password in `line` is its user name or a service's default (postgres:postgres)."""
    return any(m.group(2) == password and (password == m.group(1) or password.lower() in _DEFAULT_PASSWORDS)
               for m in _USER_INFO.finditer(line))


def _encrypted_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each encrypted value in `text` (_SOPS, an Ansible Vault block, the lines of a
    SealedSecret's encryptedData): what is found inside is ciphertext, not a secret."""
    spans = [m.span() for m in _SOPS.finditer(text)]
    spans += [m.span() for m in _JASYPT.finditer(text)]
    spans += [m.span() for m in _SPRING_CIPHER.finditer(text)]
    spans += [m.span() for m in _VAULT_TRANSIT.finditer(text)]
    if _DRUID_DECRYPT.search(text):  # Druid's ConfigFilter: the data source's password is ciphertext
        spans += [m.span(1) for m in _DRUID_PASSWORD.finditer(text)]
    offset = 0
    lines = text.split("\n")
    indent: int | None = None  # the indentation of an open encryptedData: or vault block
    for line in lines:
        width = len(line) - len(line.lstrip())
        if indent is not None and line.strip() and width > indent:
            spans.append((offset, offset + len(line)))
        else:
            indent = None
            header = _SEALED_HEADER.match(line)
            if header:
                indent = len(header.group(1))
            elif _VAULT_HEADER.search(line):
                indent = line.find("$ANSIBLE_VAULT") - 1
                spans.append((offset, offset + len(line)))
        offset += len(line) + 1
    return spans


_QUOTED_TAIL = re.compile(r"[.,:!?]+(?=['\"`])")


def _to_closing_quote(line: str, start: int, end: int) -> tuple[int, int]:
    """The span to its closing quote when it stands in quotes and stops short at punctuation (`'#u#^Kq8m%!'`: the
    prose rules leave a sentence's "!" off a value, but a quoted literal holds its last character)."""
    tail = _QUOTED_TAIL.match(line, end) if start > 0 and line[start - 1] in "'\"`" else None
    return (start, tail.end()) if tail and line[tail.end()] == line[start - 1] else (start, end)


def _whole_token(line: str, start: int, end: int) -> tuple[int, int]:
    """The span widened to the whole token around it: some detectors match a fixed-length part of
    a longer key (a Stripe key's first 24 characters, a JWT without its signature), and what they
    leave out is as secret as what they match. Not back across "=" or ":", which end a name."""
    while start > 0 and line[start - 1] in _TOKEN_BACK:
        start -= 1
    while end < len(line) and line[end] in _TOKEN_ON:
        end += 1
    while end > start and line[end - 1] == ".":  # a sentence's full stop is not part of the key
        end -= 1
    return start, end


# CJK text's clause and sentence marks (full-width comma, ideographic comma and full stop, semicolon, marks of
# exclamation and question), one character each: read as a space, offsets unchanged.
_CLAUSE_MARKS = str.maketrans(dict.fromkeys("，、。；！？", " "))


def _line_detections(line: str, offset: int, blocks: list[tuple[str, tuple[int, int]]], *, firebase: bool,
                     encrypted: list[tuple[int, int]]) -> list[tuple[str, list[tuple[int, int]]]]:
    """What _detections finds in `line` (which starts at `offset` of its text) with the text's block
    findings on it, less a Firebase config's Google API key and what lies inside an encrypted span."""
    # JSON inside a string (a log's request body): its escaped quotes read as quotes, same offsets.
    scanned = line.replace('\\"', ' "') if '\\"' in line else line
    if not scanned.isascii():  # a clause's full-width mark ends a value as a space does (`requirepass X，把...`)
        scanned = scanned.translate(_CLAUSE_MARKS)
    detections = _detections(scanned) if len(line) < 20_000 else []
    detections += [(kind, [(a - offset, b - offset)]) for kind, (a, b) in blocks
                   if offset <= a and b <= offset + len(line) and not _not_a_secret(line, (a - offset, b - offset))]
    if "AKIA" in line or "ASIA" in line:  # a key id quoted by AWS's own error message: reported back, no secret
        detections = [(kind, kept) for kind, spans in detections
                      if (kept := [(a, b) for a, b in spans if not secret_values.aws_error_key_id(line, line[a:b])])]
    if firebase:
        detections = [(kind, kept) for kind, spans in detections
                      if (kept := [(a, b) for a, b in spans if not _GOOGLE_API_KEY.fullmatch(line[a:b].strip("'\""))])]
    if encrypted:
        detections = [(kind, kept) for kind, spans in detections
                      if (kept := [(a, b) for a, b in spans
                                   if not any(s <= offset + a and offset + b <= e for s, e in encrypted)])]
    if detections and secret_judge.enabled():  # a learned veto of a look-alike (secret_judge; the asset says if on)
        detections = secret_judge.veto(line, detections)
    return detections


def _redact(text: str) -> tuple[str, Counter, list[tuple[str, int, int]]]:
    """redact_secrets inside detect-secrets' settings (entered once per batch: entering costs more
    than a line's scan); also where each redacted secret stood in `text`: (kind, start, end)."""
    counts: Counter = Counter()
    places: list[tuple[str, int, int]] = []
    if not text.strip():
        return text, counts, places
    out_lines: list[str] = []
    lines = text.split("\n")
    encrypted = _encrypted_spans(text)
    # A Google API key in a Firebase app's config (web or google-services.json) identifies the project
    # and ships in every copy of the app (firebase.google.com/docs/projects/api-keys): public there.
    firebase = _FIREBASE_CONFIG.search(text) is not None
    # A name on one line and its value on another (secret_blocks.block_findings): found on the whole text.
    # And a credential given by its place across lines (secret_positional.text_findings: expect/send ...).
    blocks = secret_blocks.block_findings(text) + secret_positional.text_findings(text) if len(text) < 200_000 else []
    i, offset = 0, 0  # offset: where lines[i] starts in text
    while i < len(lines):
        line = lines[i]
        detections = _line_detections(line, offset, blocks, firebase=firebase, encrypted=encrypted)
        begin = _KEY_BEGIN.search(line)
        marker = _PEM_MARKER.search(line) if begin or any(kind == "Private Key" for kind, _ in detections) else None
        if marker and not _KEY_BODY.match(text, offset + marker.end()):
            begin = None  # a key's format named in prose, no body
            detections = [(kind, spans) for kind, spans in detections if kind != "Private Key"]
        if any(kind == "Private Key" for kind, _ in detections) or begin:
            # The whole PEM block, to its END line (or the end of the text); a PuTTY file to its MAC.
            rest = "\n".join(lines[i:])
            putty = begin is not None and begin.group().startswith("PuTTY")
            block_end = (_PUTTY_END if putty else _PEM_END).search(rest)
            assert block_end is not None  # both patterns match at the end of the text
            block_lines = rest[: block_end.end()].count("\n") + 1
            counts["Private Key"] += 1
            start = begin.start() if putty and begin else line.find("-----BEGIN")
            places.append(("Private Key", offset + max(start, 0), offset + block_end.end()))
            # What follows the END marker on its line is not part of the key: kept (and scanned).
            tail, tail_counts, tail_places = (_redact(rest[block_end.end():].split("\n", 1)[0]) if block_end.group()
                                              else ("", Counter(), []))
            counts.update(tail_counts)
            places += [(k, offset + block_end.end() + a, offset + block_end.end() + b) for k, a, b in tail_places]
            out_lines.append((line[:start] if start >= 0 else "") + "[REDACTED:Private Key]" + tail)
            offset += len("\n".join(lines[i:i + block_lines])) + 1
            i += block_lines
            continue
        spans = sorted({s for _, ss in detections for s in ss})
        for kind, _ in detections:
            counts[kind] += 1
        pieces, last = [], 0
        kind_of = {s: kind for kind, ss in detections for s in ss}
        for start, end in spans:
            if start < last:
                continue  # overlaps a span already redacted
            pieces += [line[last:start], f"[REDACTED:{kind_of[(start, end)]}]"]
            places.append((kind_of[(start, end)], offset + start, offset + end))
            last = end
        out_lines.append("".join(pieces) + line[last:])
        offset += len(line) + 1
        i += 1
    return "\n".join(out_lines), counts, places


def redact_secrets(text: str) -> tuple[str, Counter]:
    """`text` with each secret replaced by `[REDACTED:<type>]`, and the count per type."""
    out = scrub_many([text], strip=False)[0]
    return out.text, out.redactions


RANDOM_TOKEN_CHARS = 20
RANDOM_TOKEN_ENTROPY = 4.5  # detect-secrets' default limit for its Base64HighEntropyString plugin


def random_token(tag: str) -> bool:
    """Whether a tag looks like a generated credential rather than a topic: at least
    RANDOM_TOKEN_CHARS characters, letters and digits, and a Shannon entropy (bits per character, over
    the base64 alphabet, as detect-secrets computes it) of at least RANDOM_TOKEN_ENTROPY. A token with
    no credential word beside it passes every rule that reads prose; as a tag it has no other reading.
    Topics score lower: "postgresql-16-upgrade-plan" 3.9, a random 36-character token 5.0."""
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    if len(tag) < RANDOM_TOKEN_CHARS or not any(c.isdigit() for c in tag) or not any(c.isalpha() for c in tag):
        return False
    return Base64HighEntropyString().calculate_shannon_entropy(tag) >= RANDOM_TOKEN_ENTROPY


def scrub(text: str) -> Scrubbed:
    """Private spans removed, then secrets redacted (see the module docstring)."""
    return scrub_many([text])[0]


def scrub_many(texts: list[str], *, strip: bool = True) -> list[Scrubbed]:
    """scrub() of each text (strip=False: secrets only), detect-secrets configured once for all."""
    from detect_secrets.settings import transient_settings

    out: list[Scrubbed] = []
    with _lock, transient_settings({"plugins_used": _plugins()}):
        for text in texts:
            without, spans = strip_private(text) if strip else (text, 0)
            redacted, counts, places = _redact(without)
            if spans:
                places = [(k, _original_offset(text, a), _original_offset(text, b - 1) + 1) for k, a, b in places]
            out.append(Scrubbed(redacted, spans, counts, places))
    return out
