"""The catalogue of operations: every engine call an adapter offers, with its arguments declared once.

An operation is a name, a one-line summary, whether it writes, whether it may need the embedding
model, and its arguments. An argument (`Arg`) is the engine keyword it becomes, its type, its
default, its bounds and choices, and one sentence saying what it means. The adapters derive from it:

- the CLI (`cairn.adapters.cli`): each command's options, their types, ranges, choices and help;
- the MCP server (`cairn.adapters.mcp.tools`): each tool's parameters and the JSON schema the model sees;
- the HTTP API (`cairn.adapters.http`): each route's body or query model;
- docs/cli.md and docs/http.md, generated from those.

So recall's `k` has one bound in all three, and a new bound is one edit here. Bounds that exist to
keep a request a request (not a dump) are the constants below; the engine itself accepts any value.

Plain data with no dependency (tests/test_architecture.py keeps adapter frameworks out of the
core): the adapters turn an Arg into a pydantic field (cairn.adapters.schema) or a click option.

    from cairn import operations as ops
    ops.RECALL.arg("k").high        # 200
    [a.name for a in ops.LIST.args]  # kinds, tags, as_of, ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .models import (
    DEFAULT_IMPORTANCE, IMPORTANCE_RANGE, KINDS, MAX_APPLIES_CHARS, MAX_APPLIES_WHEN, MAX_RELATED, MAX_TEXT_BYTES,
    PROPOSAL_STATES,
    PROPOSAL_TYPES, SCOPES, SESSION_MODES, SOURCES,
)

# Request limits: large enough for any reading person or model, small enough that one call cannot
# ask for the whole store (`cairn export` and `list` paging are for that).
MAX_QUERY_CHARS = 2000     # a question, an error message or a stack trace's first lines
MAX_RECALL_K = 200         # memories one recall returns at most (config recall.k is the default)
MAX_LIST_LIMIT = 1000      # memories one list returns at most (config list.limit is the default)
MAX_SESSION_K = 50         # turns one session search returns; each comes with its window of turns
MAX_SESSION_WINDOW = 10    # turns before and after a session hit
MAX_PAGE = 200             # sessions, turns or proposals one page lists at most
MAX_QUEUE_LIMIT = 1000     # review proposals one call lists at most
MAX_TAGS = 20              # tags one memory or filter names
MAX_TAG_CHARS = 64
MAX_ID_CHARS = 64          # a memory or proposal id (ULIDs are 26)
MAX_TIME_CHARS = 40        # an ISO 8601 time with offset and fraction fits in 35

TYPES = ("str", "int", "bool", "time")


@dataclass(frozen=True)
class Arg:
    """One argument of an operation.

    name: the engine's keyword (and the MCP parameter and the JSON field). type: "str", "int",
    "bool" or "time" (a str the engine parses: ISO 8601 or epoch ms). many: a list of such values.
    low/high: int bounds (inclusive); for a str, its fewest and most characters. items: a list's
    most entries. choices: the allowed values (a str). default: used when the caller gives none;
    None means "the engine decides" (mostly: the config's value). required: no default at all.
    brief: what an MCP tool's schema says of it, paid for in every session (None: help; "": nothing,
    as when the name, type, bounds and choices say it all); help serves the CLI and HTTP docs.
    """

    name: str
    type: str
    help: str
    default: Any = None
    required: bool = False
    many: bool = False
    choices: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    items: int | None = None
    brief: str | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"Arg {self.name}: type {self.type!r} is not one of {TYPES}")


@dataclass(frozen=True)
class Operation:
    """One engine call as the adapters offer it: `name` (the CLI command and, as memory_<name>, the
    MCP tool), a one-line `summary`, whether it `writes` (refused to a read-only token) and whether
    it `embeds` (may wait for the embedding model), and its `args` in the order shown. `call`: the
    method it runs, as a path from a `Cairn` ("recall"; "review.queue" for `memory.review.queue`);
    default `name`."""

    name: str
    summary: str
    args: tuple[Arg, ...] = ()
    writes: bool = False
    embeds: bool = False
    call: str = ""
    by_name: Mapping[str, Arg] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {a.name: a for a in self.args})
        object.__setattr__(self, "call", self.call or self.name)
        if len(self.by_name) != len(self.args):
            raise ValueError(f"operation {self.name}: two arguments share a name")

    def arg(self, name: str) -> Arg:
        """The argument called `name`. Raises KeyError naming the operation."""
        try:
            return self.by_name[name]
        except KeyError:
            raise KeyError(f"operation {self.name} has no argument {name!r}") from None

    def pick(self, names: Iterable[str] | None = None, exclude: Iterable[str] = ()) -> tuple[Arg, ...]:
        """The arguments named (all of them when `names` is None, in declaration order), less `exclude`."""
        chosen = self.args if names is None else tuple(self.arg(n) for n in names)
        left_out = set(exclude)
        return tuple(a for a in chosen if a.name not in left_out)


# -- arguments several operations share ---------------------------------------------------------------
# brief="": an argument whose name, type and bounds say what it is; the MCP server's instructions
# say once that times are ISO 8601 and that an id may be given as [mem:ID].
def _memory_id(help: str = "A memory id as shown in results (also accepted as [mem:ID]).") -> Arg:
    return Arg("id", "str", help, required=True, low=1, high=MAX_ID_CHARS, brief="")


def _time(name: str, help: str) -> Arg:
    return Arg(name, "time", help, high=MAX_TIME_CHARS, brief="")


TEXT = Arg("text", "str", "One self-contained statement, understandable without this conversation.", required=True,
           low=1, high=MAX_TEXT_BYTES, brief="")
KIND = Arg("kind", "str", "decision (with its reason), convention, preference, fact, task or insight.",
           default="fact", choices=KINDS, brief="")
TAGS = Arg("tags", "str", "Short topic words, no spaces (e.g. deploy, testing).", default=(), many=True, low=1,
           high=MAX_TAG_CHARS, items=MAX_TAGS, brief="")
APPLIES_WHEN = Arg(
    "applies_when", "str",
    f"1-{MAX_APPLIES_WHEN} short phrases naming the tasks in which this memory matters, as a developer would say "
    "the task, not the memory's own words: the work someone would be doing when they need it (e.g. for \"Run "
    "`just gen-all` after changing a grammar\": \"adding a lint rule\", \"changing the parser grammar\"; for "
    "\"Feature flags are read from flags.yaml\": \"adding or changing a feature flag\"). Per-prompt recall matches "
    "prompts against them.",
    default=(), many=True, low=1, high=MAX_APPLIES_CHARS, items=MAX_APPLIES_WHEN,
    brief="Short phrases naming the tasks in which it matters, as a developer would (\"adding a lint rule\"), "
          "not its own words.")
PATHS = Arg("paths", "str", "Files, folders or globs relative to the project root that it governs (src/payments/, "
            "**/*.tsx), or commands (cmd:alembic): it comes back when work touches them.", default=(), many=True,
            low=1, high=200, items=8, brief="Files, folders or globs it governs (src/payments/), or cmd:COMMAND.")
KINDS_FILTER = Arg("kinds", "str", "Only these kinds (default: all).", default=(), many=True, choices=KINDS,
                   items=len(KINDS), brief="")
TAGS_FILTER = Arg("tags", "str", "Only memories with any of these tags.", default=(), many=True, low=1,
                  high=MAX_TAG_CHARS, items=MAX_TAGS, brief="")
AS_OF = _time("as_of", "What was true at this time (valid time; includes since-replaced memories).")
INCLUDE_SUPERSEDED = Arg("include_superseded", "bool", "Also replaced and expired memories (history).", default=False,
                         brief="")
INCLUDE_COLD = Arg("include_cold", "bool", "Also memories demoted to the cold tier (rarely needed).", default=False,
                    brief="")
VALID_FROM = _time("valid_from", "When it became true (ISO 8601; default: now).")


# -- the catalogue --------------------------------------------------------------------------------------
REMEMBER = Operation("remember", "Store one memory.", writes=True, embeds=True, args=(
    TEXT, KIND, TAGS,
    Arg("importance", "int", "1 (trivia) .. 3 (normal) .. 5 (critical).", default=DEFAULT_IMPORTANCE,
        low=IMPORTANCE_RANGE[0], high=IMPORTANCE_RANGE[1], brief=""),
    Arg("source", "str", "Who stated it.", default="user", choices=SOURCES),
    VALID_FROM,
    _time("valid_to", "When it stops being true (ISO 8601; default: open)."),
    Arg("scope", "str", "project, or global: a preference of the user's that holds in every project.",
        default="project", choices=("project", "global"), brief="global: the user's, in every project."),
    APPLIES_WHEN, PATHS,
))

RECALL = Operation("recall", "Ranked memories for a query, best first, each with why it ranked.", embeds=True, args=(
    Arg("query", "str", "What you want to know, in words.", required=True, low=1, high=MAX_QUERY_CHARS, brief=""),
    Arg("k", "int", "How many memories at most (default: config recall.k, 10).", low=1, high=MAX_RECALL_K, brief=""),
    KINDS_FILTER, TAGS_FILTER,
    _time("since", "Only memories valid from this time on."),
    _time("until", "Only memories valid from before this time."),
    AS_OF,
    _time("known_at", "What the store knew at this time (transaction time)."),
    INCLUDE_SUPERSEDED, INCLUDE_COLD,
    Arg("scope", "str", "project, global or all: this project's memories and the user's global ones (default: "
        "config recall.scope, all).", choices=SCOPES, brief=""),
))

LIST = Operation("list", "Memories, newest first: for browsing, not searching.", args=(
    KINDS_FILTER, TAGS_FILTER, AS_OF, INCLUDE_SUPERSEDED, INCLUDE_COLD,
    Arg("scope", "str", "project, global or all: project memories first, then the user's global ones (default: "
        "config list.scope, project).", choices=SCOPES, brief=""),
    Arg("limit", "int", "How many at most (default: config list.limit, 50).", low=1, high=MAX_LIST_LIMIT, brief=""),
))

GET = Operation("get", "One memory, whatever its status.", args=(_memory_id(),))

HISTORY = Operation("history", "The supersession chain through a memory, oldest first, with valid time and "
                    "transaction time.", args=(_memory_id(),))

REPLACE = Operation("replace", "Supersede a memory whose fact changed.", writes=True, embeds=True, args=(
    _memory_id(), TEXT,
    _time("valid_from", "When the change took effect (ISO 8601; default: now)."),
    Arg("applies_when", "str", APPLIES_WHEN.help + " Default: the old memory's.", many=True, low=1,
        high=MAX_APPLIES_CHARS, items=MAX_APPLIES_WHEN, brief="As in memory_remember."),
))

FORGET = Operation("forget", "Erase a memory for good; a tombstone stays in history.", writes=True,
                   args=(_memory_id(),))

KEEP_BOTH = Operation(
    "keep_both", "Record that a memory just written changes none of the memories its answer listed in "
    "`related`: both hold, so they are not queued for review.", writes=True, call="review.keep_both", args=(
        _memory_id("The memory just written (its id from memory_remember or memory_replace)."),
        Arg("others", "str", "Ids from its `related` that still hold beside it.", required=True, many=True,
            low=1, high=MAX_ID_CHARS, items=MAX_RELATED, brief="")))

PROMOTE = Operation("promote", "Bring a memory back from the cold tier into hooks and default recall.", writes=True,
                    call="review.promote", args=(_memory_id(),))

STATUS = Operation("status", "Which store and why, counts, model, whether recall is keyword-only.")

SEARCH_SESSIONS = Operation("search_sessions", "Search the captured turns of past sessions.", embeds=True,
                            call="sessions.search", args=(
    Arg("query", "str", "Words, or an exact error message / path / identifier (quote it to force an exact match).",
        required=True, low=1, high=MAX_QUERY_CHARS,
        brief="Quote an exact error, path or identifier to match it exactly."),
    Arg("mode", "str", "auto: exact for a quoted string or an identifier-like token, else keyword + semantic.",
        default="auto", choices=SESSION_MODES, brief=""),
    Arg("k", "int", "How many turns at most (default: config sessions.k, 10).", low=1, high=MAX_SESSION_K, brief=""),
    Arg("window", "int", "Turns before and after each hit (default: config sessions.window, 2).", low=0,
        high=MAX_SESSION_WINDOW, brief=""),
    _time("since", "Only turns from this time on."),
    _time("until", "Only turns before this time."),
    _time("reference", "What a time expression in the query (\"last week\", \"in March\", \"3 days ago\") counts "
          "from (default: now); the turns in the window it names rank first."),
))

LIST_SESSIONS = Operation("list_sessions", "Captured sessions, most recently active first.",
                          call="sessions.catalog", args=(
    Arg("limit", "int", "How many at most.", default=50, low=1, high=MAX_PAGE, brief=""),
    _time("since", "Only sessions active from this time on."),
    _time("until", "Only sessions started before this time."),
))

READ_SESSION = Operation("read_session", "A captured session's turns in order, paged by position.",
                         call="sessions.read", args=(
    Arg("session_id", "str", "As listed or found.", required=True, low=1, high=200, brief=""),
    Arg("offset", "int", "First turn position.", default=0, low=0, brief=""),
    Arg("limit", "int", "How many turns.", default=50, low=1, high=MAX_PAGE, brief=""),
))

REVIEW_QUEUE = Operation("review_queue", "The review queue: proposals from maintenance, possible conflicts and "
                         "imported guidance.", call="review.queue", args=(
    Arg("states", "str", "Only proposals in these states (default: pending).", default=(), many=True,
        choices=PROPOSAL_STATES, items=len(PROPOSAL_STATES), brief=""),
    Arg("types", "str", "Only these types (default: all).", default=(), many=True, choices=PROPOSAL_TYPES,
        items=len(PROPOSAL_TYPES), brief=""),
    Arg("limit", "int", "How many at most.", default=100, low=1, high=MAX_QUEUE_LIMIT, brief=""),
))

REVIEW_SHOW = Operation("review_show", "One proposal with its evidence.", call="review.show", args=(
    Arg("proposal_id", "str", "A proposal id from the review queue.", required=True, low=1, high=MAX_ID_CHARS),
))

REVIEW_DECIDE = Operation("review_decide", "The user's verdict on one proposal; compare-and-set.", writes=True,
                          embeds=True, call="review.decide", args=(
    Arg("proposal_id", "str", "A proposal id from the review queue.", required=True, low=1, high=MAX_ID_CHARS,
        brief=""),
    Arg("verdict", "str", "The verdict the user gave: approve, reject (keep is an older name for it) or edit "
        "(approve with text).", required=True, choices=("approve", "reject", "edit", "keep")),
    Arg("text", "str", "edit only: the text the user agreed to (a merge, a summary, an edited addition).", low=1,
        high=MAX_TEXT_BYTES, brief="edit: the text the user agreed to."),
    Arg("keep_id", "str", "approve: which of the proposal's memories stays (the others retire).",
        high=MAX_ID_CHARS, brief="approve: the memory the user chose to stay."),
    Arg("tags", "str", "approve or edit: the tags the memory that stays keeps.", many=True, low=1,
        high=MAX_TAG_CHARS, items=MAX_TAGS, brief="approve, edit: the tags the user chose for it."),
))

PROPOSE = Operation("propose", "Queue one memory for the user's approval (an `add` proposal).", writes=True,
                    call="review.propose", args=(
    TEXT, KIND, TAGS,
    Arg("applies_when", "str", "When it applies (e.g. 'editing SQL migrations').", many=True, low=1, high=200,
        items=10, brief=""),
    Arg("context", "str", "Where it came from (a heading).", high=300, brief=""),
    Arg("origin", "str", "The file it came from.", high=300, brief=""),
    PATHS,
))

MAINTAIN = Operation("maintain", "A maintenance run: a dry run unless `apply`.", writes=True,
                     call="review.maintain", args=(
    Arg("apply", "bool", "false: a dry run that writes nothing; true: retire exact duplicates and queue the rest "
        "for review.", default=False, brief=""),
    Arg("safe_only", "bool", "With apply: only retire exact duplicates; queue nothing.", default=False),
))

MAINTENANCE_STATUS = Operation("maintenance_status", "The last maintenance run, the lease, the queue's counts.",
                               call="review.status")

CATALOGUE: tuple[Operation, ...] = (
    REMEMBER, RECALL, LIST, GET, HISTORY, REPLACE, KEEP_BOTH, FORGET, PROMOTE, STATUS, SEARCH_SESSIONS, LIST_SESSIONS,
    READ_SESSION, REVIEW_QUEUE, REVIEW_SHOW, REVIEW_DECIDE, PROPOSE, MAINTAIN, MAINTENANCE_STATUS,
)
BY_NAME: Mapping[str, Operation] = {op.name: op for op in CATALOGUE}
