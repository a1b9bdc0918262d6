"""What a value found beside a credential's name is: random or a word, a placeholder, a hash, a public key.

The scrubber's rules find a name and a value (secret_rules, secret_blocks); these judge the value
itself, so that a placeholder ("<your-key>", "changeme", "mypassword"), a password hash
(bcrypt, Django's pbkdf2_sha256$, LDAP {SSHA}), a public key or a documented example (a
publishable key, jwt.io's sample token, a DER SubjectPublicKeyInfo) is kept, and a random value
is not. Pure functions of strings; no rule set is loaded here.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import Counter
from typing import Any

from .rule_filters import entropy, fails_token_efficiency


PLACEHOLDER = re.compile(
    r"(?i:x{6,}|(?<![a-z0-9])x{3,5}(?![a-z0-9])|\*{3,}|\.{3}|…|your[-_ ]|-here\b|placeholder|changeme|redacted"
    r"|(?:change|replace|fill)[-_ ](?:me|this|it)\b)"
    r"|example|sample|dummy|EXAMPLE|"
    # A run of one letter to the token's end (`AIzaSyAAAAAAAAAAAAAAAA`; X's bearer tokens begin with a run of
    # A's, then the key), or a name in angle brackets after a vendor's prefix
    # (`whsec_<webhook_secret>`, `sk_live_<key>`): what is filled in later.
    r"([A-Za-z])\1{7,}(?![\w+/=-])|<[A-Za-z][\w .-]{2,}>|"
    r"^(?i:os\.environ|os\.getenv|process\.env|system\.getenv|env\[|getenv|environ|config\.|settings\.|secrets\.)"
    r"|^%\(\w+\)[sd]$|^%\w+%$"  # Python's %(NAME)s and a Windows %NAME% (not "%pBVY7...", a password)
    # A Symfony parameter or a Windows variable that begins a path (`%kernel.project_dir%/config/jwt/private.pem`);
    # a property read that ends in a variable's name (`window.ENV?.OPENAI_API_KEY`, `import.meta.env.API_KEY`).
    r"|^%[\w.]+%[/\\]|^[A-Za-z_$][\w$]*(?:\??\.[\w$]+)*\??\.[A-Z][A-Z0-9]*_[A-Z0-9_]+$")


def short_random(value: str) -> bool:
    """Whether `value`, 10 to 64 letters and digits (with "-" or "_"), is generated rather than named:
    digits with letters, or both cases; not words joined (an identifier, text to cl100k's BPE)."""
    if (not 10 <= len(value) <= 64 or not re.fullmatch(r"[A-Za-z0-9_-]+", value) or _IDENTIFIER.fullmatch(value)
            or _GENERATED_NAME.fullmatch(value)):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    if not letters or not (digits or mixed):
        return False
    # In both cases, runs of letters are the words of a name (camelCase); in one, they say nothing.
    if mixed and sum(len(w) for w in _WORDLIKE.findall(value)) / len(value) >= 0.4:
        return False
    return entropy(value) >= 2.8 and not fails_token_efficiency(value)


def generated_token(value: str) -> bool:
    """Whether `value` is a token a machine generated, judged on the value alone (no credential word): 16
    to 200 characters holding upper case, lower case and digits; not hex or a UUID (hashes, ids); not
    prefixed like an object id (`cus_`, `req_`); of high entropy (3.8 bits a character under 24
    characters, 4.2 from 24; a random base62 token has about 5) and not in words (camelCase, Betterleaks'
    token-efficiency test); not a published example, a placeholder, a public key; not base64 of text,
    JSON (`eyJ...`), an SSH key blob (`AAAA...`) or DER. Measured on the spent splits of
    tests/data/credentials, where it alone, as a command option's value, finds 23 of their secrets and
    flags none of their innocent texts (docs/benchmarks.md, branch secrets5)."""
    if not 16 <= len(value) <= 200 or not _THREE_CLASSES.match(value):
        return False
    if re.fullmatch(r"(?:0x)?[0-9a-fA-F-]+", value) or _UUID_IN.search(value) or re.match(r"[a-z]{2,8}_", value):
        return False
    if value.startswith(("eyJ", "AAAA")) or entropy(value) < (3.8 if len(value) < 24 else 4.2):
        return False
    if sum(len(w) for w in _WORDLIKE.findall(value)) / len(value) >= 0.4 or placeholder(value) or public_key(value):
        return False
    return not _decodes_to_data(value) and not fails_token_efficiency(value)


_THREE_CLASSES = re.compile(r"(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])(?=[^0-9]*[0-9])")
_UUID_IN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def _decodes_to_data(value: str) -> bool:
    """Whether `value` is base64 (or base64url) of text (90% printable bytes) or of DER (a certificate, a
    public key): encoded data, not a generated secret."""
    if not re.fullmatch(r"[A-Za-z0-9+/_-]+={0,2}", value):
        return False
    try:
        decoded = base64.b64decode(value.rstrip("=") + "=" * (-len(value.rstrip("=")) % 4),
                                   altchars=b"-_" if ("-" in value or "_" in value) else None)
    except (binascii.Error, ValueError):
        return False
    printable = sum(32 <= c < 127 for c in decoded) / max(1, len(decoded))
    return printable > 0.9 or decoded[:1] == b"\x30"


def base64_like(value: str) -> bool:
    """A value that a path pattern matches but that is base64 (`/Djtbn7UEYM...+t+LCHGi3w4=`): with a "+" or a
    closing "=", or one "/" before a single segment of 20 characters or more in both cases and digits, not in
    words (`/ReywoTQRXURPWAmTCsWHEUJPl4oNfGGN1rU9fdh`: base64 draws on "/", a path's segments are names)."""
    if len(value) < 20 or entropy(value) < 4.0:
        return False
    if "+" in value or value.endswith("="):
        return True
    segment = value[1:] if value.startswith("/") else ""
    return (len(segment) >= 20 and re.fullmatch(r"[A-Za-z0-9]+", segment) is not None
            and _THREE_CLASSES.match(segment) is not None and not fails_token_efficiency(segment))


_STRONG_SYMBOLS = frozenset("!@#$%^&*+=~?")


def random_looking(value: str) -> bool:
    """Whether `value` is made like a password or a generated token rather than a name: letters and
    digits with a symbol a name never holds (`Meadow314$Glacier`); or upper and lower case with such a
    symbol, mostly not in words (`Dul#PXun^Q=f`); or upper and lower case and digits, mostly not in
    words (`M0ssy_62W1l`, not `PasswordPolicyV2` or `Store2Backend`); or, from 20 characters, hex,
    base32 or base62 of high entropy that is not words joined (`17ef1844...`, not
    `userId2024AccountBalance`) and that Betterleaks' token-efficiency test does not read as text
    (which is how a token in one case, `fyhamufw3jimis...`, is told from joined words). The
    thresholds are Cairn's, set on the spent splits of tests/data/credentials."""
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    if not letters or len(value) < 8 or re.search(r":\d{2,5}$", value):  # a host:port
        return False
    strong = bool(_STRONG_SYMBOLS.intersection(value))
    if digits and strong:
        return True
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    # Characters in words: a lower-case run of 3 or more, with its capital (camelCase, snake_case).
    wordy = sum(len(w) for w in _WORDLIKE.findall(value)) / len(value)
    if mixed and (digits or strong) and len(value) >= (8 if strong else 10) and wordy < 0.6:
        return True
    # Hex draws on 16 symbols: a random 20-character hex token falls under 3.3 bits a third of the time
    # (under 2.8 three times in a thousand), a base62 one almost never.
    floor = 2.8 if _HEX_DIGITS.fullmatch(value) else 3.3
    if len(value) < 20 or not (digits or mixed) or entropy(value) < floor:
        return False
    if mixed and wordy >= 0.4:
        return False
    # In one case, runs of letters say nothing; the words of an identifier do (`user-2024-report`), and
    # of a generated resource name (`app-config-5g8h9k2t7m`).
    if not mixed and (_IDENTIFIER.fullmatch(value) or _GENERATED_NAME.fullmatch(value)):
        return False
    # From 20 characters: random by entropy, and not text by Betterleaks' token-efficiency test
    # (camelCase names, joined words and phrases encode in few cl100k tokens).
    return not fails_token_efficiency(value)


_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}")


