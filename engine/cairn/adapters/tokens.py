"""Access tokens for `cairn serve` over HTTP: created, listed and revoked by `cairn token ...`.

A token is `cairn_<id>_<secret>`: the id (8 hex) names it in lists and logs; the secret (32 random
bytes from `secrets`, url-safe base64) is shown once, at creation. The file keeps only the SHA-256
of the whole token, so reading the file does not give a usable token. A token may be limited to
named stores and to reads.

The file is <data root>/tokens.json, 0600 in a 0700 root (cairn.write_private), rewritten atomically.
A running server reads it again whenever it changes, so a revoked token stops working at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cairn
from cairn import InvalidInput, data_root, write_private

PREFIX = "cairn_"


@dataclass(frozen=True)
class Token:
    """One token's record. stores: the store names it may use (empty: every store).
    read_only: it may only read. created_at: epoch ms, UTC. sha256: hex digest of the token."""

    id: str
    name: str
    sha256: str
    created_at: int
    read_only: bool = False
    stores: tuple[str, ...] = field(default_factory=tuple)

    def allows_store(self, store: str) -> bool:
        return not self.stores or store in self.stores

    def to_json(self) -> dict[str, Any]:
        """The record without its digest: what `cairn token list --json` shows."""
        data = asdict(self)
        del data["sha256"]
        data["stores"] = list(self.stores)
        data["created_at_iso"] = cairn.format_time(self.created_at)
        return data


def tokens_path(env: Mapping[str, str] | None = None) -> Path:
    """<data root>/tokens.json, in the data root of `env` (the root's; default cairn.process_env())."""
    return data_root(env=env) / "tokens.json"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load(path: Path | None = None) -> list[Token]:
    """Every token on file ([] when there is no file). Raises InvalidInput for a file that is not
    Cairn's token list (never guesses: a server must not start with half its tokens)."""
    path = path or tokens_path()
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        rows = json.loads(raw)["tokens"]
        return [Token(**{**row, "stores": tuple(row.get("stores", ()))}) for row in rows]
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"{path} is not a Cairn token file ({type(exc).__name__}: {exc}); "
                           "move it aside and create tokens again") from None


def _save(tokens: list[Token], env: Mapping[str, str] | None = None) -> None:
    rows = [{**asdict(t), "stores": list(t.stores)} for t in tokens]
    write_private(tokens_path(env), (json.dumps({"tokens": rows}, indent=2) + "\n").encode("utf-8"), env=env)


def create(name: str, *, stores: tuple[str, ...] = (), read_only: bool = False,
           env: Mapping[str, str] | None = None) -> tuple[str, Token]:
    """A new token: (the token itself, to show once; its record, saved). stores: store names it
    is limited to (each checked as a store name; empty: every store). Raises InvalidInput
    (empty or duplicate name), InvalidStoreName."""
    name = name.strip()
    if not name:
        raise InvalidInput("a token needs a name (what it is for, e.g. opencode-laptop)")
    for store in stores:
        cairn.resolve(store, env=env)  # raises InvalidStoreName for a name that is not a store name
    tokens = load(tokens_path(env))
    if any(t.name == name for t in tokens):
        raise InvalidInput(f"a token named {name!r} exists; revoke it first or choose another name")
    token_id = secrets.token_hex(4)
    while any(t.id == token_id for t in tokens):
        token_id = secrets.token_hex(4)
    secret = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    record = Token(id=token_id, name=name, sha256=_digest(secret), created_at=int(time.time() * 1000),
                   read_only=read_only, stores=tuple(dict.fromkeys(stores)))
    _save([*tokens, record], env)
    return secret, record


def revoke(name_or_id: str, *, env: Mapping[str, str] | None = None) -> Token:
    """Remove the token with this name or id; returns its record. Raises InvalidInput if none."""
    tokens = load(tokens_path(env))
    gone = [t for t in tokens if name_or_id in (t.name, t.id)]
    if not gone:
        raise InvalidInput(f"no token named {name_or_id!r} (see `cairn token list`)")
    _save([t for t in tokens if t not in gone], env)
    return gone[0]


def verify(presented: str, tokens: list[Token]) -> Token | None:
    """The record of the presented token, or None. Digests are compared in constant time."""
    digest = _digest(presented)
    found = None
    for t in tokens:
        if hmac.compare_digest(t.sha256, digest):
            found = t
    return found


class TokenFile:
    """The token list as a server sees it: read again whenever the file changes (mtime, size)."""

    def __init__(self, path: Path | None = None):
        self.path = path or tokens_path()
        self._stamp: tuple[int, int] | None = None
        self._tokens: list[Token] = []

    def tokens(self) -> list[Token]:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            self._tokens = load(self.path) if stamp else []
            self._stamp = stamp
        return self._tokens
