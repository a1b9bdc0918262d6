"""Every error Cairn raises on purpose, as one tree.

    CairnError
    ├── InvalidInput            bad input from a caller; nothing was written (CLI exit 2)
    │   ├── InvalidMemory       empty or oversized text, unknown kind, importance out of range
    │   ├── InvalidTime         a time that cannot be parsed
    │   ├── InvalidStoreName    a store name that is empty or escapes the data root
    │   ├── InvalidImport       an import file that is not valid UTF-8 JSON Lines of memories
    │   └── ConfigError         a config file that fails its schema (names the key)
    ├── MemoryNotFound          no memory with that id in this store
    ├── NotCurrent              the memory was already superseded or forgotten
    ├── ProposalNotFound        no review proposal with that id in this store
    ├── ProposalClosed          the proposal was already decided or has expired; nothing changes
    │   └── StaleProposal       a source changed since it was proposed; refused (and the proposal expired)
    ├── StoreError              the store file cannot be used as it is
    │   ├── StoreNotFound       an explicitly named store that does not exist
    │   ├── StoreCorrupted      the file is not a readable Cairn database
    │   ├── StoreUnreadable     the file belongs to another user and this one cannot open it
    │   ├── StoreBusy           another process holds the store locked for longer than the busy timeout
    │   ├── SchemaTooNew        written by a newer Cairn; refuse rather than guess
    │   ├── EmbeddingMismatch   the store's vectors come from another model; run `cairn reembed`
    │   ├── UnsafeDataRoot      the data root belongs to another user
    │   └── MaintenanceBusy     another maintenance run holds this store's lease
    └── EmbedderUnavailable     no embedding model could be loaded

Callers catch by meaning. The CLI turns any CairnError into one line on stderr and exit code 2.
"""

from __future__ import annotations


class CairnError(Exception):
    """Base of every error Cairn raises on purpose."""


class InvalidInput(CairnError):
    """The caller's input was rejected; nothing was written."""


class InvalidMemory(InvalidInput):
    pass


class InvalidTime(InvalidInput):
    pass


class InvalidStoreName(InvalidInput):
    pass


class InvalidImport(InvalidInput):
    pass


class ConfigError(InvalidInput):
    pass


class MemoryNotFound(CairnError):
    pass


class SessionNotFound(CairnError):
    """No captured session has that id."""


class NotCurrent(CairnError):
    pass


class ProposalNotFound(CairnError):
    """No review proposal has that id in this store."""


class ProposalClosed(CairnError):
    """The proposal is no longer pending (decided by another reviewer, or expired); nothing changed."""


class StaleProposal(ProposalClosed):
    """A source memory changed since the proposal was made; it is refused and marked expired."""


class StoreError(CairnError):
    pass


class StoreNotFound(StoreError):
    pass


class StoreCorrupted(StoreError):
    pass


class StoreUnreadable(StoreError):
    """The store file (or its -wal or -shm file) cannot be opened by this user: the message names
    the file and its owner."""


class StoreBusy(StoreError):
    """Another process held a lock on the store for longer than this caller's busy timeout."""


class SchemaTooNew(StoreError):
    pass


class EmbeddingMismatch(StoreError):
    pass


class UnsafeDataRoot(StoreError):
    pass


class MaintenanceBusy(StoreError):
    """Another maintenance run holds this store's lease."""


class EmbedderUnavailable(CairnError):
    pass
