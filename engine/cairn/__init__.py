"""Cairn: local-first, long-term memory for Claude Code.

    from cairn import Cairn
    with Cairn.open() as memory:                 # the store of the current project
        memory.remember("We deploy with Kamal", kind="decision", tags=["deploy"])
        for hit in memory.recall("how do we deploy?"):
            print(hit.memory.id, hit.score, hit.memory.text)

Names are resolved lazily (PEP 562), so `import cairn.adapters.warm.client` in a hook costs milliseconds rather
than the engine's imports. This module itself imports nothing (not even typing): the hook process's
warm path goes through it.

Importing it switches off the telemetry of every library Cairn loads (NO_TELEMETRY), before any of
them is imported: every Cairn process (hook, warm process, MCP server, CLI, `cairn serve`) imports
this package first, and the processes it starts inherit the environment. Nothing leaves the machine.
"""

import os
import sys

# Each library in the runtime lock (engine/runtime-requirements.txt) that can send telemetry, and the
# variable its documentation names to switch it off. Forced, not defaulted: a local-first tool does
# not phone home whatever the environment says. tests/test_no_network.py runs every process under
# strace and fails on any connection that is not loopback or a Unix socket.
NO_TELEMETRY = {
    "ORT_DISABLE_TELEMETRY": "1",  # onnxruntime >= 1.29: 1DS events to mobile.events.data.microsoft.com
    "HF_HUB_DISABLE_TELEMETRY": "1",  # huggingface-hub, and transformers / sentence-transformers through it
    "DO_NOT_TRACK": "1",  # the cross-tool convention (https://donottrack.sh); huggingface-hub honours it too
    "OTEL_SDK_DISABLED": "true",  # OpenTelemetry (the mcp SDK traces through its API): no exporter runs
}
os.environ.update(NO_TELEMETRY)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing

__version__ = "0.1.0"

# The public API: every name an adapter (CLI, hooks, warm process, MCP server) may use, and the
# module that defines it. tests/test_architecture.py holds adapters to this list.
_BY_MODULE = {
    "api": "Cairn",
    "compose": "Resolved ResolveCache resolve embedder_from_config",
    "config": "load_config",
    "context": "is_trivial prompt_context session_brief tool_context subagent_context",
    "embedder": "Embedder parse_fingerprint required_extra",
    "environment": "process_env",
    "errors": "CairnError ConfigError EmbedderUnavailable EmbeddingMismatch InvalidImport InvalidInput "
              "InvalidMemory InvalidStoreName InvalidTime MemoryNotFound NotCurrent SchemaTooNew SessionNotFound "
              "StoreBusy MaintenanceBusy ProposalClosed ProposalNotFound StaleProposal StoreCorrupted StoreError "
              "StoreNotFound StoreUnreadable UnsafeDataRoot",
    "health": "Check doctor",
    "home": "data_root ensure_data_root private_dir private_file write_private",
    "locations": "data_root_dir user_data_dir",
    "models": "SCOPES Hit Memory SessionHit SessionHits SessionInfo Turn SESSION_MODES RememberResult Status Order "
              "KINDS SOURCES STATUSES DEFAULT_IMPORTANCE IMPORTANCE_RANGE MAX_TEXT_BYTES MAX_APPLIES_WHEN "
              "MAX_APPLIES_CHARS Proposal PROPOSAL_TYPES PROPOSAL_STATES REVIEW_VERBS DECIDERS",
    "timeutil": "format_date format_time parse_time",
    "memories.ranking": "RankingConfig",
    "memories.reads": "VECTOR_FLOOR",
    "memories.records": "Draft",
    "memories.render": "cited_ids",
    "memories.scope_index": "Scopes",
    "memories.scopes": "COMMAND CITED_WEIGHT commands_of path_arguments relative normalise_pattern prefix_of",
    "privacy.scrub": "PRIVATE_KIND",
    "review.review_api": "Review",
    "sessions.sessions_api": "Sessions",
    "sessions.timewindow": "TimeWindow find_time_window",
    "sessions.turns": "merge_session_hits SessionResult",
    "storage.db": "BROKEN_STORE_ERRORS",
    "stores.admin": "create_store list_stores delete_store rename_store backup_store backups_of restore_store "
                    "migrate_store",
    "stores.paths": "GLOBAL_STORE",
}
_EXPORTS = {name: module for module, names in _BY_MODULE.items() for name in names.split()}
# Public modules, used whole: `from cairn import render`.
_MODULES = {"operations": "operations", "render": "memories.render"}
__all__ = sorted([*_EXPORTS, *_MODULES])


def _module(name: str) -> "ModuleType":
    __import__(f"{__name__}.{name}")  # not importlib: the hook's warm path does not import it
    return sys.modules[f"{__name__}.{name}"]


def __getattr__(name: str) -> "Any":
    if name in _MODULES:
        return _module(_MODULES[name])
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cairn' has no attribute {name!r}")
    return getattr(_module(module), name)


if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

    from . import operations
    from .memories import render
    from .compose import ResolveCache, Resolved, embedder_from_config, resolve
    from .config import load_config
    from .storage.db import BROKEN_STORE_ERRORS
    from .health import Check, doctor
    from .locations import data_root_dir, user_data_dir
    from .context import is_trivial, prompt_context, session_brief, subagent_context, tool_context
    from .memories.scope_index import Scopes
    from .memories.scopes import (CITED_WEIGHT, COMMAND, commands_of, normalise_pattern, path_arguments, prefix_of,
                                  relative)
    from .embedder import Embedder, parse_fingerprint, required_extra
    from .environment import process_env
    from .api import Cairn
    from .memories.reads import VECTOR_FLOOR
    from .errors import *  # noqa: F403
    from .models import (
        DECIDERS, DEFAULT_IMPORTANCE, IMPORTANCE_RANGE, KINDS, MAX_APPLIES_CHARS, MAX_APPLIES_WHEN, MAX_TEXT_BYTES,
        PROPOSAL_STATES, PROPOSAL_TYPES, REVIEW_VERBS, SCOPES, SESSION_MODES, SOURCES, STATUSES, Hit, Memory,
        Order, Proposal, RememberResult, SessionHit, SessionHits, SessionInfo, Status, Turn,
    )
    from .home import data_root, ensure_data_root, private_dir, private_file, write_private
    from .stores.paths import GLOBAL_STORE
    from .memories.ranking import RankingConfig
    from .memories.records import Draft
    from .review.review_api import Review
    from .memories.render import cited_ids
    from .sessions.turns import SessionResult, merge_session_hits
    from .sessions.sessions_api import Sessions
    from .stores.admin import (
        backup_store, backups_of, create_store, delete_store, list_stores, migrate_store, rename_store, restore_store,
    )
    from .timeutil import format_date, format_time, parse_time
    from .sessions.timewindow import TimeWindow, find_time_window