# A generated resource name: words, then a short random suffix (Kubernetes' regcred-9f8k2,
# app-config-5g8h9k2t7m, default-token-x7k2p; a pod's web-7d4b9c6f5-x2kqp).
_GENERATED_NAME = re.compile(r"[a-z]{2,}(?:-[a-z]{2,})*(?:-[a-z0-9]{4,10}){1,2}")


_HEX_DIGITS = re.compile(r"[0-9a-f]+|[0-9A-F]+")


# An identifier in one case: words and numbers joined by "-", "_" or ".".
_IDENTIFIER = re.compile(r"(?i)[a-z]+\d*(?:[-_.](?:[a-z]+\d*|\d+))+")


def password_like(value: str) -> bool:
    """Whether `value`, given after a word for a password, is a password people choose: letters, two
    digits or more, and a symbol or both cases (`Cobalt-tundra6469`, `Velvet.paprika59`,
    `Orbit482-Quartz`); not an identifier in snake_case (`user_password22`) or a name in camelCase
    with a version (`PasswordPolicyV2`)."""
    if not 8 <= len(value) <= 64 or not any(c.isalpha() for c in value):
        return False
    if sum(c.isdigit() for c in value) < 2 or re.fullmatch(r"[a-z0-9]+(?:_[a-z0-9]+)+", value):
        return False
    symbol = any(not c.isalnum() for c in value)
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    return symbol or mixed


def stated_password(value: str, shortest: int = 8) -> bool:
    """Whether `value`, stated as a password on both sides (a word and its particle before, a copula
    after), is made like one: `shortest` (8) to 64 characters, no space, letters with a digit or a symbol."""
    return (shortest <= len(value) <= 64 and any(c.isalpha() for c in value) and not any(c.isspace() for c in value)
            and any(not c.isalpha() for c in value))


def random_letters(value: str) -> bool:
    """Letters in one case from 10, no English word of 5 letters in them and not text to cl100k's BPE
    (a generated password such as an app password, `jvqpwmzlkxrtybnd`; an Erlang cookie, 20 capitals)."""
    return (len(value) >= 10 and value.isalpha() and (value.islower() or value.isupper()) and entropy(value) >= 3.0
            and not fails_token_efficiency(value))


# Keys that begin with "$" by their vendor's format, not a shell variable: Asaas' ($aact_prod_, $aact_hmlg_).
DOLLAR_KEY_PREFIXES = ("$aact_",)


