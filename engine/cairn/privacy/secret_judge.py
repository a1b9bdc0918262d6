"""A learned second opinion on the credential rules' findings: a logistic regression that may veto one.

The rules (scrub.py, secret_rules, secret_positional, ...) propose findings: a span of a line and the
rule that fired. `probability(line, span, kind)` scores such a finding from a small, explainable
feature vector (`features`: the rule's family, the value's shape, a few words in a window around it)
with coefficients learned from the spent labelled splits (tests/data/credentials/*.yaml) by
bench/secrets_judge.py, which writes them to assets/secret-judge.json with the feature names, the
splits trained on, the date, the veto threshold and whether the judge is on by default. Both the
coefficients' regularisation and the threshold were chosen there by leave-one-split-out
cross-validation (train on all spent splits but one, score that one, rotate, pool), the honest
estimate of a split written later by another labeller. The candidates are the current detector's findings on
every spent split and, for holdout7-14, the findings of the design frozen when each was scored blind (the
look-alikes a detector flags before it is tuned on a split). Shipped setting (C=1, threshold 0.3), pooled LOSO,
2026-12-06: on the blind designs' findings, false positives 0.0371 -> 0.0229 with recall 0.9464 -> 0.9457 (one item
of 1,400); on the current detector's, recall 0.9924 -> 0.9916, false positives 0.0041 -> 0.0037.

The judge only removes findings (`veto`), never adds one, and only of the families the asset lists as
vetoable: a vendor's format (a fixed prefix, a checksum) is never vetoed. It is a dot product in plain
Python over regular expressions and the token counter the rules already load: no model library at
run time. `enabled()` says whether scrub applies it; `set_enabled` overrides the asset's default
(benchmarks, tests).
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from pathlib import Path
from typing import Any

from .rule_filters import ASSETS, entropy, is_word, token_count
from .secret_words import PASSWORD_WORDS

ASSET = ASSETS / "secret-judge.json"

# The rule families: a finding's kind (scrub's detection type) to the family its rule belongs to. Kinds not
# listed are a vendor's format (a fixed prefix, a checksum, a documented shape): "vendor".
FAMILY_OF: dict[str, str] = {
    "Secret Keyword": "keyword", "Secret Assignment": "keyword",
    "Generic Api Key": "generic",
    "Credential In Prose": "prose", "Password In Prose": "prose",
    "Positional Credential": "positional",
    "Basic Auth Credentials": "url", "Url Password": "url", "User Pass Pair": "url", "Url Query Credential": "url",
    "Go Sql Dsn": "url", "Mongodb Connection String": "url",
    "Command Line Secret": "command", "Command Line Password": "command", "Curl Auth User": "command",
    "Curl Auth Header": "command", "Authorization Header": "command", "Secret Command Value": "command",
    "Config Directive Password": "command", "Network Device Password": "command", "Redis Cli Password": "command",
}
FAMILIES = ("vendor", "keyword", "generic", "prose", "positional", "url", "command")

# Words in a value that say it is a stand-in, not a credential.
_PLACEHOLDER_WORDS = re.compile(r"(?i)your|example|xxx|changeme|password|secret|dummy|test|sample|here|<[^>]*>"
                                r"|\$\{|\{\{|\*\*\*")
# Words near a value that say it is a sample, public, a digest or ciphertext (English: the words the vendors'
# documentation uses).
_SAMPLE_CONTEXT = re.compile(r"(?i)\b(?:example|sample|e\.g\.|default|placeholder|dummy|fake|test(?:ing)?|demo"
                             r"|mock|such as|like this|format)\b")
_PUBLIC_CONTEXT = re.compile(r"(?i)\b(?:public|publishable|client[ _-]?id|site[ _-]?key|anon)\b")
_DIGEST_CONTEXT = re.compile(r"(?i)fingerprint|sha-?\d*\b|digest|hash|checksum|md5|commit|\bu?uid\b|\bid\b|nonce"
                             r"|version|build")
_CIPHER_CONTEXT = re.compile(r"(?i)cipher|encrypt|masked|redacted|vault|\bkms\b")
_CREDENTIAL_WORDS = re.compile(r"(?i)" + "|".join(re.escape(w) for w in PASSWORD_WORDS)
                               + r"|secret|token|api[_ -]?key|apikey|auth|credential|passwd|pwd|\bpass(?:phrase)?\b"
                               + r"|private[_ -]?key"
                               + r"|mnemonic|seed phrase|recovery phrase"
                               + r"|access[_ -]?key|bearer")
_ASSIGNED = re.compile(r"""(?:[:=]|=>|:=)\s*['"`]?$""")
_QUOTED = re.compile(r"""['"`]$""")
_URL_USERINFO = re.compile(r"://[^\s/@]*$")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?[A-Z][A-Z0-9_]*\s*=")
_COMMAND_LINE = re.compile(r"^\s*(?:\$|#|>|PS>)?\s*[a-z][\w.-]*\s+-")
_HEX = re.compile(r"[0-9a-fA-F]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
# A value made of words joined by spaces or hyphens (a passphrase, or prose; an identifier joins by underscores).
_PHRASE = re.compile(r"[^\W\d_]+(?:[ -]+[^\W\d_]+)+")
_PHRASE_WORD = re.compile(r"[^\W\d_]+")
_BEFORE, _AFTER = 60, 40  # the context window around a value, in characters of its line


def family(kind: str) -> str:
    """The rule family of a finding's kind (FAMILY_OF; "vendor" for any other kind)."""
    return FAMILY_OF.get(kind, "vendor")


def _folded(text: str) -> str:
    """`text` lower-cased, accents dropped, spaces and underscores as hyphens (contraseña ~ contrasena)."""
    plain = unicodedata.normalize("NFKD", text.lower())
    return re.sub(r"[\s_]+", "-", "".join(c for c in plain if not unicodedata.combining(c)))


_FOLDED_PASSWORD_WORDS = tuple({_folded(w) for w in PASSWORD_WORDS if len(w) >= 4})


def _longest_run(value: str) -> int:
    best = run = 0
    for i, c in enumerate(value):
        run = run + 1 if i and value[i - 1] == c else 1
        best = max(best, run)
    return best


def features(line: str, span: tuple[int, int], kind: str) -> dict[str, float]:
    """The judge's features of the finding `kind` at `span` (start, end: character offsets, end exclusive)
    of `line`: {name: value}, each in [0, 1] or a small non-negative number (log length, bits, characters
    per token). Names are FEATURES, in that order."""
    start, end = span
    value = line[start:end].strip("'\"`")
    before, after = line[max(0, start - _BEFORE):start], line[end:end + _AFTER]
    window = before + " " + after
    n = max(len(value), 1)
    fam = family(kind)
    classes = [any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value),
               any(not c.isalnum() for c in value)]
    tokens = token_count(value) if value else 1
    out: dict[str, float] = {f"family_{f}": float(fam == f) for f in FAMILIES}
    out.update({
        "log_length": math.log(n),
        "entropy": entropy(value),
        "chars_per_token": len(value) / max(tokens, 1),
        "classes": sum(classes) / 4,
        "has_symbol": float(classes[3]),
        "all_hex": float(_HEX.fullmatch(value) is not None and n >= 8),
        "base64ish": float(_BASE64.fullmatch(value) is not None and n >= 16),
        "digits_only": float(value.isdigit()),
        "letters_only": float(value.isalpha()),
        "run_fraction": _longest_run(value) / n,
        # A passphrase (diceware's "violet timber basket needle") is words of text, as prose is: their count tells.
        "phrase_words": min(len(words), 6) / 6 if (words := _PHRASE_WORD.findall(value))
        and _PHRASE.fullmatch(value) else 0.0,
        "uuid": float(_UUID.search(value) is not None),
        "english_word": float(is_word(value.lower())),
        "placeholder_word": float(_PLACEHOLDER_WORDS.search(value) is not None),
        # "tu_contrasena_aqui", "mot_de_passe_ici": a stand-in names what it stands for, in the writer's language.
        "password_word": float(any(w in _folded(value) for w in _FOLDED_PASSWORD_WORDS)),
        "context_sample": float(_SAMPLE_CONTEXT.search(window) is not None),
        "context_public": float(_PUBLIC_CONTEXT.search(window) is not None),
        "context_digest": float(_DIGEST_CONTEXT.search(window) is not None),
        "context_cipher": float(_CIPHER_CONTEXT.search(window) is not None),
        "context_credential": float(_CREDENTIAL_WORDS.search(before) is not None),
        "assigned": float(_ASSIGNED.search(before) is not None),
        "quoted": float(_QUOTED.search(before) is not None),
        "url_userinfo": float(_URL_USERINFO.search(before) is not None and after.startswith("@")),
        "env_line": float(_ENV_LINE.match(line) is not None),
        "command_line": float(_COMMAND_LINE.match(line) is not None),
    })
    return out


FEATURES = tuple(features("k = v", (4, 5), "Secret Keyword"))


@functools.cache
def _model() -> dict[str, Any]:
    model: dict[str, Any] = json.loads(Path(ASSET).read_text())
    if tuple(model["features"]) != FEATURES:
        raise ValueError(f"{ASSET}: its features {model['features']} are not this module's {list(FEATURES)};"
                         " regenerate it with bench/secrets_judge.py")
    return model


_override: bool | None = None


def enabled() -> bool:
    """Whether scrub applies the judge: set_enabled's value if it was called, else the asset's `enabled`."""
    return bool(_model()["enabled"]) if _override is None else _override


def set_enabled(on: bool | None) -> None:
    """Turn the judge on or off for this process (None: back to the asset's default)."""
    global _override
    _override = on


def score(vector: dict[str, float], model: dict[str, Any] | None = None) -> float:
    """The probability, in [0, 1], that a finding with features `vector` is a credential: the logistic
    function of the asset's intercept plus the dot product of its coefficients with the standardised
    vector ((x - mean) / scale, the mean and scale of the training candidates)."""
    model = model or _model()
    z = model["intercept"]
    for name, weight, mean, scale in zip(model["features"], model["coefficients"], model["mean"], model["scale"]):
        z += weight * (vector[name] - mean) / scale
    return 1 / (1 + math.exp(-z)) if z > -700 else 0.0


def probability(line: str, span: tuple[int, int], kind: str) -> float:
    """score(features(line, span, kind)): the probability that the finding is a credential."""
    return score(features(line, span, kind))


# A passphrase of this many words or more is never vetoed: diceware's "violet timber basket needle" has the
# shape and the context of prose to these features (LOSO's only vetoed credentials of a kind, no look-alike of it).
PHRASE_KEPT = 3
# What may tell a stand-in from a credential: the value holds a placeholder or a dictionary word, or is a digest's
# or a number's shape, or the words around it say sample, public, digest or ciphertext. A weak real password
# ("the password is hunter22") differs from a placeholder ("pass1234") by none of the shape features, so shape
# alone never vetoes: without one of these the finding stays.
STAND_IN_EVIDENCE = ("placeholder_word", "password_word", "english_word", "context_sample", "context_public",
                     "context_digest", "context_cipher", "uuid", "all_hex", "digits_only")


def exempt(vector: dict[str, float]) -> bool:
    """Whether a finding with features `vector` is out of the judge's reach: a phrase of PHRASE_KEPT words or
    more, or a value with none of STAND_IN_EVIDENCE."""
    return vector["phrase_words"] * 6 >= PHRASE_KEPT or not any(vector[f] for f in STAND_IN_EVIDENCE)


def vetoed(line: str, span: tuple[int, int], kind: str) -> bool:
    """Whether the judge removes this finding: its family is one the asset lists as vetoable, it is not
    `exempt`, and its probability is below the asset's threshold (chosen by leave-one-split-out
    cross-validation)."""
    model = _model()
    if family(kind) not in model["vetoable"]:
        return False
    vector = features(line, span, kind)
    return not exempt(vector) and score(vector, model) < model["threshold"]


def veto(line: str, detections: list[tuple[str, list[tuple[int, int]]]]) -> list[tuple[str, list[tuple[int, int]]]]:
    """`detections` ((kind, spans of `line`) pairs, as scrub finds them) less the spans the judge vetoes,
    and less a kind left with no span."""
    return [(kind, kept) for kind, spans in detections
            if (kept := [span for span in spans if not vetoed(line, span, kind)])]
