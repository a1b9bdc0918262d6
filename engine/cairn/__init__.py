"""Cairn: local-first, long-term memory for Claude Code.

    from cairn import Cairn
    with Cairn.open() as memory:                 # the store of the current project
        memory.remember("We deploy with Kamal", kind="decision", tags=["deploy"])
        for hit in memory.recall("how do we deploy?"):
            print(hit.memory.id, hit.score, hit.memory.text)
"""

from .engine import SCOPES, Cairn, Draft
from .errors import (
    CairnError, ConfigError, EmbedderUnavailable, EmbeddingMismatch, InvalidImport, InvalidInput, InvalidMemory,
    InvalidStoreName, InvalidTime, MemoryNotFound, NotCurrent, SchemaTooNew, StoreCorrupted, StoreError,
    StoreNotFound,
)
from .models import KINDS, SOURCES, Hit, Memory, RememberResult
from .ranking import RankingConfig

__version__ = "0.1.0"

__all__ = [
    "Cairn", "Draft", "Hit", "Memory", "RememberResult", "RankingConfig", "KINDS", "SOURCES", "SCOPES",
    "CairnError", "ConfigError", "EmbedderUnavailable", "EmbeddingMismatch", "InvalidImport", "InvalidInput",
    "InvalidMemory", "InvalidStoreName", "InvalidTime", "MemoryNotFound", "NotCurrent", "SchemaTooNew",
    "StoreCorrupted", "StoreError", "StoreNotFound",
]