def placeholder(value: str) -> bool:
    """Whether a detected value is a placeholder or a reference rather than a secret: `xxx`,
    `***`, `your-token-here`, `<...>`, an all-capitals name (`USER:PASSWORD`), code that reads
    the secret from elsewhere (`os.environ[...]`, `process.env.X`), the name of what goes there
    (`mypassword`, `your_token`), a short word in lower case (`test`, `testing`, `minio`: what
    tests, local emulators and documentation write), or a Basic credential whose decoded
    `user:password` is one of those."""
    return bool(PLACEHOLDER.search(value) or _capitals_name(value)
                or value.startswith("<") or _emphasis(value)
                # `$VAR`, `${VAR}`, `$(cmd)`: a reference; `$@vYH...`, `$#Kq8...`: a password led by "$"
                or (value.startswith("$") and not value.startswith(DOLLAR_KEY_PREFIXES)
                    and (reference_lead(value) or len(value) < 6))
                or re.fullmatch(r"\[[A-Za-z _-]+\]", value)  # [masked], [hidden]
                or _NAMED_PLACEHOLDER.fullmatch(value) or lower_case_word(value) or _placeholder_pair(value)
                or stand_in(value) or common_password(value) or described(value) or stand_in_shape(value))


# Markdown's emphasis around words (`**Deben**`, `_todos_`, `~~old~~`): text set off, not a value.
_EMPHASIS = re.compile(r"(\*{1,3}|_{1,3}|~~)[^\W\d_]+(?:[ '-][^\W\d_]+)*[.,:!?]?\1[.,:!?]?")


def _emphasis(value: str) -> bool:
    """Whether `value` is words in Markdown's emphasis (_EMPHASIS), letters alone."""
    return _EMPHASIS.fullmatch(value) is not None


# Words of any script but Latin (`APIキー`, `パスワード`, `비밀번호`, `пароль`): what a person writes to describe
# a value; a generated secret draws from ASCII.
_OTHER_SCRIPT = re.compile(r"[^\W\da-zA-Z\u00c0-\u024f_]")
_WORD_SEPARATED = re.compile(r"[^\W\d_]{2,}(?:[ _-][^\W\d_]{2,})+")


def described(value: str) -> bool:
    """Whether `value` describes what goes there in words rather than being it: letters of a script other
    than Latin beside no digit (`OpenAI APIキー`, `ваш пароль`), or two words or more of letters alone, one
    of them with a letter outside ASCII (`tu_contraseña`, `votre-clé`). Not a password with one accented
    letter in a random run (`Qx9ñ...`: digits), nor words in ASCII (stand_in judges those)."""
    value = value.strip("'\"`")
    if any(c.isdigit() for c in value) or not any(ord(c) > 127 and c.isalpha() for c in value):
        return False
    return _OTHER_SCRIPT.search(value) is not None or _WORD_SEPARATED.fullmatch(value) is not None


# The end of a value masked by hand or by a console (`sk-D57rVxxxxx`, `ghp_ab12****`, `AKIA••••`): a key shown
# in part, its rest replaced by a run of x, X, * or •.
_MASKED_END = re.compile(r"(?:x{4,}|X{4,}|\*{3,}|•{3,})$")
# A description in square brackets, in any script (`[your password]`, `[원격지 접속 계정의 암호]`): letters,
# spaces, "_", "-" and "'", no digit, closed on the line.
_BRACKETED = re.compile(r"\[(?:[^\W\d]|[ _'-])+\]")


# An option set to a flag or a number (`useKeyTab=true`, `storeKey=false`, `retries=3`): a setting whose name holds
# a credential's word, not a credential.
_SETTING_PAIR = re.compile(r"(?i)[A-Za-z][\w.-]*=(?:true|false|yes|no|on|off|none|null|nil|undefined|\d{1,6})")
# A connection string's run of `Name=value;` pairs (`Server=.;Database=Shop;User`): several settings, whose
# password stands under its own name (Password=...), not one value.
_SETTING_LIST = re.compile(r"(?:[A-Za-z][\w .-]{2,}=[^;,=]*[;,]\s*)+[A-Za-z][\w .-]{2,}(?:=[^;,=]*)?[;,]?")


def setting_pair(value: str) -> bool:
    """Whether `value` is `name=flag` or `name=number` (_SETTING_PAIR): an option's setting; or a connection
    string's `Name=value;Name=...` run (_SETTING_LIST)."""
    return _SETTING_PAIR.fullmatch(value) is not None or _SETTING_LIST.fullmatch(value) is not None


# What a value that starts with a symbol is when it is no secret: a reference (`$VAR`, `${VAR}`, `$(cmd)`, `$$VAR`,
# `%VAR%`, `%(name)s`, `@var@`, `@Annotation`, `&anchor`); after "#" a name, a colour, an issue or a fragment
# (`#main-nav`, `#ff8800`, `#123`), `#{...}`, `#!`; after "^" a version range (`^1.2.3`) or a regular expression
# (`^[a-z]+$`). A generated password draws on the same symbols (`#u#^I5ndWi%!`, `^XPXSyhuOdhS37`, `$#Kq8m...`):
# the characters after the first say which.
_REFERENCE_LEAD = re.compile(r"\$(?:[\w{($]|$)|%(?:[\w({%]|$)|@(?:[\w{.]|$)|&(?:[A-Za-z_]|$)|#(?:[\w-]*$|[{!\[])"
                             r"|\^(?:[\d.x*]+$|.*[\\\[\](){}|*+?]|.*\$$)")


# The name after a leading "$" (`$DB_PASSWORD`, `$y6t2iiNnV@`).
_DOLLAR_NAME = re.compile(r"\$([A-Za-z_]\w*)")


