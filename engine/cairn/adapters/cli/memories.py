"""Commands on one store's memories: remember, recall, list, show, history, edit, forget, reset-usage."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

import cairn
from cairn import DEFAULT_IMPORTANCE, MAX_APPLIES_WHEN
from cairn import operations as ops

from ._common import _WARM_VIEWS, _count, _emit, _read_stdin, argument, cli, option, store_options

if TYPE_CHECKING:
    from cairn import Cairn


@cli.command()
@click.argument("text")
@option(ops.REMEMBER.arg("kind"), default=None, show_default=False,
        help="Default: fact (with --replaces: the replaced memory's).")
@option(ops.REMEMBER.arg("tags"), "--tag", "--tags", commas=True,
        help="Comma-separated; may repeat (with --replaces, default: the replaced memory's).")
@option(ops.REMEMBER.arg("importance"), default=None, show_default=False,
        help=f"1 (trivia) to 5 (critical). Default: {DEFAULT_IMPORTANCE} (with --replaces: the replaced memory's).")
@option(ops.REMEMBER.arg("source"))
@option(ops.REMEMBER.arg("valid_from"))
@option(ops.REMEMBER.arg("valid_to"))
@option(ops.REMEMBER.arg("applies_when"), metavar="PHRASE",
        help="A task in which this memory matters, e.g. \"adding a lint rule\"; repeat for up to "
             f"{MAX_APPLIES_WHEN} (with --replaces, default: the replaced memory's).")
@option(ops.REMEMBER.arg("paths"), metavar="GLOB",
        help="A file, folder or glob relative to the project root that this memory governs (src/payments/, "
             "'**/*.tsx'), or a command (cmd:alembic); repeat for several. Claude gets the memory when it "
             "touches them. With --replaces, default: the replaced memory's.")
@click.option("--session", "session_id", metavar="ID", envvar="CLAUDE_CODE_SESSION_ID", show_envvar=True,
              help="The Claude Code session writing it: the memory also learns the files that session touched "
                   "(default: $CLAUDE_CODE_SESSION_ID, set inside Claude Code).")
@click.option("--replaces", metavar="ID", help="Supersede this memory (its id, or its first 6 or more characters).")
@option(ops.REMEMBER.arg("scope"))
@click.option("--no-detect", is_flag=True, help="Do not supersede similar memories automatically.")
@click.option("--no-ask", is_flag=True, help="Do not ask which related memory the new one replaces.")
@click.option("--keyword-only", is_flag=True, help="Do not load the embedding model (embedded later).")
@store_options(use_warm=True)
def remember(memory: Cairn, as_json: bool, text: str, tags: tuple[str, ...], applies_when: tuple[str, ...],
             paths: tuple[str, ...], no_detect: bool, no_ask: bool, scope: str, replaces: str | None,
             **fields: Any) -> None:
    """Store TEXT as a memory ("-" reads it from stdin).

    The answer lists up to 3 related memories (any kind, about the same subject). On a terminal it
    then asks which one, if any, the new memory replaces; not with --no-ask, --json, or when stdin is
    not a terminal."""
    if text == "-":
        text = _read_stdin()
        no_ask = True  # stdin held the text: there is no one to ask
    if replaces is not None:
        replaces = memory.full_id(replaces)
        # As Cairn.replace: kind, tags, importance and applies-when default to the replaced memory's.
        result = memory.replace(replaces, text, tags=tags or None, applies_when=applies_when or None, paths=paths,
                                **fields)
    else:
        draft = {k: v for k, v in fields.items() if v is not None}
        result = memory.remember_many([cairn.Draft(text=text, tags=tags, applies_when=applies_when, paths=paths,
                                                   **draft)],
                                      scope=scope, detect=False if no_detect else None)[0]

    def human() -> None:
        verb = "already remembered as" if result.status == "duplicate" else "remembered"
        asked = fields.get("kind")
        differs = result.status == "duplicate" and asked and asked != result.memory.kind
        click.echo(f"{verb} {result.memory.id}" + (f" (a {result.memory.kind}, not a {asked}: nothing was "
                                                    f"written; `cairn remember --replaces {result.memory.id} "
                                                    f"--kind {asked} ...` changes its kind)" if differs else ""))
        for r in result.redacted:
            where = f"at characters {r['start']}-{r['end']} of the {r['field'].replace('_', '-')}"
            if r["kind"] == cairn.PRIVATE_KIND:
                click.echo(f"left out a <private> span {where}: it is not stored")
            else:
                click.echo(f"redacted a secret ({r['kind']}) {where}: it is stored as [REDACTED:{r['kind']}]")
        for old in result.superseded:
            click.echo(f"superseded {old}")
        for n, r in enumerate(result.related, 1):
            click.echo(f"related {n}. {r['id']}  [{r['kind']}] {r['date']}\n    {r['text']}\n    ({r['why']})")
        if result.related and (no_ask or not sys.stdin.isatty()):
            click.echo("if it changes one of these: `cairn remember --replaces ID TEXT`")
        if result.queued:
            n = len(result.queued)
            click.echo(f"queued {n} proposal{'s' if n > 1 else ''} for review: `cairn review list`")

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
@argument(ops.RECALL.arg("query"))
@option(ops.RECALL.arg("k"), "-k")
@option(ops.RECALL.arg("kinds"), "--kind")
@option(ops.RECALL.arg("tags"), "--tag", "--tags", commas=True)
@option(ops.RECALL.arg("since"))
@option(ops.RECALL.arg("until"))
@option(ops.RECALL.arg("as_of"))
@option(ops.RECALL.arg("known_at"))
@option(ops.RECALL.arg("include_superseded"))
@option(ops.RECALL.arg("include_cold"))
@option(ops.RECALL.arg("scope"))
@click.option("--keyword-only", is_flag=True, help="BM25 only; do not load the embedding model.")
@store_options(read_only=True, use_warm=True)
def recall(memory: Cairn, as_json: bool, query: str, tags: tuple[str, ...], **options: Any) -> None:
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


_WARM_VIEWS["recall"] = _show_hits


@cli.command()
@click.argument("memory_id")
@store_options(read_only=True)
def history(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """The supersession chain through MEMORY_ID, oldest first, with valid and transaction times, and
    how each was used: injected by a hook, then cited by Claude as [mem:ID] (JSON key "usage")."""
    memory_id = memory.full_id(memory_id)
    chain = memory.history(memory_id)
    scopes = memory.scopes.of([m.id for m in chain])
    rows = [{**cairn.render.full(m), "usage": memory.usage(m.id), "scopes": scopes.get(m.id, [])} for m in chain]

    def human() -> None:
        for m, d in zip(chain, rows):
            click.echo(cairn.render.line(m))
            click.echo(f"    valid {d['valid_from_iso']} .. {d['valid_to_iso'] or 'open'}; "
                       f"recorded {d['recorded_at_iso']}, retired {d['retired_at_iso'] or '-'}"
                       + (f"; forgotten {d['forgotten_at_iso']} (its text is erased)"
                          if d.get("forgotten_at_iso") else ""))
            use = d["usage"]
            click.echo(f"    injected {_count(use['injected'], 'time')}, cited {_count(use['cited'], 'time')}"
                       + (f", last cited {cairn.format_time(use['last_cited_at'])}" if use["last_cited_at"] else ""))
            if d["scopes"]:
                click.echo(f"    scopes: {_scope_list(d['scopes'])}")

    _emit(as_json, rows, human)


def _scope_list(scopes: Sequence[Mapping[str, object]]) -> str:
    """`src/payments/** (given), src/billing/** (learned 0.80)`."""
    return ", ".join(f"{s['pattern']} ({s['origin']}" + (f" {s['weight']:.2f})" if s["origin"] == "learned" else ")")
                     for s in scopes)


@cli.command()
@click.argument("memory_id")
@store_options
def forget(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """Erase MEMORY_ID: its text, vector and index entries; a tombstone remains."""
    # Forget is idempotent: a tombstone from an earlier forget is given back unchanged, and said so.
    memory_id = memory.full_id(memory_id)
    done = "forgot" if memory.get(memory_id).forgotten_at is None else "already forgotten:"
    tomb = memory.forget(memory_id)
    _emit(as_json, cairn.render.full(tomb), lambda: click.echo(f"{done} {tomb.id}"))


@cli.command()
@click.argument("memory_id")
@store_options(read_only=True)
def show(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """One memory, whatever its status."""
    m = memory.get(memory.full_id(memory_id))
    scopes = memory.scopes.of([m.id]).get(m.id, ())

    def human() -> None:
        click.echo(cairn.render.line(m))
        if scopes:
            click.echo(f"    scopes: {_scope_list(scopes)}")

    _emit(as_json, {**cairn.render.full(m), "scopes": scopes}, human)


@cli.command()
@click.argument("memory_id", required=False)
@click.option("--set", "patterns", multiple=True, metavar="GLOB",
              help="Replace MEMORY_ID's given scopes by these (repeat; learned scopes stay).")
@click.option("--clear", is_flag=True, help="Remove MEMORY_ID's given scopes.")
@click.option("--reset-learned", is_flag=True,
              help="Forget the learned scopes of MEMORY_ID, or of every memory when no id is given.")
@store_options()
def scope(memory: Cairn, as_json: bool, memory_id: str | None, patterns: tuple[str, ...], clear: bool,
          reset_learned: bool) -> None:
    """Show or change the files, folders, globs and commands a memory governs (its scopes): given
    when it was written or imported, or learned from the files its session touched. The tool hooks
    bring a memory into Claude's context when its work touches them."""
    if (patterns or clear) and not memory_id:
        raise cairn.InvalidInput("--set and --clear need a MEMORY_ID")
    if patterns and clear:
        raise cairn.InvalidInput("use either --set or --clear")
    if memory_id:
        memory_id = memory.full_id(memory_id)
        memory.get(memory_id)  # MemoryNotFound for an unknown id, before anything is shown or reset
    if reset_learned:
        n = memory.scopes.reset([memory_id] if memory_id else None)
        _emit(as_json, {"reset": n}, lambda: click.echo(f"{_count(n, 'learned scope')} forgotten"))
        return
    if not memory_id:
        raise cairn.InvalidInput("name a MEMORY_ID, or use --reset-learned")
    if patterns or clear:
        memory.scopes.set(memory_id, patterns)
    scopes = memory.scopes.of([memory_id]).get(memory_id, ())
    _emit(as_json, {"id": memory_id, "scopes": scopes},
          lambda: click.echo(f"{memory_id}: {_scope_list(scopes) if scopes else 'no scopes'}"))


