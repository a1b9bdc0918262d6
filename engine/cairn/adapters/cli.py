"""The `cairn` command line: a thin layer over the engine API.

A command that reads or writes one store's memories takes --store NAME (else $CAIRN_STORE, else the
project of the working directory) and --create; every command but hook, serve and config takes --json
(stable keys, docs/cli.md). Errors: one line on stderr, exit code 2. Defaults (k, scope, limit)
come from the config, never from here.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import cairn
from cairn import DEFAULT_IMPORTANCE, KINDS, PROPOSAL_STATES, PROPOSAL_TYPES, SCOPES, SESSION_MODES, SOURCES, Embedder

if TYPE_CHECKING:
    from cairn import Cairn

from . import warm
from .warm import session_embedder

LOADING_NOTICE = "cairn: loading the embedding model (first call after a while)…"
# Where the call spent its time (`status --timings`): name -> seconds, in the order measured.
_TIMINGS: dict[str, float] = {}


def _since_process_start() -> float | None:
    """Seconds since this process started (Linux /proc, 10 ms resolution), or None elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class TimeParam(click.ParamType):
    """A time option (ISO 8601 or epoch ms), read by cairn.parse_time; errors name the option."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, int):
            return value
        # Not click's BadParameter: the engine's own message, led by the option as the user typed it.
        return cairn.parse_time(value, field=param.opts[0] if param is not None and param.opts else "time")


TIME = TimeParam()


class _NoticeEmbedder(Embedder):
    """Wraps the session embedder: says once, on a terminal, that the model is loading when the
    warm process is not ready yet (the first embed then waits for it, or loads in-process)."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.model_name, self.dim, self.backend = inner.model_name, inner.dim, inner.backend
        self._told = False

    @property
    def loaded(self) -> bool:
        return bool(getattr(self.inner, "loaded", True))

    def load(self) -> None:
        self.embed(["warm up"])

    def embed(self, texts: list[str]):
        return self._embed(texts, self.inner.embed)

    def embed_queries(self, texts: list[str]):
        return self._embed(texts, self.inner.embed_queries)

    def _embed(self, texts: list[str], embed):
        if not self._told and sys.stderr.isatty() and not warm.socket_path().exists():
            click.echo(LOADING_NOTICE, err=True)
        self._told = True
        vectors = embed(texts)
        self.dim, self.backend, self.weights = self.inner.dim, self.inner.backend, self.inner.weights
        return vectors


def _read_stdin() -> str:
    """stdin as strict UTF-8. Raises InvalidInput naming the first bad byte."""
    raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise cairn.InvalidInput(f"stdin is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


def _undecodable_argument(args: list[str]) -> str | None:
    """The first argument holding bytes that are not UTF-8 (Python keeps them as lone surrogates), or None."""
    for arg in args:
        if any("\udc80" <= c <= "\udcff" for c in arg):
            return arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return None


def _interactive() -> bool:
    """Whether someone at a terminal can answer a question."""
    return sys.stdin.isatty()


def _cli_embedder(config: dict[str, Any]) -> Embedder | None:
    """The warm process's model (started if it is not up; in-process if it cannot serve), or the
    in-process model when CAIRN_NO_WARM=1 (tests, benchmarks of the cold path)."""
    if os.environ.get("CAIRN_NO_WARM") == "1":
        inner = cairn.embedder_from_config(config, short_lived=True)
    else:
        inner = session_embedder(config, short_lived=True,
                                 on_fallback=lambda reason: click.echo(f"cairn: {reason}", err=True))
    return None if inner is None else _NoticeEmbedder(inner)


def _count(n: int, one: str, many: str | None = None) -> str:
    """"1 time", "2 times": the number and the word in the right number."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def _emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human()


def _progress(items, total):
    from tqdm import tqdm

    # Only on a terminal: a progress bar's carriage returns do not belong in a log file.
    return tqdm(items, total=total, file=sys.stderr, unit="batch", disable=not sys.stderr.isatty() or total < 2)


def store_options(fn: Callable | None = None, *, read_only: bool = False, use_warm: bool = False,
                  check_model: bool = True) -> Callable:
    """--store, --create and --json; resolves the store and config once and opens the engine as `memory`.

    read_only: the command only reads, so a store file that does not exist is not created; the
    command answers as for an empty store. use_warm: embed through the warm process (started when it
    is not up) rather than by loading the model in this process. check_model False: open a store
    embedded with another model too (reembed re-embeds it; status says so)."""
    if fn is None:
        return functools.partial(store_options, read_only=read_only, use_warm=use_warm, check_model=check_model)

    @click.option("--store", "store_name", metavar="NAME",
                  help="Store to use (default: $CAIRN_STORE, else this project's).")
    @click.option("--create", is_flag=True, help="Create the named store if it does not exist.")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
    @functools.wraps(fn)
    def wrapper(store_name: str | None, create: bool, as_json: bool, **kwargs: Any) -> None:
        if fn.__name__ in warm.CLI_OPS and not kwargs.get("keyword_only") and os.environ.get("CAIRN_NO_WARM") != "1":
            # The warm process is up: it has the store open and the model loaded, so it answers in
            # milliseconds; this process then imports neither the engine nor SQLite.
            reply = warm.request({"op": "cli", "command": fn.__name__, "store": store_name, "cwd": os.getcwd(),
                                  "env": {k: os.environ[k] for k in warm.HOOK_ENV_KEYS if k in os.environ},
                                  "options": kwargs}, timeout=60)
            if reply is not None:
                if reply.get("error"):
                    raise cairn.CairnError(reply["error"])
                return _WARM_VIEWS[fn.__name__](as_json, reply["result"])
        started = time.perf_counter()
        resolved = cairn.resolve(store_name)
        _TIMINGS["config and store resolution"] = time.perf_counter() - started
        embedder: Embedder | None | str = "auto"
        if kwargs.pop("keyword_only", False):
            embedder = None
        elif use_warm:
            embedder = _cli_embedder(resolved.config)
        started = time.perf_counter()
        # A write to the global store alone creates no project store (read_only only spares a
        # project store that does not exist; the global one is opened for the write as always).
        only_global = kwargs.get("scope") == "global" and fn.__name__ == "remember"
        with cairn.Cairn.open(resolved=resolved, create=create, embedder=embedder,
                              read_only=read_only or only_global,
                              check_model=check_model) as memory:
            _TIMINGS["store open"] = time.perf_counter() - started
            fn(memory, as_json=as_json, **kwargs)

    return wrapper


def _split_tags(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """--tag/--tags values, each comma-separated, as one tuple: split once, before the command runs,
    so a recall answered by the warm process gets the same tags as one answered here."""
    return tuple(t for v in values for t in v.split(",") if t.strip())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cairn-memory")
@click.option("-v", "--verbose", is_flag=True, help="Log to stderr.")
def cli(verbose: bool) -> None:
    """Cairn: local-first, long-term memory for Claude Code."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="cairn: %(levelname)s: %(message)s")


@cli.command()
@click.argument("text")
@click.option("--kind", type=click.Choice(KINDS), help="Default: fact (with --replaces: the replaced memory's).")
@click.option("--tags", "tags", multiple=True, callback=_split_tags,
              help="Comma-separated; may repeat (with --replaces, default: the replaced memory's).")
@click.option("--importance", type=int,
              help=f"1 (trivia) to 5 (critical). Default: {DEFAULT_IMPORTANCE} (with --replaces: the replaced "
                   "memory's).")
@click.option("--source", type=click.Choice(SOURCES), default="user", show_default=True)
@click.option("--valid-from", type=TIME, help="When it became true (ISO 8601; default: now).")
@click.option("--valid-to", type=TIME, help="When it stops being true (ISO 8601; default: open).")
@click.option("--applies-when", "applies_when", multiple=True, metavar="PHRASE",
              help="A task in which this memory matters, e.g. \"adding a lint rule\"; repeat for up to 4 "
                   "(with --replaces, default: the replaced memory's).")
@click.option("--replaces", metavar="ID", help="Supersede this memory.")
@click.option("--scope", type=click.Choice(["project", "global"]), default="project", show_default=True)
@click.option("--no-detect", is_flag=True, help="Do not supersede similar memories automatically.")
@click.option("--no-ask", is_flag=True, help="Do not ask which related memory the new one replaces.")
@click.option("--keyword-only", is_flag=True, help="Do not load the embedding model (embedded later).")
@store_options(use_warm=True)
def remember(memory: Cairn, as_json: bool, text: str, tags, applies_when: tuple[str, ...], no_detect: bool,
             no_ask: bool, scope: str, replaces: str | None, **fields) -> None:
    """Store TEXT as a memory ("-" reads it from stdin).

    The answer lists up to 3 related memories (any kind, about the same subject). On a terminal it
    then asks which one, if any, the new memory replaces; not with --no-ask, --json, or when stdin is
    not a terminal."""
    if text == "-":
        text = _read_stdin()
        no_ask = True  # stdin held the text: there is no one to ask
    if replaces is not None:
        # As Cairn.replace: kind, tags, importance and applies-when default to the replaced memory's.
        result = memory.replace(replaces, text, tags=tags or None, applies_when=applies_when or None, **fields)
    else:
        draft = {k: v for k, v in fields.items() if v is not None}
        result = memory.remember_many([cairn.Draft(text=text, tags=tags, applies_when=applies_when, **draft)],
                                      scope=scope, detect=False if no_detect else None)[0]

    def human() -> None:
        verb = "already remembered as" if result.status == "duplicate" else "remembered"
        asked = fields.get("kind")
        differs = result.status == "duplicate" and asked and asked != result.memory.kind
        click.echo(f"{verb} {result.memory.id}" + (f" (a {result.memory.kind}, not a {asked}: nothing was "
                                                    f"written; `cairn remember --replaces {result.memory.id} "
                                                    f"--kind {asked} ...` changes its kind)" if differs else ""))
        for r in result.redacted:
            click.echo(f"redacted a secret ({r['kind']}) at characters {r['start']}-{r['end']} of the "
                       f"{r['field'].replace('_', '-')}: it is stored as [REDACTED:{r['kind']}]")
        for old in result.superseded:
            click.echo(f"superseded {old}")
        for n, r in enumerate(result.related, 1):
            click.echo(f"related {n}. {r['id']}  [{r['kind']}] {r['date']}\n    {r['text']}\n    ({r['why']})")
        if result.related and (no_ask or not sys.stdin.isatty()):
            click.echo("if it changes one of these: `cairn remember --replaces ID TEXT`; "
                       "unresolved pairs are queued for review (`cairn review list`)")

    _emit(as_json, result.to_json(), human)
    if result.related and not as_json and not no_ask and sys.stdin.isatty():
        _ask_replaced(memory, result, text)


def _ask_replaced(memory: Cairn, result: cairn.RememberResult, text: str) -> None:
    """Ask on the terminal which related memory, if any, the new one replaces, and retire it."""
    choice = click.prompt(f"Does it replace one of these? [1-{len(result.related)}, Enter: none]",
                          default="", show_default=False,
                          type=click.Choice(["", *map(str, range(1, len(result.related) + 1))]),
                          show_choices=False)
    if not choice:
        return
    old = result.related[int(choice) - 1]["id"]
    done = memory.replace(old, text)  # the text is current already: old is superseded by it
    click.echo(f"{old} is superseded by {done.memory.id}")


@cli.command()
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 1000), help="How many at most (default: config recall.k, 10).")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS))
@click.option("--tag", "tags", multiple=True, callback=_split_tags)
@click.option("--since", type=TIME, help="Only memories valid from this time on.")
@click.option("--until", type=TIME, help="Only memories valid from before this time.")
@click.option("--as-of", type=TIME, help="What was true at this time (valid time).")
@click.option("--known-at", type=TIME, help="What the store knew at this time (transaction time).")
@click.option("--include-superseded", is_flag=True)
@click.option("--include-cold", is_flag=True, help="Also memories demoted to the cold tier.")
@click.option("--scope", type=click.Choice(SCOPES),
              help="project, global or all (default: config recall.scope, all).")