def generated_dollar_name(value: str) -> bool:
    """Whether the name after `value`'s leading "$" is generated rather than named: 8 characters or more with
    a digit or both cases, not text to Betterleaks' token-efficiency test (`$y6t2iiNnV@`, `$UiLggBuJ6c9Hu`:
    a password led by "$" in a quoted literal; not `$DB_PASSWORD`, `$dbPassword2`, `$s3Bucket`, names)."""
    match = _DOLLAR_NAME.match(value)
    if match is None:
        return False
    name = match.group(1)
    varied = any(c.isdigit() for c in name) or (any(c.islower() for c in name) and any(c.isupper() for c in name))
    return len(name) >= 8 and varied and not fails_token_efficiency(name)


def reference_lead(value: str) -> bool:
    """Whether `value`, led by a symbol, is a reference, a name or a pattern rather than a secret (_REFERENCE_LEAD);
    a value led by "#" or "^" whose rest is made like a password (`#u#^I5ndWi%!`) is not, nor one led by "$"
    whose name is generated (generated_dollar_name)."""
    return _REFERENCE_LEAD.match(value) is not None and not generated_dollar_name(value)


def masked(value: str) -> bool:
    """Whether `value` ends in a run of masking characters (_MASKED_END): what is left of a key is no key."""
    return _MASKED_END.search(value.strip("'\"`")) is not None


def bracketed(line: str, start: int) -> bool:
    """Whether the value at `start` of `line` begins a description in square brackets (_BRACKETED), which
    stands for a value in any language, as `<your-password>` does."""
    start -= line[start - 1:start] == "["  # the bracket left out of the value's span
    return _BRACKETED.match(line, start) is not None


# Words a person writes in a value to say what goes there instead of it (`yourActualTokenHere`,
# `myServicePrincipalPassword`, `YourSecretKey!!!`): a stand-in, an example, a test.
# The same said in Portuguese, Spanish, French, German, Italian, Dutch, Polish, Czech, Swedish, Turkish and
# Indonesian, accents dropped as ASCII names drop them (`sua_chave_aqui`, "your key here"; `tu_clave_aqui`,
# `votre_cle_ici`, `dein_schluessel_hier`, `la_tua_chiave`, `twoje_haslo_tutaj`, `ditt_losenord_har`).
_OTHER_STAND_INS = """sua seu suas seus tua teu minha meu aqui exemplo coloque insira tu su mi ejemplo ponga pon
    votre vos ton ta mon ma ici exemple dein deine ihr ihre mein meine hier beispiel tuo mio mia qui esempio
    inserisci jouw uw mijn voorbeeld twoj twoje twoja tutaj przyklad vase vas tvoje tvuj zde priklad din ditt
    har exempel senin sizin buraya ornek anda disini contoh""".split()
# Their words for a credential, which name one as the English `secret`, `password`, `key` do.
_OTHER_NAMING = """chave senha segredo secreta secreto clave llave contrasena cle jeton motdepasse mot passe
    schluessel schlussel passwort kennwort geheim chiave segreto segreta parola sleutel wachtwoord haslo klucz
    heslo klic losenord nyckel sifre sifreniz anahtar sandi kunci rahasia""".split()
_STAND_IN_WORDS = frozenset("""your yours my our actual real here example sample dummy fake test changeme change
    placeholder replace insert enter put some foo bar baz todo fixme""".split() + _OTHER_STAND_INS)
_STAND_IN_CUE = re.compile(r"(?i)your|my|our|actual|real|here|exampl|sampl|dumm|fake|test|chang|placeholder|replac"
                           r"|insert|enter|put|some|foo|bar|baz|todo|fixme|secret|pass|key|token|random|string|generat|secur"
                           r"|value|pwd|pw|psw|"
                           + "|".join(sorted(_OTHER_STAND_INS + _OTHER_NAMING, key=len, reverse=True)))
# Short words of such a value that the word list (5 letters or more, mostly) leaves out.
_SHORT_WORDS = _STAND_IN_WORDS | frozenset("""a an the to of for and or in on is it me us key keys api app apps db id
    pw pwd pass auth new old own one two get set use via no not jwt top this that do dev clear text""".split()
                                  + _OTHER_NAMING + "la le el il de del der die das".split())
_LETTER_RUN = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def _words_of(run: str) -> list[str] | None:
    """`run` (letters in one case) as words of Betterleaks' list (4 letters or more) or _SHORT_WORDS, the
    fewest of them; None when it is not words (`qpt`, `jvqpwmzlkx`)."""
    from .rule_filters import is_word

    run = run.lower()
    best: list[list[str] | None] = [[]] + [None] * len(run)
    for end in range(1, len(run) + 1):
        for start in range(max(0, end - 24), end):
            head, piece = best[start], run[start:end]
            if head is not None and (piece in _SHORT_WORDS or (len(piece) >= 4 and is_word(piece))):
                if best[end] is None or len(head) + 1 < len(best[end] or ()):
                    best[end] = [*head, piece]
    return best[-1]


def stand_in(value: str) -> bool:
    """Whether `value` is words that say what goes in its place rather than a secret: two words or more,
    covering three quarters of its letters or more (a vendor's prefix may stand before them: `ghp_`,
    `pypi-`, `whsec_`), one of them a stand-in (_STAND_IN_WORDS: your, my, actual, here, example, test ...)
    or all of them words that name a secret (_NAMING_WORDS, with a, is, this, not ...: `supersecretkey`,
    `thisisnotasecret`), and no generated part (digits but a run such as 123456789, or four at most):
    `ghp_yourActualTokenHere123`, `myServicePrincipalPassword`, `YourSecretKey!!!`, `YourStrong@Passw0rd` (a
    digit between letters read as the letter it stands for); or a name in snake or kebab case that ends in a
    credential's word (`redis_password`, `db-secret`). Not a password of words chosen with no stand-in
    (`CorrectHorseBatteryStaple`), a random token (whose runs of letters are not words), a URL or an address."""
    if len(value) > 80 or "://" in value or _ADDRESS.search(value) or not _STAND_IN_CUE.search(value):
        return False  # a URL's or an address's words are its host's and user's
    if _CREDENTIAL_NAME.fullmatch(value):
        return True
    digits = "".join(c for c in value if c.isdigit())
    if len(digits) > 4 and not all((int(b) - int(a)) % 10 in (0, 1, 9) for a, b in zip(digits, digits[1:])):
        return False
    # A digit read as its letter only beside a stand-in's word (`YourStrong@Passw0rd`): a value that spells
    # only naming words in leetspeak (`s3cr3tpass`) is a password someone made.
    unleet = _LEET_DIGIT.sub(lambda m: m.group(0).translate(_LEET), value)
    return any(_said_in_words(body, naming=text == value)
               for text in {value, unleet} for body in _bodies(text))