@cli.command(name="list")
@option(ops.LIST.arg("kinds"), "--kind")
@option(ops.LIST.arg("tags"), "--tag", "--tags", commas=True)
@option(ops.LIST.arg("as_of"))
@option(ops.LIST.arg("include_superseded"))
@option(ops.LIST.arg("include_cold"))
@option(ops.LIST.arg("scope"))
@option(ops.LIST.arg("limit"))
@store_options(read_only=True)
def list_(memory: Cairn, as_json: bool, tags: tuple[str, ...], **options: Any) -> None:
    """Memories, newest first."""
    items = memory.list(tags=tags, **options)
    use = memory.usage_of([m.id for m in items]) if items else {}

    limit = options.get("limit") or memory.config["list"]["limit"]

    def human() -> None:
        if not items:
            click.echo("no memories match")
        for m in items:
            click.echo(cairn.render.line(m))
            if m.id in use:
                click.echo(f"    {cairn.render.usage(use[m.id])}")
        if len(items) >= limit:  # there may be more: say so rather than stop silently
            click.echo(f"(the newest {limit}; --limit N for more)", err=True)

    _emit(as_json, [{**cairn.render.full(m), **({"usage": use[m.id]} if m.id in use else {})} for m in items], human)


@cli.command(name="reset-usage")
@click.argument("memory_ids", nargs=-1)
@store_options()
def reset_usage(memory: Cairn, as_json: bool, memory_ids: tuple[str, ...]) -> None:
    """Forget how often memories were injected and cited (all of the store's, or MEMORY_IDS): briefs and
    per-prompt recall stop favouring what Claude cited and stop demoting what it ignored."""
    n = memory.reset_usage([memory.full_id(i) for i in memory_ids] or None)
    _emit(as_json, {"reset": n}, lambda: click.echo(f"usage counts reset for {n} memor{'y' if n == 1 else 'ies'}"))


@cli.command()
@click.argument("memory_id")
@click.option("--keyword-only", is_flag=True, help="Do not load the embedding model (embedded later).")
@store_options(use_warm=True)
def edit(memory: Cairn, as_json: bool, memory_id: str) -> None:
    """Open $EDITOR on MEMORY_ID's text and save the result as its replacement (unchanged: nothing written)."""
    memory_id = memory.full_id(memory_id)
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