@click.option("--keyword-only", is_flag=True, help="BM25 only; do not load the embedding model.")
@store_options(read_only=True, use_warm=True)
def recall(memory: Cairn, as_json: bool, query: str, tags, **options) -> None:
    """Ranked memories for QUERY, each with why it ranked."""
    hits = memory.recall(query, tags=tags, **options)
    _show_hits(as_json, [h.to_json() for h in hits])


def _show_hits(as_json: bool, hits: list[dict[str, Any]]) -> None:
    """Recall results (Hit.to_json, from this process or the warm one), as JSON or for a terminal."""

    def human() -> None:
        from cairn import Hit, Memory

        if not hits:
            click.echo("no memories match")
        for n, data in enumerate(hits, 1):
            fields = {k: v for k, v in data["memory"].items() if k in Memory.__dataclass_fields__}
            fields.update(tags=tuple(fields["tags"]), applies_when=tuple(fields.get("applies_when") or ()))
            hit = Hit(Memory(**fields), data["score"], data["reasons"])
            click.echo(f"{n}. {cairn.render.line(hit.memory)}\n    score {hit.score:.4f}: {hit.why()}")

    _emit(as_json, hits, human)


# Commands the warm process answers when it is up (service.WarmServer.cli), and how to show its answer.
_WARM_VIEWS = {"recall": _show_hits}