def _bodies(value: str) -> list[str]:
    """`value`, and `value` after a vendor's prefix when it has one (`ghp_`, `pypi-`, `whsec_`)."""
    prefix = _VENDOR_PREFIX.match(value)
    return [value, value[prefix.end():]] if prefix else [value]


_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_CREDENTIAL_NAME = re.compile(r"[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*[_-](?:password|passwd|pass|pwd|pswd|psw|pw|secret"
                              r"|token|key|passphrase|apikey)")
_VENDOR_PREFIX = re.compile(r"[A-Za-z]{2,8}[-_](?=[A-Za-z])")
# A digit between two letters, written for the letter it looks like (`Passw0rd`, `S3cret`).
_LEET_DIGIT = re.compile(r"(?<=[A-Za-z])[01345](?=[A-Za-z])")


def _said_in_words(value: str, *, naming: bool = True) -> bool:
    """Whether `value`'s words say what goes there (stand_in); naming=False: only by a stand-in's word."""
    letters = sum(c.isalpha() for c in value)
    words: list[str] = []
    covered = 0
    for run in _LETTER_RUN.findall(value):
        found = _words_of(run)
        if found:
            words += found
            covered += len(run)
    if len(words) < 2 or covered * 4 < letters * 3 or letters < 6:
        return False
    # A stand-in; or words that only name a secret (`supersecretkey`, `thisisnotasecret`); or a phrase of three
    # words or more, every letter in words, that speaks of the secret (`generate-a-long-random-string`).
    if any(w in _STAND_IN_WORDS for w in words):
        return True
    names = naming and any(w in _NAMING_WORDS for w in words)
    return names and (all(w in _NAMING_WORDS or w in _FUNCTION_WORDS for w in words)
                      or (len(words) >= 3 and covered == letters))


_FUNCTION_WORDS = frozenset("a an the this that is it not no do to in of for use".split())


# Words that only name a secret, and how much of one (`supersecretkey`, `secret-password`, `topsecret`): a value
# of these alone says what goes there.
_NAMING_WORDS = frozenset("""secret secrets key keys password passwd pass passphrase token api jwt auth session app
    super top very ultra mega extra strong private secure insecure random long generate generated string value chars
    characters dev local""".split() + _OTHER_NAMING)


# The name of a credential standing for its value: `mypassword`, `your_token`, `myusername`, `password`.
_NAMED_PLACEHOLDER = re.compile(r"(?i)(?:my|your|the|some|a)?[-_]?(?:user[-_]?name|user|login|password|passwd|pass"
                                r"|pwd|secret|token|api[-_]?key|access[-_]?key|key|credentials?)")


# The commonest passwords, the ones documentation and tutorials write as a stand-in (`P@ssw0rd`, `S3cr3t`,
# `admin123`, `Password1!`): a credential's or a default account's word, in any case and with the usual
# letter-for-digit swaps, then digits or symbols at most.
_COMMON_PASSWORDS = frozenset("password passw0rd passwd pass secret admin root letmein qwerty changeme default"
                              " test guest".split())
_LEET = str.maketrans("0134$@57", "oieasast")


def common_password(value: str) -> bool:
    """Whether `value` is one of _COMMON_PASSWORDS, written in any case, with 0/1/3/4/$/@/5/7 for letters
    (`P@ssw0rd`, `S3cr3t`), and digits or symbols after it (`admin123`, `Password1!`)."""
    core = re.sub(r"[\d!#%^&*.?_-]+$", "", value)
    return len(core) >= 4 and core.lower().translate(_LEET) in _COMMON_PASSWORDS


def lower_case_word(value: str) -> bool:
    """Whether `value` is a short run of lower-case letters (12 at most) that reads as text to
    Betterleaks' token-efficiency test (`test`, `testing`, `minio`, `guest`): a word a person or a tool
    writes as a stand-in, not a generated secret (a random one, `jvqpwmzlkx`, does not read as text)."""
    return len(value) <= 12 and re.fullmatch(r"[a-z]+", value) is not None and fails_token_efficiency(value)


def _placeholder_pair(value: str) -> bool:
    """Whether `value` is base64 of `user:password` (a Basic credential) whose password is a placeholder,
    a service's default or the user name itself (`dXNlcjpwYXNzd29yZA==`, base64 of "user:password"), or
    base64 of a placeholder or one of the commonest passwords alone."""

    if not 8 <= len(value) <= 200 or not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", value):
        return False
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = decoded.partition(":")
    if not decoded.isprintable():
        return False
    if not colon:  # base64 of the value alone (a Kubernetes Secret's data: `cGFzc3dvcmQ=`, "password")
        return bool(_NAMED_PLACEHOLDER.fullmatch(decoded) or PLACEHOLDER.search(decoded) or common_password(decoded))
    return password == user or bool(_NAMED_PLACEHOLDER.fullmatch(password) or PLACEHOLDER.search(password)
                                    or lower_case_word(password))


