"""A credential wrapped in base64 where the line decodes it: the literal is the secret in another spelling.

- `echo 'IUdUOX...=' | base64 --decode`, `printf %s 'X' | base64 -d`, `base64 -d <<< 'X'`, `openssl base64 -d`:
  a shell that decodes a literal (a Kubernetes Secret's `data:` value checked by hand, a password kept encoded);
- `base64.b64decode("X")`, `atob('X')`, `Buffer.from("X", "base64")`, `[Convert]::FromBase64String("X")`,
  `Base64.decode64("X")`, `base64_decode('X')`, `Base64.getDecoder().decode("X")`: code that does the same;
- `echo -n 'X' | base64`, `btoa("user:X")`, `base64.b64encode(b"X")`: the other way, the plain secret encoded
  (to fill a Kubernetes Secret's data, a Basic header).

The literal counts when what it decodes to is one line of printable ASCII with no space that is made like a
credential (secret_positional.credential_like: generated, or a password with a symbol), or a `user:password`
pair whose password is: `hello world`, a JSON header or a placeholder decoded is no secret. Pure functions of a
line (a plain one is judged as it stands); secret_positional.line_findings runs line_findings beside its own forms.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

_B64 = r"""['"]?([A-Za-z0-9+/]{8,400}={0,2})['"]?"""
# A shell pipes the literal into a decoder, or feeds it as a here-string.
_SHELL = re.compile(r"""(?<![\w-])(?:echo(?:\s+-[neE]+)*|printf(?:\s+['"]?%s(?:\\n)?['"]?)?)\s+""" + _B64
                    + r"""\s*\|\s*(?:base64\s+(?:-d|-D|--decode)|openssl\s+(?:base64|enc\s+-base64)\s+-d)\b""")
_HERE_STRING = re.compile(r"""\bbase64\s+(?:-d|-D|--decode)\s*<<<\s*""" + _B64)
# A call that decodes base64, given the literal as its one argument; Node's Buffer.from with "base64" after it.
_CALL = re.compile(r"""(?:\b(?:urlsafe_|standard_)?b64decode|\batob|\bdecode64|\bbase64_decode|\bFromBase64String"""
                   r"""|\bgetDecoder\(\)\s*\.\s*decode|\bBase64\.decode)\s*\(\s*b?(['"])([A-Za-z0-9+/_-]{8,400}={0,2})\1\s*\)"""
                   r"""|\bBuffer\.from\s*\(\s*(['"])([A-Za-z0-9+/]{8,400}={0,2})\3\s*,\s*['"]base64['"]""")

# The other way: a plain literal piped into an encoder or passed to one (`echo -n 'X' | base64` to fill a
# Kubernetes Secret's data, `btoa("user:X")`, `base64.b64encode(b"X")`): the literal is the secret as typed; not one
# holding a backslash (`b64encode(b'\x00\x01')`: bytes by their escapes, no typed secret).
_SHELL_ENCODE = re.compile(r"""(?<![\w-])(?:echo(?:\s+-[neE]+)*|printf(?:\s+['"]?%s(?:\\n)?['"]?)?)\s+"""
                           r"""(['"]?)([^\s'"|\\]{6,200})\1\s*\|\s*(?:base64|openssl\s+(?:base64|enc\s+-base64))(?![\w-])"""
                           r"""(?!\s+(?:-d|-D|--decode)\b)""")
_ENCODE_CALL = re.compile(r"""(?:\b(?:urlsafe_|standard_)?b64encode|\bbtoa|\bencode64|\bbase64_encode"""
                          r"""|\bstrict_encode64)"""
                          r"""\s*\(\s*b?(['"])([^\s'"\\]{6,200})\1\s*\)""")


def _decoded(value: str) -> str | None:
    """`value` decoded from base64 as one line of printable ASCII without spaces; None when it is not."""
    try:
        raw = base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4), validate=True)
        text = raw.decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    text = text.rstrip("\n")
    return text if text and text.isprintable() and " " not in text else None


def _encodes_a_secret(value: str, made_like_one: Callable[[str], bool]) -> bool:
    text = _decoded(value)
    if text is None:
        return False
    user, colon, password = text.partition(":")
    return made_like_one(text) or bool(colon and user and made_like_one(password))


def line_findings(line: str, made_like_one: Callable[[str], bool]) -> set[tuple[int, int]]:
    """Spans (start, end: offsets in `line`) of base64 literals the line decodes whose decoded text
    `made_like_one` accepts (secret_positional.credential_like)."""
    lower = line.lower()
    if not any(cue in lower for cue in ("base64", "atob", "btoa", "decode", "encode")):
        return set()
    spans = {m.span(1) for form in (_SHELL, _HERE_STRING) for m in form.finditer(line)}
    spans |= {m.span(2) if m.group(2) else m.span(4) for m in _CALL.finditer(line)}
    found = {(a, b) for a, b in spans if _encodes_a_secret(line[a:b], made_like_one)}
    plain = {m.span(2) for form in (_SHELL_ENCODE, _ENCODE_CALL) for m in form.finditer(line)}
    return found | {(a, b) for a, b in plain if _plain_secret(line[a:b], made_like_one)}


def _plain_secret(value: str, made_like_one: Callable[[str], bool]) -> bool:
    """Whether a literal given to an encoder is a secret, or a `user:password` pair whose password is one."""
    user, colon, password = value.partition(":")
    return made_like_one(value) or bool(colon and user and made_like_one(password))