@cli.command()
@click.argument("memory_id")
@store_options(read_only=True)
def history(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """The supersession chain through MEMORY_ID, oldest first, with valid and transaction times, and
    how each was used: injected by a hook, then cited by Claude as [mem:ID] (JSON key "usage")."""
    chain = memory.history(memory_id)
    rows = [{**cairn.render.full(m), "usage": memory.usage(m.id)} for m in chain]

    def human() -> None:
        for m, d in zip(chain, rows):
            click.echo(cairn.render.line(m))
            click.echo(f"    valid {d['valid_from_iso']} .. {d['valid_to_iso'] or 'open'}; "
                       f"recorded {d['recorded_at_iso']}, retired {d['retired_at_iso'] or '-'}")
            use = d["usage"]
            click.echo(f"    injected {_count(use['injected'], 'time')}, cited {_count(use['cited'], 'time')}"
                       + (f", last cited {cairn.format_time(use['last_cited_at'])}" if use["last_cited_at"] else ""))

    _emit(as_json, rows, human)


@cli.command()
@click.argument("memory_id")
@store_options
def forget(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """Erase MEMORY_ID: its text, vector and index entries; a tombstone remains."""
    # Forget is idempotent: a tombstone from an earlier forget is given back unchanged, and said so.
    done = "forgot" if memory.get(memory_id).forgotten_at is None else "already forgotten:"
    tomb = memory.forget(memory_id)
    _emit(as_json, cairn.render.full(tomb), lambda: click.echo(f"{done} {tomb.id}"))


@cli.command()
@click.argument("memory_id")
@store_options(read_only=True)
def show(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """One memory, whatever its status."""
    m = memory.get(memory_id)
    _emit(as_json, cairn.render.full(m), lambda: click.echo(cairn.render.line(m)))


@cli.command(name="list")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS))
@click.option("--tag", "tags", multiple=True, callback=_split_tags)
@click.option("--as-of", type=TIME, help="What was true at this time (valid time).")
@click.option("--include-superseded", is_flag=True)
@click.option("--include-cold", is_flag=True, help="Also memories demoted to the cold tier.")
@click.option("--scope", type=click.Choice(SCOPES), help="Default: config list.scope, project.")
@click.option("--limit", type=click.IntRange(1), help="How many at most (default: config list.limit, 50).")
@store_options(read_only=True)
def list_(memory: Cairn, as_json: bool, tags, **options) -> None:
    """Memories, newest first."""
    items = memory.list(tags=tags, **options)
    use = memory.usage_of([m.id for m in items]) if items else {}

    def human() -> None:
        if not items:
            click.echo("no memories match")
        for m in items:
            click.echo(cairn.render.line(m))
            if m.id in use:
                click.echo(f"    {cairn.render.usage(use[m.id])}")

    _emit(as_json, [{**cairn.render.full(m), **({"usage": use[m.id]} if m.id in use else {})} for m in items], human)


@cli.command(name="reset-usage")
@click.argument("memory_ids", nargs=-1)
@store_options()
def reset_usage(memory: Cairn, as_json: bool, memory_ids: tuple[str, ...]) -> None:
    """Forget how often memories were injected and cited (all of the store's, or MEMORY_IDS): briefs and
    per-prompt recall stop favouring what Claude cited and stop demoting what it ignored."""
    n = memory.reset_usage(memory_ids or None)
    _emit(as_json, {"reset": n}, lambda: click.echo(f"usage counts reset for {n} memor{'y' if n == 1 else 'ies'}"))


@cli.command()
@click.argument("memory_id")
@click.option("--keyword-only", is_flag=True, help="Do not load the embedding model (embedded later).")
@store_options(use_warm=True)
def edit(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """Open $EDITOR on MEMORY_ID's text and save the result as its replacement (unchanged: nothing written)."""
    old = memory.get(memory_id)
    if old.forgotten_at is not None or old.superseded_by is not None:
        raise cairn.InvalidInput(f"memory {memory_id} is not current; "
                                 f"edit the current one (see `cairn history {memory_id}`)")
    edited = click.edit(old.text or "", extension=".txt")
    if edited is None or edited.strip() == (old.text or "").strip():
        _emit(as_json, {"changed": False, "id": old.id}, lambda: click.echo(f"unchanged; nothing written ({old.id})"))
        return
    try:
        result = memory.replace(old.id, edited.strip(), source="user")
    except cairn.InvalidInput as exc:
        # Refused (too long, all private ...): the user's edit is kept in a private temporary file
        # (outside the data root, which a forget must leave clean), named in the error.
        import tempfile

        fd, kept = tempfile.mkstemp(prefix=f"cairn-edit-{old.id}-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(edited)
        raise cairn.InvalidInput(f"{exc}; nothing was written; your edited text is in {kept}") from None
    _emit(as_json, {"changed": True, **result.to_json()},
          lambda: click.echo(f"replaced {old.id} by {result.memory.id}"))


@cli.command()
@click.option("--timings", is_flag=True, help="Also print where this call spent its time.")
@store_options(read_only=True, use_warm=True, check_model=False)
def status(memory: Cairn, as_json: bool, timings: bool) -> None:
    """Which store and why, counts, size, vector backend and model.

    Whether recall is keyword-only is checked, not assumed: the embedding model is asked for one
    vector (through the warm process, started if need be), so the first status after a while may
    take a few seconds."""
    started = time.perf_counter()
    memory.embed(["cairn status"])  # a model that cannot load sets the keyword-only reason
    _TIMINGS["model (warm process or load)"] = time.perf_counter() - started
    if timings:
        started = time.perf_counter()
        memory.recall("where does the time go", k=10)
        _TIMINGS["sample search"] = time.perf_counter() - started
    info = {**memory.status().to_json(), "exists": memory.exists}
    if memory.exists and (info.get("usage") or {}).get("citations"):
        top = memory.most_cited(3)
        use = memory.usage_of(top)
        info["most_cited"] = [{"id": m.id, "text": cairn.render.shorten(m.text or "", 80), **use.get(m.id, {})}
                              for m in (memory.get(i) for i in top) if m.text is not None]
    if memory.exists:
        from .claude_loaded import already_loaded

        # What the hooks leave out because Claude Code loads it itself (CLAUDE.md, rules, MEMORY.md).
        info["already_loaded"] = len(already_loaded(memory, Path(memory.choice.project_root or Path.cwd())))
    if timings:
        info["timings_ms"] = {name: round(1000 * s, 1) for name, s in _TIMINGS.items()}

    def human() -> None:
        c = info["counts"]
        if not info["exists"]:
            click.echo(f"store     {info['store']} does not exist yet ({info['path']}); "
                       "it is created by the first write")
        else:
            click.echo(f"store     {info['store']}  ({info['path']})")
        click.echo(f"chosen by {info['chosen_by']}")
        click.echo(f"memories  {c['current']} current, {c['cold']} cold, {c['superseded']} superseded, "
                   f"{c['forgotten']} forgotten"
                   + (f", {c['awaiting_embedding']} awaiting embedding" if c["awaiting_embedding"] else ""))
        click.echo(f"size      {info['bytes']:,} bytes")
        click.echo(f"vectors   {info['vector_backend'] or 'unavailable'}; model {info['embedding_model'] or 'none'}")
        stored = info["store_embedding_model"]
        if stored and info["embedding_model"] and stored != info["embedding_model"]:
            # status opens such a store anyway (check_model off) to say so, not to fail on it
            click.echo(f"MISMATCH  the store's vectors come from {stored}: writes and vector recall are "
                       f"refused until `cairn reembed` re-embeds it with {info['embedding_model']}")
        ses = info.get("sessions") or {}
        if ses.get("sessions"):
            click.echo(f"sessions  {ses['sessions']} captured, {_count(ses['turns'], 'turn')}"
                       + (f"; secrets redacted {sum(ses['redactions'].values())} "
                          f"({', '.join(f'{k} {v}' for k, v in sorted(ses['redactions'].items()))})"
                          if ses["redactions"] else "")
                       + (f"; {_count(ses['private_spans'], 'private span')} removed" if ses["private_spans"] else "")
                       + (f"; lines skipped {sum(ses['skipped'].values())}" if ses["skipped"] else ""))
        use = info.get("usage") or {}
        if use.get("injections"):
            click.echo(f"usage     {_count(use['injected_memories'], 'memory', 'memories')} injected "
                       f"{_count(use['injections'], 'time')}; {use['cited_memories']} cited by Claude, "
                       f"{_count(use['citations'], 'citation')} (reset with `cairn reset-usage`)")
            for row in info.get("most_cited") or []:
                click.echo(f"          {row['id']} {cairn.render.usage(row)}: {row['text']}")
        if info.get("already_loaded"):
            click.echo(f"skipped   {info['already_loaded']} memories are not injected: Claude Code already loads "
                       "them (CLAUDE.md, .claude/rules, its MEMORY.md)")
        if info["keyword_only"]:
            click.echo(f"recall is KEYWORD-ONLY: {info['keyword_only_reason'] or 'no embedding model'}")
        for name, ms in info.get("timings_ms", {}).items():
            click.echo(f"time      {name:<30} {ms:8.1f} ms")

    _emit(as_json, info, human)


@cli.command(name="export")
@click.argument("output", default="-")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "claude-memory"]), default="jsonl", show_default=True,
              help="jsonl: every memory, tombstones included, for `cairn import`. claude-memory: the current "
                   "memories as Claude Code auto-memory files and a MEMORY.md index, into the folder OUTPUT.")
@click.option("--into-claude-memory", "into_live", is_flag=True,
              help="With --format claude-memory: write into this project's live auto-memory folder "
                   "(never done otherwise; existing files are kept).")