# A password's hash, not the password: the modular crypt format ($2b$, $6$, $argon2id$, $apr1$ ...),
# Django's `algorithm$iterations$salt$hash` (docs.djangoproject.com/en/stable/topics/auth/passwords/),
# LDAP's {SSHA}/{SHA}/{CRYPT}, Tor's `16:` + salt and hash (HashedControlPassword, tor(1) --hash-password).
_PASSWORD_HASH = re.compile(r"\$(?:2[abxy]?|1|5|6|7|y|gy|apr1|sha1|md5|argon2(?:id|i|d)|scrypt|pbkdf2[\w-]*)\$\S{8,}"
                            r"|(?:pbkdf2_sha(?:1|256|512)|argon2|bcrypt(?:_sha256)?|scrypt|sha1|md5)\$\S+\$\S{8,}"
                            r"|\{(?:SSHA|SHA|SSHA256|SSHA512|CRYPT|MD5|SMD5)\}\S{8,}|16:[0-9A-F]{58}")


# A name that says its value is hashed: HashedControlPassword, password_hash, hashed_secret.
_HASHED_NAME = re.compile(r"(?i)[\w.-]*hash[\w.-]*['\"]?\s*(?:[:=]\s*)?['\"]?(?:16:)?$")


def hashed(line: str, start: int, end: int) -> bool:
    """Whether line[start:end] is a password's hash (_PASSWORD_HASH), or the value of a name that says
    it is hashed (`HashedControlPassword 16:...`, `password_hash = "..."`)."""
    left = max(line.rfind(" ", 0, start), line.rfind("\t", 0, start)) + 1  # the token may start before the span
    if any(_PASSWORD_HASH.fullmatch(line[at:end].strip("'\"")) for at in {start, left}):
        return True
    before = line[max(0, start - 60):start]
    named = _HASHED_NAME.search(before) if "hash" in before.lower() else None
    # Telegram's api_hash is an app's secret, not a hash of one (core.telegram.org/api/obtaining_api_id).
    return named is not None and _API_HASH.search(named.group()) is None


# Drupal's hash_salt likewise: the site's secret salt for one-time login links and form tokens (default.settings.php).
_API_HASH = re.compile(r"(?i)(?<![a-z])(?:api[_-]?hash|hash[_-]?salt)\b")


def _capitals_name(value: str) -> bool:
    """A name in capitals (`USER:PASSWORD`, `API_KEY`), not random capitals (an Erlang cookie, 20 letters
    that hold no word and that cl100k's BPE does not read as text)."""
    if not re.fullmatch(r"[A-Z][A-Z_]*", value):
        return False
    return len(value) < 16 or "_" in value or fails_token_efficiency(value)


# A documented example's run (`AbCdEfGh...`, `...1234567890`): in prose a look-alike, while a key in a
# vendor's format with such a body is still redacted (tests and fixtures write them so).
SEQUENCE = re.compile(r"(?i)abcdefg|1234567")


def in_runs(value: str) -> bool:
    """Whether `value` (4 to 20 letters and digits) is made of runs alone, each of 3 characters or more that
    step by one (`abc123`, `abcd1234`, `123abc`, `xyz789`), a vendor's prefix before them or not (`sk-abc123def456`):
    what a person types as a dummy."""
    prefix = _VENDOR_PREFIX.match(value)
    value = value[prefix.end():] if prefix else value
    if not 4 <= len(value) <= 20 or not value.isalnum():
        return False
    runs, length = 0, 1
    for a, b in zip(value.lower(), value.lower()[1:]):
        if ord(b) - ord(a) == 1:
            length += 1
            continue
        if length < 3:
            return False
        runs, length = runs + 1, 1
    return length >= 3


def repetitive(value: str) -> bool:
    """Whether `value` (16 characters or more) is mostly one character repeated, a dummy rather than a
    generated secret (`1x0000000000000000000000000000000AA`): under 2 bits of entropy per character,
    which no generated key of that length has (a random base64 token has about 5). A look-alike test
    of values found in prose (look_alike), not of a vendor's format: a key in one (`sk-ant-api03-AAAA...`)
    is redacted whatever its body."""
    if len(value) < 16:
        return False
    # Entropy is at least -log2 of the commonest character's share: under 2 bits needs a quarter or more.
    counts = Counter(value)
    return max(counts.values()) * 4 >= len(value) and entropy(value) < 2.0


# Keys their vendors document as public (they ship in web pages and apps), never redacted: Stripe's
# (and Paystack's, Clerk's) publishable keys pk_live_/pk_test_ (docs.stripe.com/keys), PostHog's project
# API key phc_ (posthog.com/docs/api), Supabase's publishable key sb_publishable_
# (supabase.com/docs/guides/api/api-keys), Cloudflare Turnstile site keys 0x4AAAAAAA + 14 characters
# (developers.cloudflare.com/turnstile; a secret key is longer, 35), Mapbox public tokens pk.eyJ...
# (docs.mapbox.com), Datadog RUM client tokens pub + 32 hex (docs.datadoghq.com/account_management/
# api-app-keys/#client-tokens), Twilio account SIDs AC + 32 hex (an account's id; its secrets are the
# auth token and SK API keys), New Relic browser keys NRJS- (docs.newrelic.com/docs/apis/intro-apis/
# new-relic-api-keys/#browser-key-id: shipped in every page the browser agent instruments).
PUBLIC_KEY_FORMATS = re.compile(r"pk_(?:live|test)_[A-Za-z0-9_-]{10,120}|phc_[A-Za-z0-9_-]{30,60}"
                                r"|sb_publishable_[A-Za-z0-9_-]{20,60}|0x4AAAAAAA[A-Za-z0-9_-]{12,16}"
                                r"|pk\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}|pub[0-9a-f]{32}|AC[0-9a-f]{32}"
                                r"|NRJS-[0-9a-f]{19}"
                                # Razorpay's key id (rzp_live_/rzp_test_ + 14): the `key` of Checkout's options in
                                # the page's script (razorpay.com/docs/payments/payment-gateway/web-integration/
                                # standard); its key_secret, unprefixed, stays on the server.
                                r"|rzp_(?:live|test)_[A-Za-z0-9]{14}")


