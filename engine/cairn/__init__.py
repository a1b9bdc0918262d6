"""Cairn: local-first, long-term memory for Claude Code.

    from cairn import Cairn
    with Cairn.open() as memory:                 # the store of the current project
        memory.remember("We deploy with Kamal", kind="decision", tags=["deploy"])
        for hit in memory.recall("how do we deploy?"):
            print(hit.memory.id, hit.score, hit.memory.text)

Names are resolved lazily (PEP 562), so `import cairn.warm` in a hook costs milliseconds rather
than the engine's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Cairn": "engine", "Draft": "engine", "SCOPES": "engine",
    "Hit": "models", "Memory": "models", "RememberResult": "models", "KINDS": "models", "SOURCES": "models",
    "RankingConfig": "ranking",
    **{name: "errors" for name in (
        "CairnError", "ConfigError", "EmbedderUnavailable", "EmbeddingMismatch", "InvalidImport", "InvalidInput",
        "InvalidMemory", "InvalidStoreName", "InvalidTime", "MemoryNotFound", "NotCurrent", "SchemaTooNew",
        "StoreCorrupted", "StoreError", "StoreNotFound")},
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cairn' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


if TYPE_CHECKING:
    from .engine import SCOPES, Cairn, Draft
    from .errors import *  # noqa: F403
    from .models import KINDS, SOURCES, Hit, Memory, RememberResult
    from .ranking import RankingConfig