@store_options(read_only=True)
def export_(memory: Cairn, as_json: bool, output: str, fmt: str, into_live: bool) -> None:
    """Write every memory (tombstones included) as JSON Lines to OUTPUT (default stdout), or with
    --format claude-memory the current memories as Claude Code memory files into the folder OUTPUT
    (see docs/claude-memory.md)."""
    if fmt == "claude-memory":
        from .claude_memory import export, native_memory

        native = native_memory(Path.cwd())
        if into_live:
            folder = native.folder
        elif output == "-":
            raise click.UsageError("--format claude-memory needs a folder: cairn export --format claude-memory DIR")
        else:
            folder = Path(output).expanduser()
            if folder.resolve() == native.folder.resolve():
                raise click.UsageError(f"{folder} is this project's live Claude Code memory folder; "
                                       "add --into-claude-memory to write into it")
        if folder.exists() and not folder.is_dir():
            raise click.UsageError(f"{folder} is not a folder")
        memories = memory.list(limit=1_000_000, scope="project", order=cairn.Order.IMPORTANCE)
        if into_live:  # what came from that folder is there already
            state = memory.source_state("claude-memory")
            files = state.get("files", {}) if state.get("folder") == str(folder) else {}
            came = {e.get("id") for e in files.values()}
            memories = [m for m in memories if m.id not in came]
        done = export(memories, folder, live=into_live)
        _emit(as_json, done, lambda: click.echo(
            f"exported {_count(done['files'], 'memory', 'memories')} to {done['folder']} "
            f"({done['indexed']} in MEMORY.md"
            + (f", {done['not_indexed']} past its cap" if done["not_indexed"] else "") + ")"))
        return
    if into_live:
        raise click.UsageError("--into-claude-memory goes with --format claude-memory")
    with click.open_file(output, "w", encoding="utf-8") as out:
        count = memory.export(out)
    click.echo(json.dumps({"exported": count}) if as_json else f"exported {_count(count, 'memory', 'memories')}",
               err=output == "-")


@cli.command(name="import-claude-memory")
@store_options
def import_claude_memory(memory: Cairn, as_json: bool) -> None:
    """Import this project's Claude Code auto-memory folder (wherever its settings put it): one
    memory per file; an edited file replaces its memory (history kept), a deleted file retires it.
    Incremental: only what changed since the last run is read. A session start runs it in the
    background when claude_memory.sync is on. Files that cannot be imported are listed with why."""
    from .claude_memory import native_memory
    from .claude_memory_sync import sync, sync_lock

    native = native_memory(Path.cwd())
    with sync_lock(memory, wait=True):
        done = sync(memory, native)

    def human() -> None:
        click.echo(f"{native.folder}: {done['created']} imported, {done['superseded']} updated, "
                   f"{done['retired']} retired, {done['unchanged']} unchanged, {done['duplicates']} already "
                   f"remembered, {len(done['failed'])} not importable")
        for name, reason in sorted(done["failed"].items()):
            click.echo(f"  {name}: {reason}")

    _emit(as_json, done, human)


@cli.command(name="import")
@click.argument("source", type=click.File("rb"))
@store_options
def import_(memory: Cairn, as_json: bool, source) -> None:
    """Read JSON Lines written by `cairn export`; all or nothing."""
    counts = memory.import_(source, progress=_progress)
    _emit(as_json, counts, lambda: click.echo(f"imported {counts['imported']}, skipped {counts['skipped']} existing"))


@cli.command()
@store_options(check_model=False)
def reembed(memory: Cairn, as_json: bool) -> None:
    """Re-embed every memory with the configured model (after changing models)."""
    count = memory.reembed(progress=_progress)
    _emit(as_json, {"reembedded": count, "model": memory.embedder.model_name},
          lambda: click.echo(f"re-embedded {_count(count, 'memory', 'memories')} with {memory.embedder.model_name}"))


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
@click.pass_context
def stores(ctx: click.Context, as_json: bool) -> None:
    """List stores (`*` marks this folder's); `stores create NAME` makes a named store."""
    if ctx.invoked_subcommand:
        return
    rows = cairn.list_stores()
    current = cairn.resolve().choice.name

    def human() -> None:
        click.echo(f"data root {cairn.data_root()}")
        for r in rows:
            mark = "*" if r["name"] == current else " "
            detail = r.get("error") or f"{r['current']} current  {r.get('project_root') or ''}"
            click.echo(f"{mark} {r['name']:<40} {detail}")

    _emit(as_json, {"data_root": str(cairn.data_root()), "current": current, "stores": rows}, human)