# Values published as examples, in vendors' documentation and specifications: AWS's example key
# pairs hold "EXAMPLE" (a placeholder); jwt.io's sample token (its signature); the AES-128 key of
# NIST SP 800-38A and FIPS-197's examples.
_PUBLISHED_EXAMPLES = ("SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "2b7e151628aed2a6abf7158809cf4f3c",
                       "000102030405060708090a0b0c0d0e0f",
                       # Hardhat's and Foundry Anvil's first development accounts, printed by `npx hardhat
                       # node` and `anvil` under "these accounts, and their private keys, are publicly known".
                       "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
                       "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
                       "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
                       # RFC 6749's sample access, refresh and code values and client credentials (sections
                       # 4.1-5.1); RFC 6455's sample Sec-WebSocket-Key and -Accept (1.3); RFC 7636's PKCE
                       # verifier and challenge (appendix B); RFC 7617's Basic sample (Aladdin:open sesame).
                       "2YotnFZFEjr1zCsicMWpAA", "tGzv3JOkF0XG5Qx2TlKWIA", "SplxlOBeZQQYbYS6WxSbIA",
                       "czZCaGRSa3F0MzpnWDFmQmF0M2JW", "dGhlIHNhbXBsZSBub25jZQ==", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
                       "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                       "QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
                       # Vendors' documentation samples, pasted into tutorials and READMEs by the thousand: Stripe's
                       # API reference test keys (docs.stripe.com/api), the Bot API's sample token
                       # (core.telegram.org/bots/api, "Authorizing your bot"), the body of GitHub's token samples
                       # (docs.github.com: gho_/ghu_/ghs_/ghp_ 16C7e42F..., ghr_ 1B4a2e77...), Slack's
                       # oauth.v2.access response sample (api.slack.com/methods/oauth.v2.access).
                       "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_BQokikJOvBiI2HlWgH4olfQ2",
                       "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11", "16C7e42F292c6912E7710c838347Ae178B4a",
                       "1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF",
                       "17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
                       # The sample password of Kubernetes' "Managing Secrets using kubectl" page
                       # (kubernetes.io/docs/tasks/configmap-secret/managing-secret-using-kubectl/, `S!B\*d$zDsb=`)
                       # and of its earlier version, still in translations (`1f2d1e2e67df`).
                       "S!B\\*d$zDsb", "1f2d1e2e67df",
                       # xkcd 936's passphrase, the example of a strong password written everywhere.
                       "correct horse battery staple")


_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.(eyJ[A-Za-z0-9_-]{5,})\.[A-Za-z0-9_-]*")


def public_key(value: str) -> bool:
    """Whether `value` is a key of a format its vendor documents as public (PUBLIC_KEY_FORMATS), a
    Supabase anon key (a JWT whose role is "anon", which Supabase documents as safe in a browser), or
    a value published as an example (_PUBLISHED_EXAMPLES)."""
    value = value.strip("'\"`.,;")
    if (PUBLIC_KEY_FORMATS.fullmatch(value) or any(example in value for example in _PUBLISHED_EXAMPLES)
            or der_public_key(value)):
        return True
    jwt = _JWT.fullmatch(value)
    return jwt is not None and _jwt_claims(jwt.group(1)).get("role") == "anon"


def _jwt_claims(payload: str) -> dict[str, Any]:
    """A JWT's payload (base64url JSON) as a dict; {} when it is not one."""

    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        return {}
    return claims if isinstance(claims, dict) else {}


# The DER of an X.509 SubjectPublicKeyInfo: the algorithm's OID (rsaEncryption with its NULL, ecPublicKey
# with its curve, Ed25519, X25519), then the key as a BIT STRING (tag 3); a private key (PKCS#8) holds
# an OCTET STRING (tag 4) there. RFC 5280 4.1.2.7, RFC 8410.
_SPKI = re.compile(rb"\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01\x05\x00\x03"
                   rb"|\x06\x07\x2a\x86\x48\xce\x3d\x02\x01\x06[\x05-\x09][^\x03]{5,9}?\x03"
                   rb"|\x06\x03\x2b\x65[\x6e\x70]\x03")


def der_public_key(value: str) -> bool:
    """Whether `value` is base64 of a public key's DER (SubjectPublicKeyInfo: `MFwwDQYJKoZIhvcNAQEB...`,
    `MIIBIjANBgkq...`, `MCowBQYDK2Vw...`), which is published, not a secret."""

    if len(value) < 40 or not value.startswith("M") or not re.match(r"[A-Za-z0-9+/]{40}", value):
        return False
    try:
        head = base64.b64decode(value[:40], validate=True)
    except binascii.Error:
        return False
    return head[:1] == b"\x30" and _SPKI.search(head[:32]) is not None