@stores.command(name="delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def stores_delete(name: str, yes: bool, as_json: bool) -> None:
    """Delete the store NAME and every memory in it (its .db, -wal and -shm files). Asks first on a
    terminal; without one, --yes is required."""
    rows = {r["name"]: r for r in cairn.list_stores()}
    if name not in rows:
        raise cairn.InvalidInput(f"store {name!r} does not exist (see `cairn stores`)")
    if not yes:
        if not _interactive():
            raise cairn.InvalidInput(f"deleting store {name!r} needs confirmation: pass --yes")
        current = rows[name].get("current")
        what = f"{_count(current, 'current memory', 'current memories')}" if current is not None else "its memories"
        click.confirm(f"Delete store {name!r} and {what}? This cannot be undone", abort=True, err=True)
    path = cairn.delete_store(name)
    _emit(as_json, {"name": name, "path": str(path), "deleted": True},
          lambda: click.echo(f"deleted store {name} ({path})"))


@stores.command(name="rename")
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def stores_rename(old: str, new: str, as_json: bool) -> None:
    """Rename the store OLD to NEW (its files and its recorded name); refuses when NEW exists. A store
    on Postgres is shared: only this machine's name for it changes (the team's other machines keep
    theirs), and no server is contacted."""
    root = next((s.get("project_root") for s in cairn.list_stores() if s["name"] == old), None)
    path = cairn.rename_store(old, new)

    def human() -> None:
        click.echo(f"renamed store {old} to {new} ({path})")
        if root:  # a project finds its store by the folder's name: this one no longer will
            click.echo(f"note: {root} will no longer find it by its folder; set CAIRN_STORE={new} there "
                       f"(a direnv .envrc), or rename it back to {old}", err=True)

    _emit(as_json, {"old": old, "name": new, "path": str(path), "project_root": root}, human)


@stores.command(name="create")
@click.argument("name")
@click.option("--postgres", "postgres_url", metavar="URL", help="Create it on this PostgreSQL server (a team "
              "store); later commands find the server in $CAIRN_POSTGRES_URL or store.postgres_url. The URL is "
              "never stored: keep the password in PGPASSWORD or ~/.pgpass.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def stores_create(name: str, postgres_url: str | None, as_json: bool) -> None:
    """Create the named store NAME (for CAIRN_STORE / --store), in the data root or on Postgres."""
    path, created = cairn.create_store(name, postgres=postgres_url)
    _emit(as_json, {"name": name, "path": str(path), "created": created},
          lambda: click.echo(f"{'created' if created else 'already exists:'} store {name} ({path})"))


@cli.command(name="migrate-store")
@click.argument("source")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def migrate_store(source: str, target: str, as_json: bool) -> None:
    """Copy store SOURCE into the new store TARGET across backends, history and vectors included.

    Each is NAME, sqlite:NAME or postgres:NAME (the server from $CAIRN_POSTGRES_URL or
    store.postgres_url). A Postgres TARGET becomes where NAME opens from then on; SOURCE is left as
    it was. The review queue and captured sessions are copied too (the turns' vectors are
    recomputed)."""
    done = cairn.migrate_store(source, target, progress=_progress)
    _emit(as_json, done, lambda: click.echo(
        f"copied {_count(done['memories'], 'memory', 'memories')} ({done['vectors']} vectors, "
        f"{done['dismissals']} review verdicts, "
        f"{done['proposals']} review proposals) and {done['sessions']} sessions ({done['turns']} turns) "
        f"from {source} to {target} ({done['path']})"))


@cli.command()
@click.option("--store", "store_name", metavar="NAME", help="Store to back up (default: $CAIRN_STORE, else this "
              "project's).")
@click.option("--all", "all_stores", is_flag=True, help="Back up every store in the data root.")
@click.option("--keep", type=click.IntRange(1), metavar="N", help="Then keep only the N newest backups of each.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def backup(store_name: str | None, all_stores: bool, keep: int | None, as_json: bool) -> None:
    """Copy a store into <data root>/backups/NAME-<UTC time>.db, consistent while sessions write
    (SQLite's online backup API). A store on Postgres is copied into such a file too (one consistent
    snapshot, no pg_dump), restorable as a local store. A backup keeps memories forgotten after it
    was made."""
    if all_stores and store_name:
        raise cairn.InvalidInput("--store and --all exclude each other")
    if all_stores:
        names = [r["name"] for r in cairn.list_stores() if "error" not in r]
    else:
        names = [cairn.resolve(store_name).choice.name]
    done = [cairn.backup_store(name, keep=keep) for name in names]

    def human() -> None:
        if not done:
            click.echo("no stores to back up")
        for b in done:
            click.echo(f"backed up {b['store']} ({_count(b['counts']['total'], 'memory', 'memories')}, "
                       f"{b['bytes']:,} bytes) to {b['path']}")
            for old in b["removed"]:
                click.echo(f"  removed old backup {old}")

    _emit(as_json, {"backups": done}, human)


@cli.command()
@click.argument("backup_file", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--store", "store_name", metavar="NAME", help="Store to restore into (default: the one the backup "
              "was made of).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
@click.option("--bring-back-forgotten", is_flag=True, help="Also restore memories forgotten after the backup was "
              "taken (by default they stay forgotten).")
def restore(backup_file: str, store_name: str | None, as_json: bool, bring_back_forgotten: bool) -> None:
    """Make a store hold exactly what the backup FILE holds, except what was forgotten since. Refuses a
    backup from a newer Cairn or one that fails its integrity check, and a store on Postgres (restore it
    under another name, then `migrate-store` it); the replaced store is kept in <data root>/backups/.
    Memories forgotten after the backup was taken stay forgotten (named in a warning) unless
    --bring-back-forgotten."""
    done = cairn.restore_store(backup_file, name=store_name, bring_back_forgotten=bring_back_forgotten)

    def human() -> None:
        c = done["counts"]
        click.echo(f"restored {done['store']} from {done['source']}: {c['current']} current, "
                   f"{c['superseded']} superseded, {c['forgotten']} forgotten")
        if done["replaced_kept_at"]:
            click.echo(f"the replaced store is kept at {done['replaced_kept_at']}")

    _emit(as_json, done, human)
    if done["forgotten"]:
        named = ", ".join(f"{m['id']} ({m['kind']}, forgotten {cairn.format_time(m['forgotten_at'])})"
                          for m in done["forgotten"])
        n = _count(len(done["forgotten"]), "memory", "memories")
        click.echo(f"cairn: warning: the backup holds {n} forgotten after it was taken: {named}; "
                   + ("brought back (--bring-back-forgotten)" if done["forgotten_brought_back"]
                      else "kept forgotten (pass --bring-back-forgotten to restore them)"), err=True)


def _warm_check() -> cairn.Check:
    if not warm.is_running():
        return cairn.Check("warm process", "ok", "not running (started on demand by the next hook or recall)")
    reply = warm.request({"op": "ping"}, timeout=5)
    if reply is not None:
        return cairn.Check("warm process", "ok", f"pid {reply.get('pid')}, model {reply.get('model')}")
    if not warm.socket_path().exists():
        return cairn.Check("warm process", "ok", "starting (loading its model)")
    return cairn.Check("warm process", "warn", f"running but not answering on {warm.socket_path()}",
                       f"stop it; it is restarted on demand (see {cairn.data_root() / 'logs' / 'service.log'})")


def _config_check() -> tuple[Any, dict[str, Any] | None]:
    """The settings this directory's project uses (user config, then its .cairn.yaml), as a check,
    and those settings (None when they do not load): a bad file turns memory off in the hooks."""
    try:
        resolved = cairn.resolve(None)
    except cairn.ConfigError as exc:
        return cairn.Check("config", "fail", str(exc), "fix that key; until then the hooks recall nothing here"), None
    except cairn.CairnError:  # e.g. CAIRN_STORE names no store: the store checks say so
        return cairn.Check("config", "ok", "settings load"), None
    return cairn.Check("config", "ok", f"settings for store {resolved.choice.name} load"), resolved.config


def _auto_memory_check(config: dict[str, Any] | None) -> cairn.Check:
    from .claude_memory_sync import doctor_check

    try:
        with cairn.Cairn.open(read_only=True, embedder=None, check_model=False) as memory:
            return doctor_check(memory, Path.cwd(), config)
    except cairn.CairnError as exc:  # the store checks above say what is wrong with it
        return doctor_check(None, Path.cwd(), config) if isinstance(exc, cairn.StoreNotFound) else cairn.Check(
            "Claude Code auto memory", "warn", f"sync state unknown: {exc}")


@cli.command()
@click.option("--fix", is_flag=True, help="Repair what can be: indexes, file modes, pending migrations.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def doctor(fix: bool, as_json: bool) -> None:
    """Check the installation and every store. The checks: this directory's settings (user config and the
    project's .cairn.yaml), versions, sqlite-vec, the model those settings name and each store's
    fingerprint, schema, integrity, index consistency (a store on Postgres: the server reachable,
    pgvector, schema version, index consistency and validity), warm process, file modes, and whether
    Claude Code runs Cairn's hooks in this project, and whether a hook ran for an event Cairn does
    not answer. Loads the model (a few seconds). Exit 1 when a check fails (and --fix did not repair
    it)."""
    from .claude import hook_events_check, hooks_check, settings_project

    config_check, config = _config_check()
    try:
        engine_checks = cairn.doctor(fix=fix, config=config)
    except cairn.ConfigError:  # the user-level file is broken: the config check names it
        engine_checks = []
    checks = [config_check, *engine_checks, _warm_check(), hooks_check(settings_project(Path.cwd())),
              _auto_memory_check(config), hook_events_check(cairn.data_root() / "logs" / "hooks.log")]
    failed = [c for c in checks if c.status == "fail" and not c.fixed]

    def human() -> None:
        for c in checks:
            click.echo(f"{c.status.upper():<4}  {c.name}: {c.detail}" + ("  [fixed]" if c.fixed else ""))
            if c.fix and c.status != "ok" and not c.fixed:
                click.echo(f"      fix: {c.fix}")
        click.echo(f"{len(failed)} failed" if failed else "all checks passed" if not any(
            c.status == "warn" for c in checks) else "no check failed (see the warnings)")

    _emit(as_json, {"ok": not failed, "checks": [c.to_json() for c in checks]}, human)
    if failed:
        sys.exit(1)


@cli.group()
def review() -> None:
    """The review queue: what maintenance, possible conflicts and import-guidance propose, and your
    verdict on each (as /cairn:review-memory). Nothing a proposal names changes before you approve it;
    unreviewed proposals expire after 30 days."""


def _proposal_line(p: dict[str, Any]) -> str:
    texts = p["payload"].get("texts") or ([p["payload"]["text"]] if "text" in p["payload"] else [])
    sim = p["payload"].get("similarity")
    head = f"{p['id']}  {p['type']}" + (f" (similarity {sim})" if sim is not None else "") + (
        f" [{p['state']}]" if p["state"] != "pending" else "")
    body = "".join(f"\n    {'- ' if len(texts) > 1 else ''}{cairn.render.shorten(t or '[forgotten]', 150)}"
                   for t in texts[:6])
    more = f"\n    ... and {len(texts) - 6} more" if len(texts) > 6 else ""
    return head + body + more


@review.command(name="list")
@click.option("--state", "states", multiple=True, type=click.Choice(PROPOSAL_STATES),
              help="Only proposals in this state (may repeat; default: pending).")
@click.option("--type", "types", multiple=True, type=click.Choice(PROPOSAL_TYPES), help="Only this type (may repeat).")
@click.option("--limit", type=click.IntRange(1), default=100, show_default=True)
@store_options(read_only=True)
def review_list(memory: Cairn, as_json: bool, states, types, limit: int) -> None:
    """The queue, grouped by subject (oldest first within each). Expired proposals are closed first."""
    items = [p.to_json() for p in memory.review_queue(states=states or ("pending",), types=types, limit=limit)]
    queue = memory.maintenance_status()["queue"]  # {state: {type: count}}
    total = sum(n for state, by_type in queue.items() if state in (states or ("pending",))
                for kind, n in by_type.items() if not types or kind in types)
    total = max(total, len(items))

    def human() -> None:
        if not items:
            click.echo("the review queue is empty" if not states else "no proposals match")
            return
        groups: dict[str, list[dict[str, Any]]] = {}
        for p in items:
            groups.setdefault(p["subject"] or "(no subject)", []).append(p)
        for subject, group in groups.items():
            click.echo(f"== {subject}")
            for p in group:
                click.echo(_proposal_line(p))
        if total > len(items):
            click.echo(f"... and {total - len(items)} more (--limit N shows more, --type one type)")
        click.echo("see one with: cairn review show ID; decide with: cairn review decide ID approve|reject|edit")

    _emit(as_json, {"proposals": items, "count": len(items), "total": total}, human)


@review.command(name="show")
@click.argument("proposal_id")
@store_options(read_only=True)
def review_show(memory: Cairn, as_json: bool, proposal_id: str) -> None:
    """One proposal with its evidence: each source memory as it is now, and what each verdict would do."""
    shown = memory.review_show(proposal_id)

    def human() -> None:
        p = shown["proposal"]
        click.echo(_proposal_line(p))
        for key in ("reason", "context", "origin"):
            if p["payload"].get(key):
                click.echo(f"  {key}: {p['payload'][key]}")
        for source in shown["sources"]:
            if source.get("missing"):
                click.echo(f"  {source['id']}: no longer exists")
            else:
                fields = {k: v for k, v in source.items() if k in cairn.Memory.__dataclass_fields__}
                click.echo("  " + cairn.render.line(cairn.Memory(**{**fields, "tags": tuple(fields["tags"])})))
        if shown["stale"]:
            click.echo(f"  stale: {shown['stale']}")
        click.echo(f"  {shown['after']}")

    _emit(as_json, shown, human)


@review.command(name="decide")
@click.argument("proposal_id")
@click.argument("verdict", type=click.Choice(("approve", "reject", "edit", "keep")), metavar="approve|reject|edit")
@click.option("--text", help="edit: the statement to store instead (a merge, a summary, an edited addition).")
@click.option("--keep-id", metavar="ID", help="approve: which of the proposal's memories stays (the others retire).")
@click.option("--tags", "tags", multiple=True, callback=_split_tags,
              help="approve or edit: the tags the memory that stays keeps (comma-separated; may repeat; "
                   "--tags '' keeps none).")
@click.option("--keyword-only", is_flag=True, help="Do not load the embedding model (embedded later).")
@store_options
def review_decide_(memory: Cairn, as_json: bool, proposal_id: str, verdict: str, text: str | None,
                   keep_id: str | None, tags: tuple[str, ...]) -> None:
    """Apply your VERDICT on PROPOSAL_ID: approve (--keep-id: which memory stays; --tags: its tags),
    reject (nothing changes), or edit (your --text replaces them). Refused, changing nothing, when the
    proposal was decided already, expired, or its memories changed since ("stale", with what replaced
    them)."""
    chosen = tags if tags or _tags_given() else None
    done = memory.review_decide(proposal_id, verdict, text=text, keep_id=keep_id, tags=chosen, by="cli")

    def human() -> None:
        if done["state"] == "rejected":
            click.echo(f"rejected proposal {proposal_id}: nothing changed")
        elif "demoted" in done:
            click.echo(f"moved {done['demoted']} to the cold tier (bring it back with `cairn review promote`)")
        elif "created" in done and "by" not in done:
            click.echo(f"remembered {done['created']}" if done["status"] == "created"
                       else f"already remembered as {done['created']}")
        else:
            click.echo(f"{done['by']} stays; retired {', '.join(done['superseded']) or 'nothing'}")

    _emit(as_json, done, human)


def _tags_given() -> bool:
    """Whether --tags was on the command line (`--tags ''` chooses no tags at all)."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source("tags") == click.core.ParameterSource.COMMANDLINE


@review.command(name="promote")
@click.argument("memory_id")
@store_options
def review_promote(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """Bring MEMORY_ID back from the cold tier into hooks and default recall."""
    done = memory.promote(memory_id)
    _emit(as_json, done, lambda: click.echo(f"promoted {memory_id}"))


def _maintain_human(report: dict[str, Any]) -> None:
    head = "dry run, nothing written" if report["dry_run"] else "applied"
    click.echo(f"store {report['store']}: {_count(report['scanned'], 'memory', 'memories')} scanned ({head}"
               + ("; keyword-only" if report["keyword_only"] else "") + f", {report['seconds']} s)")
    for group in report["exact_duplicates"]:
        verb = "retire" if report["dry_run"] else "retired"
        click.echo(f"  {verb} {', '.join(group['duplicates'])}: exact duplicate of {group['canonical']}: "
                   f"{cairn.render.shorten(group['text'] or '', 100)}")
    counts = ", ".join(f"{n} {kind}" for kind, n in report["counts"].items() if n)
    if counts:
        verb = "would propose" if report["dry_run"] else f"queued {report['staged']} for review"
        click.echo(f"  {verb}: {counts}")
    if not report["exact_duplicates"] and not counts:
        click.echo("  nothing new found")
    if report.get("pending"):
        click.echo(f"  {report['pending']} proposals wait for your verdict: `cairn review list` or "
                   "/cairn:review-memory")


@cli.command()
@click.option("--apply", "apply_", is_flag=True,
              help="Retire exact duplicates and stage the rest as proposals (default: a dry run that writes nothing).")
@click.option("--safe-only", is_flag=True, help="With --apply: only retire exact duplicates; stage nothing.")
@click.option("--status", "show_status", is_flag=True, help="Show the last run, the lease and the queue; run nothing.")
@click.option("--store", "store_name", metavar="NAME", help="Store to maintain (default: $CAIRN_STORE, else this "
              "project's).")
@click.option("--all", "all_stores", is_flag=True, help="Every store under the data root.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def maintain(apply_: bool, safe_only: bool, show_status: bool, store_name: str | None, all_stores: bool,
             as_json: bool) -> None:
    """Find exact duplicates, near-duplicates, clusters on one subject and stale never-used memories.

    A dry run by default. --apply retires exact duplicates (case, whitespace and punctuation
    normalised; the oldest stays; superseded, never deleted) and stages the judgement calls in the
    review queue. A lease keeps two runs off one store. Uses the stored vectors (no model load).
    Nightly, from cron: `17 3 * * * cairn maintain --all --apply --json >> ~/cairn-maintain.log 2>&1`."""
    if all_stores and store_name:
        raise cairn.InvalidInput("--store and --all exclude each other")
    if safe_only and not apply_:
        raise cairn.InvalidInput("--safe-only goes with --apply")
    # --all: SQLite and Postgres stores alike (a team store's lease keeps two machines' runs apart);
    # a store that cannot be opened (no server URL) is left out.
    names = [row["name"] for row in cairn.list_stores() if "error" not in row] if all_stores else [store_name]
    reports = []
    for name in names:
        resolved = cairn.resolve(name)
        with cairn.Cairn.open(resolved=resolved, embedder=None, read_only=not apply_) as memory:
            if show_status:
                reports.append(memory.maintenance_status())
            else:
                reports.append(memory.maintain(apply=apply_, safe_only=safe_only))

    def human() -> None:
        for report in reports:
            if show_status:
                last = report["last_run"]
                click.echo(f"store {report['store']}: last run "
                           + (f"{cairn.format_time(last['at'])} (retired {last['retired']}, staged {last['staged']})"
                              if last else "never")
                           + f"; {report['pending']} pending proposals; {report['cold']} cold memories"
                           + ("; a run is due" if report["stale"] else ""))
            else:
                _maintain_human(report)

    _emit(as_json, {"stores": reports} if all_stores else reports[0], human)


@cli.command(name="import-guidance")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@store_options
def import_guidance(memory: Cairn, as_json: bool, file: str) -> None:
    """Split FILE (a CLAUDE.md, AGENTS.md or .cursorrules) into proposed memories, by its headings,
    bullets and paragraphs, and queue them for review: nothing is stored before you approve each one
    (`cairn review list`, /cairn:review-memory). /cairn:import-guidance lets Claude do the split."""
    done = memory.import_guidance(file)

    def human() -> None:
        click.echo(f"{done['items']} items in {done['file']}: {done['queued']} queued for review, "
                   f"{done['pending']} already queued, {done['exists']} already remembered"
                   + (f", {done['reviewed']} decided by you before" if done.get("reviewed") else "")
                   + (f", {len(done['skipped'])} skipped" if done["skipped"] else ""))
        if done.get("left_out"):
            click.echo("left out (not statements): "
                       + ", ".join(f"{n} {kind}" for kind, n in sorted(done["left_out"].items())))
        for skipped in done["skipped"]:
            click.echo(f"  line {skipped['line']}: {skipped['reason']}")
        if done["queued"]:
            click.echo("review them with `cairn review list` or /cairn:review-memory")

    _emit(as_json, done, human)


@cli.group()
def sessions() -> None:
    """Captured conversations (Stop and PreCompact hooks, `import-sessions`): search, list, read."""


def _short(text: str, width: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _turn_line(turn: cairn.Turn, mark: str = "") -> str:
    when = cairn.format_time(turn.at) or "-"
    who = turn.speaker or turn.role
    return f"{mark}[{turn.session_id} #{turn.position} {who} {when[:16].replace('T', ' ')}] {_short(turn.text)}"


@sessions.command(name="search")
@click.argument("query")
@click.option("--mode", type=click.Choice(SESSION_MODES), default="auto", show_default=True,
              help="auto: exact for a quoted string or an identifier-like token, else hybrid.")
@click.option("-k", "k", type=click.IntRange(1, 1000), help="How many turns at most (default: config sessions.k, 10).")
@click.option("--window", type=click.IntRange(0, 50),
              help="Turns before and after each hit (default: config sessions.window, 2).")
@click.option("--since", type=TIME, help="Only turns from this time on.")
@click.option("--until", type=TIME, help="Only turns before this time.")
@store_options(read_only=True, use_warm=True)
def sessions_search(memory: Cairn, as_json: bool, query: str, **options) -> None:
    """Captured turns for QUERY, one result per session, best first: its best turns (marked >) with
    the turns around them, turns far less relevant than the best dropped."""
    results = cairn.merge_session_hits(memory.search_sessions(query, **options))

    def human() -> None:
        if not results:
            click.echo("no captured turns match")
        for n, result in enumerate(results, 1):
            click.echo(f"{n}. session {result.session_id} ({result.mode}, score {result.score:.4f})")
            last = None
            for turn in result.turns:
                if last is not None and turn.position > last + 1:
                    click.echo("     …")
                mark = "  >  " if turn.position in result.best else "     "
                when = (cairn.format_time(turn.at) or "-")[:16].replace("T", " ")
                click.echo(f"{mark}#{turn.position} {turn.speaker or turn.role} {when}  {_short(turn.text)}")
                last = turn.position

    _emit(as_json, [r.to_json() for r in results], human)


@sessions.command(name="list")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True)
@click.option("--since", type=TIME, help="Only sessions active from this time on.")
@click.option("--until", type=TIME, help="Only sessions started before this time.")
@store_options(read_only=True)
def sessions_list(memory: Cairn, as_json: bool, **options) -> None:
    """Captured sessions, most recently active first."""
    rows = memory.list_sessions(**options)

    def human() -> None:
        if not rows:
            click.echo("no captured sessions")
        for info in rows:
            when = (cairn.format_time(info.started_at) or "-")[:16].replace("T", " ")
            click.echo(f"{info.session_id}  {when}  {info.turn_count:>4} turns  {info.git_branch or '-'}  "
                       f"{_short(info.title or '', 80)}")

    _emit(as_json, [r.to_json() for r in rows], human)


@sessions.command(name="show")
@click.argument("session_id")
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True, help="First turn position.")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True, help="How many turns.")
@store_options(read_only=True)
def sessions_show(memory: Cairn, as_json: bool, session_id: str, offset: int, limit: int) -> None:
    """SESSION_ID's turns in order, paged (--offset, --limit)."""
    info, turns = memory.read_session(session_id, offset=offset, limit=limit)

    def human() -> None:
        click.echo(f"session {info.session_id}: {info.turn_count} turns, branch {info.git_branch or '-'}")
        for turn in turns:
            click.echo(_turn_line(turn))

    _emit(as_json, {"session": info.to_json(), "turns": [t.to_json() for t in turns]}, human)


@cli.command(name="import-sessions")
@click.option("--all", "all_projects", is_flag=True,
              help="Every project's transcripts, each into its own project's store (by the cwd they record).")
@click.option("--root", type=click.Path(file_okay=False, path_type=str),
              help="Claude Code's projects folder (default: $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects).")
@click.option("--locomo", "locomo", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Instead: import LoCoMo conversation JSON files (for the benchmark).")
@store_options
def import_sessions(memory: Cairn, as_json: bool, all_projects: bool, root: str | None, locomo) -> None:
    """Capture existing Claude Code transcripts of this project (or --all). Resumable: each transcript
    continues where an earlier capture or import stopped; running it twice adds nothing."""
    from .claude import import_claude_transcripts

    if locomo:
        totals: dict[str, Any] = {"sessions": 0, "turns_added": 0}
        for path in locomo:
            done = memory.import_locomo(path)
            totals = {k: totals[k] + done[k] for k in totals}
    else:
        totals = import_claude_transcripts(memory, root=root, all_projects=all_projects, progress=_progress)

    def human() -> None:
        def counted(by_kind: dict[str, int]) -> str:
            return f"{sum(by_kind.values())} ({', '.join(f'{k} {n}' for k, n in sorted(by_kind.items()))})"

        if "files" in totals:
            click.echo(f"read {totals['files']} transcripts: {totals['turns_added']} turns added"
                       + (f", lines skipped {counted(totals['skipped'])}" if totals["skipped"] else "")
                       + (f", secrets redacted {counted(totals['redactions'])}" if totals["redactions"] else "")
                       + (f", {totals['private_spans']} private spans removed" if totals.get("private_spans") else ""))
        else:
            click.echo(f"imported {totals['sessions']} sessions, {totals['turns_added']} turns added")

    _emit(as_json, totals, human)


@cli.command()
@click.option("--transport", type=click.Choice(["stdio", "http", "mcp-http"]), default="stdio", show_default=True,
              help="stdio: MCP on stdin/stdout (what the plugin runs); http: the REST API and the console; "
                   "mcp-http: MCP over streamable HTTP at /mcp.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (http, mcp-http). Any address but loopback needs a token.")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="Port (http, mcp-http).")
@click.option("--store", "store_name", metavar="NAME",
              help="Store to serve (default: $CAIRN_STORE, else this project's). Over http a request may name "
                   "another with ?store=NAME.")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="Allow cross-origin requests from ORIGIN (e.g. http://localhost:3000); may repeat. None by default.")
@click.option("--max-body-bytes", type=click.IntRange(1024), default=1024 * 1024, show_default=True,
              help="Largest request body accepted (http, mcp-http).")
def serve(transport: str, host: str, port: int, store_name: str | None, cors_origins: tuple[str, ...],
          max_body_bytes: int) -> None:
    """Serve this store to any client: MCP over stdio or streamable HTTP, or REST JSON with the review
    console at http://HOST:PORT/ (docs/http.md). Runs until stopped (Ctrl-C, SIGTERM, or stdin EOF on stdio)."""
    if transport == "stdio":
        from .mcp.server import main as serve_stdio

        serve_stdio(store=store_name)
        return
    from . import http
    from .tokens import TokenFile

    tokens = TokenFile()
    try:
        http.check_bind(host, tokens)
        sock = http.bind(host, port)
    except http.RefusedToStart as exc:
        raise cairn.InvalidInput(str(exc)) from None
    policy = http.Policy(bind_host=host, tokens=tokens, max_body_bytes=max_body_bytes, cors_origins=cors_origins)
    if transport == "mcp-http":
        from .mcp.server import READ_ONLY_TOOLS, http_app

        app, session = http_app(store_name, max_body_bytes=max_body_bytes)
        policy.mcp_store = session.name
        policy.read_only_tools = READ_ONLY_TOOLS
        where, stores = f"http://{_url_host(host)}:{port}/mcp", None
    else:
        stores = http.Stores(Path.cwd(), store_name)
        stores.default.start_warmup()
        app = http.rest_app(stores)
        where = f"http://{_url_host(host)}:{port}/"
    name = policy.mcp_store or (stores.default.name if stores else "")
    click.echo(f"cairn: serving store {name} over {transport} at {where}"
               + (" (tokens required)" if tokens.tokens() or not http.is_loopback(host) else ""), err=True)
    try:
        http.run(http.guarded(app, policy), sock)
    finally:
        if stores is not None:
            stores.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@cli.group()
def token() -> None:
    """Access tokens for `cairn serve` over HTTP (stored hashed in the data root, shown once)."""


@token.command(name="create")
@click.argument("name")
@click.option("--store", "stores", multiple=True, metavar="NAME",
              help="Limit the token to this store (may repeat; `global` is the global store). Default: every store.")
@click.option("--read-only", is_flag=True, help="The token may only read.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def token_create(name: str, stores: tuple[str, ...], read_only: bool, as_json: bool) -> None:
    """Create a token called NAME and print it once: it cannot be shown again."""
    from . import tokens

    known = {s["name"] for s in cairn.list_stores()} | {cairn.GLOBAL_STORE}
    unknown = [s for s in stores if s not in known]
    if unknown:  # a typo would make a token that never works
        raise cairn.InvalidInput(f"no store named {', '.join(map(repr, unknown))}; the stores are: "
                                 f"{', '.join(sorted(known))} (create one with `cairn stores create NAME`)")
    secret, record = tokens.create(name, stores=stores, read_only=read_only)

    def human() -> None:
        click.echo(secret)
        limits = ", ".join([*(["read-only"] if read_only else []), *([f"stores {', '.join(stores)}"] if stores
                                                                       else [])]) or "every store, read and write"
        click.echo(f"token {record.name} ({record.id}): {limits}. Shown once: keep it now.", err=True)

    _emit(as_json, {"token": secret, **record.to_json()}, human)


@token.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def token_list(as_json: bool) -> None:
    """The tokens on file (names and limits; never the tokens themselves)."""
    from . import tokens

    rows = [t.to_json() for t in tokens.load()]

    def human() -> None:
        for r in rows:
            limits = ("read-only " if r["read_only"] else "") + (",".join(r["stores"]) or "all stores")
            click.echo(f"{r['id']}  {r['name']:<24} {limits:<30} created {r['created_at_iso']}")
        if not rows:
            click.echo("no tokens")

    _emit(as_json, {"tokens": rows}, human)


@token.command(name="revoke")
@click.argument("name_or_id")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see docs/cli.md).")
def token_revoke(name_or_id: str, as_json: bool) -> None:
    """Revoke the token with this name or id; a running server refuses it from its next request."""
    from . import tokens

    gone = tokens.revoke(name_or_id)
    _emit(as_json, {**gone.to_json(), "revoked": True}, lambda: click.echo(f"revoked token {gone.name} ({gone.id})"))


@cli.command(name="config")
@click.option("--client", type=click.Choice(["claude", "opencode", "cursor", "codex", "generic"]), required=True,
              help="The MCP client to register Cairn's server with.")
@click.option("--dry-run", is_flag=True, help="Print what would be written, and where; change nothing.")
@click.option("--store", "store_name", metavar="NAME", help="Serve this store (default: the client's project's).")
@click.option("--command", "command", metavar="PATH",
              help="How the client starts cairn (default: this cairn's absolute path).")
def config_(client: str, dry_run: bool, store_name: str | None, command: str | None) -> None:
    """Register Cairn's MCP server (stdio) with CLIENT: cursor and opencode get it merged into the
    project's config file, codex into ~/.codex/config.toml; claude and generic print the command or
    snippet to use. CAIRN_HOME (when not the default folder) and CAIRN_STORE go into its env, since
    a client started from a GUI does not see your shell's. With --dry-run, only print."""
    import shutil

    from .clients import apply, registration, server_env

    running = Path(sys.argv[0])
    command = command or shutil.which("cairn") or (str(running.absolute()) if running.name == "cairn" else "cairn")
    reg = registration(client, command=command, store=store_name, env=server_env(dict(os.environ)))
    if reg.target is None or dry_run:
        if reg.target is not None:
            click.echo(f"# would be merged into {reg.target}", err=True)
        click.echo(reg.snippet, nl=False)
        return
    done = apply(reg)
    click.echo(f"{done}: {reg.target} ({client} runs `{command} serve --transport stdio`)")


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("event")
@click.argument("args", nargs=-1)
def hook(event: str, args: tuple[str, ...]) -> None:
    """Run a Claude Code hook: EVENT is SessionStart, UserPromptSubmit, Stop or PreCompact (stdin: the hook's JSON),
    or `pause SESSION_ID [off]`. Fails open: exit 0 whatever happens; errors go to hooks.log."""
    from .hook import _log_to_file, hook_main

    try:
        _log_to_file(force=True)
    except Exception:  # noqa: BLE001 - no log file (an unwritable data root): the hook still runs, fails open
        pass
    hook_main([event, *args], hook_process=True)


_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.!?](?=\s|$)")


def _first_sentence(text: str) -> str:
    """The first sentence of a command's help, whole (click cuts its summary at 45 characters)."""
    flat = " ".join(inspect.cleandoc(text).split("\n\n")[0].split())
    end = _SENTENCE_END.search(flat)
    return flat[: end.end()] if end else flat


def _whole_summaries(group: click.Group) -> None:
    """Each command's summary in `--help` listings is its first sentence, not a cut-off one."""
    for command in group.commands.values():
        if command.help and not command.short_help:
            command.short_help = _first_sentence(command.help)
        if isinstance(command, click.Group):
            _whole_summaries(command)


_whole_summaries(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point: CairnError -> one line on stderr, exit 2."""
    _TIMINGS.clear()
    age = _since_process_start()
    if age is not None:
        _TIMINGS["interpreter and imports"] = age
    bad = _undecodable_argument(sys.argv[1:] if argv is None else argv)
    if bad is not None:
        click.echo(f"cairn: error: an argument is not valid UTF-8: {bad!r} (undecodable bytes shown as \ufffd)",
                   err=True)
        sys.exit(2)
    try:
        cli.main(args=argv, prog_name="cairn", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("cairn: aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        # One line, like every other error; usage errors point at the command's --help.
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        click.echo(f"cairn: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except cairn.CairnError as exc:
        click.echo(f"cairn: error: {exc}", err=True)
        sys.exit(2)
    except BrokenPipeError:
        sys.exit(0)
    except UnicodeError as exc:  # text from outside that no check above caught: still one line, no traceback
        click.echo(f"cairn: error: text that is not valid UTF-8 ({exc})", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