# Shapes that stand for a key rather than being one: a prefix then a wildcard (`sk_test_*`, `whsec_*`), a
# prefix then x's (`sk-xx`, a truncated example), a call over a reference (`base64encode(var.root_password)`,
# `b64enc(.Values.x)`: what a template or Terraform fills in), and a JWT's header alone (base64url of
# {"alg": ...}, no payload nor signature: it grants nothing).
_WILDCARD = re.compile(r"[\w-]*[_-]\*+")
_PREFIX_XS = re.compile(r"[A-Za-z]{1,8}[_-](?:x+|X+)")
_CALL_OVER_REFERENCE = re.compile(r"[A-Za-z_][\w.]*\(\s*\.?[A-Za-z_][\w.]*(?:\[[\w\"'.-]+\])*\s*\)")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def stand_in_shape(value: str) -> bool:
    """Whether `value` has a shape that stands for a key (_WILDCARD, _PREFIX_XS, _CALL_OVER_REFERENCE), is a
    JWT's header alone, or holds a run of 8 letters of the alphabet in order, each letter's capital beside it
    or not (`sk-AaBbCcDd...`, `abcdefghij`: a documented stand-in; a random key draws one about never)."""
    value = value.strip("'\"`")
    if _WILDCARD.fullmatch(value) or _PREFIX_XS.fullmatch(value) or _CALL_OVER_REFERENCE.fullmatch(value):
        return True
    collapsed = re.sub(r"([a-z])\1", r"\1", value.lower())
    if any(_ALPHABET[i:i + 8] in collapsed for i in range(len(_ALPHABET) - 7)):
        return True
    return jwt_header_alone(value)


def jwt_header_alone(value: str) -> bool:
    """Whether `value` is a JWT's first part only: base64url of a JSON object with an "alg" (RFC 7515 §4.1.1)."""
    if not value.startswith("eyJ") or "." in value or len(value) > 400:
        return False
    try:
        header = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (binascii.Error, ValueError):
        return False
    return isinstance(header, dict) and "alg" in header


# Tailscale's public keys as its CLI prints them (`tailscale status --json`, `tailscale debug`: `nodekey:<hex>`,
# `discokey:`, `mkey:`; tailscale.com/kb/1010/machine-key): a private key prints as `privkey:`.
_TAILSCALE_PUBLIC = re.compile(r"(?:nodekey|discokey|mkey|machinekey):$")
# An HTML element's data attribute named for a key (`data-client-key="..."`, `data-key="pk_..."`, `data-sitekey`):
# what a page ships to every browser, a client key by its vendor's design (Midtrans Snap, Stripe Checkout, CAPTCHAs).
_DATA_ATTRIBUTE = re.compile(r"""(?:^|[\s<])data-([\w-]*key)\s*=\s*["']?$""", re.IGNORECASE)
# WireGuard's keys (PrivateKey, PresharedKey; wg(8) "CONFIGURATION FILE FORMAT"): base64 of 32 bytes, 44 characters
# with their "=". A shorter value is a key cut short to show a config's shape, not a key.
_WIREGUARD_KEY = re.compile(r"^[ \t]*(?:PrivateKey|PresharedKey)[ \t]*=[ \t]*$")


def public_by_place(line: str, start: int, end: int) -> bool:
    """Whether the value at line[start:end] is no secret by what stands right before it: a Tailscale public
    key (`nodekey:`), a key in an HTML element's data attribute (what the page ships; not one named secret or
    private), or a WireGuard key shorter than a key's 44 characters (cut short for the reader)."""
    before = line[max(0, start - 200):start]
    if _TAILSCALE_PUBLIC.search(before):
        return True
    data = _DATA_ATTRIBUTE.search(before)
    if data and not re.search(r"(?i)secret|private|server", data.group(1)):
        return True
    value = line[start:end].strip("'\"")
    return (_WIREGUARD_KEY.match(before) is not None and re.fullmatch(r"[A-Za-z0-9+/]+=?", value) is not None
            and len(value) != 44)


# A validation rule's words joined by "|" (Laravel's `required|string|min:8|confirmed`): what a password must be.
_VALIDATION_RULE = re.compile(r"(?i)[a-z_]+(?::[\w,.]+)?(?:\|[a-z_]+(?::[\w,.]+)?)+")


def validation_rule(value: str) -> bool:
    """Whether `value` is a validation rule's words joined by "|" (_VALIDATION_RULE), not a value."""
    return _VALIDATION_RULE.fullmatch(value.strip("'\"")) is not None


# AWS's own error messages that quote the access key id a request was signed with (IAM/STS/S3 error codes,
# docs.aws.amazon.com/STS/latest/APIReference/CommonErrors.html): `InvalidClientTokenId`, `InvalidAccessKeyId`,
# `SignatureDoesNotMatch`, "The AWS Access Key Id you provided does not exist in our records".
_AWS_ERROR = re.compile(r"InvalidClientTokenId|InvalidAccessKeyId|SignatureDoesNotMatch|UnrecognizedClientException"
                        r"|(?i:security token included in the request is invalid"
                        r"|access key id you provided does not exist)")
_AWS_KEY_ID = re.compile(r"(?:AKIA|ASIA|AIDA|AROA|ABIA|ACCA)[A-Z0-9]{16}")


def aws_error_key_id(line: str, value: str) -> bool:
    """Whether `value` is an AWS access key id alone (AKIA..., 20 characters) on a `line` that is AWS's error
    message about it (_AWS_ERROR): an identifier the service reports back (a secret on the line is still found)."""
    return _AWS_KEY_ID.fullmatch(value) is not None and _AWS_ERROR.search(line) is not None
