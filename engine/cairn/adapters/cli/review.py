"""The review queue and maintenance: review list/show/decide/promote, maintain, import-guidance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

import cairn
from cairn import operations as ops

from ._common import _count, _emit, argument, cli, environ, option, store_options

if TYPE_CHECKING:
    from cairn import Cairn


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
    scope = p["payload"].get("paths")  # an `add` proposal's scope: the memory comes back for these files
    where = (f"\n    scope: {', '.join(scope)}" if scope else "") + (
        f" (from {p['payload']['origin']})" if scope and p["payload"].get("origin") else "")
    return head + body + more + where


@review.command(name="list")
@option(ops.REVIEW_QUEUE.arg("states"), "--state")
@option(ops.REVIEW_QUEUE.arg("types"), "--type")
@option(ops.REVIEW_QUEUE.arg("limit"))
@store_options(read_only=True)
def review_list(memory: Cairn, as_json: bool, states: tuple[str, ...], types: tuple[str, ...], limit: int) -> None:
    """The queue, grouped by subject (oldest first within each). Expired proposals are closed first."""
    items = [p.to_json() for p in memory.review.queue(states=states or ("pending",), types=types, limit=limit)]
    queue = memory.review.status()["queue"]  # {state: {type: count}}
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
    shown = memory.review.show(proposal_id)

    def human() -> None:
        p = shown["proposal"]
        click.echo(_proposal_line(p))
        for key in ("reason", "context", "origin", "applies_when"):
            value = p["payload"].get(key)
            if value:
                click.echo(f"  {key}: {', '.join(value) if isinstance(value, list) else value}")
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
@argument(ops.REVIEW_DECIDE.arg("proposal_id"))
@argument(ops.REVIEW_DECIDE.arg("verdict"), metavar="approve|reject|edit")
@option(ops.REVIEW_DECIDE.arg("text"))
@option(ops.REVIEW_DECIDE.arg("keep_id"), metavar="ID")
@option(ops.REVIEW_DECIDE.arg("tags"), "--tag", "--tags", commas=True,
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
    done = memory.review.decide(proposal_id, verdict, text=text, keep_id=keep_id, tags=chosen, by="cli")

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
    done = memory.review.promote(memory.full_id(memory_id))
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
        click.echo(f"  {_count(report['pending'], 'proposal waits', 'proposals wait')} for your verdict: "
                   "`cairn review list` or "
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
    names = ([row["name"] for row in cairn.list_stores(env=environ()) if "error" not in row] if all_stores
             else [store_name])
    reports = []
    for name in names:
        resolved = cairn.resolve(name, env=environ())
        with cairn.Cairn.open(resolved=resolved, embedder=None, read_only=not apply_) as memory:
            if show_status:
                reports.append(memory.review.status())
            else:
                reports.append(memory.review.maintain(apply=apply_, safe_only=safe_only))

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


def _counts_line(done: dict[str, Any]) -> str:
    verb = "would be queued (dry run, nothing written)" if done.get("dry_run") else "queued for review"
    return (f"{done['queued']} {verb}" + (f" ({done['scoped']} scoped)" if done.get("scoped") else "")
            + f", {done['pending']} already queued, {done['exists']} already remembered"
            + (f", {done['reviewed']} decided by you before" if done.get("reviewed") else "")
            + (f", {done['merged']} the same as another file's" if done.get("merged") else "")
            + (f", {len(done['skipped'])} skipped" if done["skipped"] else ""))


@cli.command(name="import-guidance")
@click.argument("path", required=False, type=click.Path(path_type=str))
@click.option("--dry-run", is_flag=True, help="Report the files, their scopes and what would be queued; queue nothing.")
@store_options
def import_guidance(memory: Cairn, as_json: bool, path: str | None, dry_run: bool) -> None:
    """Split guidance into proposed memories, by headings, bullets and paragraphs, and queue them for
    review: nothing is stored before you approve each one (`cairn review list`, /cairn:review-memory).

    PATH: one file (any name), a folder, or nothing for the whole project. A folder is searched for
    CLAUDE.md, AGENTS.md and GEMINI.md at any depth, .cursor/rules/*.mdc, .claude/rules/*.md,
    .github/copilot-instructions.md, .github/instructions/*.instructions.md, .windsurf/rules,
    .cursorrules, .windsurfrules and .clinerules (git ls-files in a repository, so ignored files are
    left out; node_modules, vendor, build output never). Each statement keeps its file's scope: a
    nested CLAUDE.md its folder, a rule its globs (paths, applyTo). CLAUDE.local.md is private: it
    is read only when named. /cairn:import-guidance lets Claude do the split."""
    done = memory.review.import_guidance(path, dry_run=dry_run)

    def human() -> None:
        if "file" in done:  # one file named
            f = done["files"][0]
            click.echo(f"{done['items']} items in {done['file']}"
                       + (f" (scope: {', '.join(f['paths'])})" if f["paths"] else "") + f": {_counts_line(done)}")
        else:
            click.echo(f"{_count(len(done['files']), 'guidance file')} under {done['root']}"
                       + (" (search cut short: import a folder at a time)" if done.get("cut_short") else "")
                       + f": {_count(done['items'], 'item')}; {_counts_line(done)}")
            width = min(48, max((len(f["file"]) for f in done["files"]), default=0))
            for f in done["files"]:
                scope = f"  [{', '.join(f['paths'])}]" if f["paths"] else ""
                if f.get("error"):
                    click.echo(f"  {f['file']:<{width}}  not read: {f['error']}")
                    continue
                click.echo(f"  {f['file']:<{width}}  {_count(f['items'], 'item')}, {f['queued']} "
                           + ("to queue" if done.get("dry_run") else "queued")
                           + (f", {f['pending'] + f['exists'] + f['reviewed'] + f['merged']} known" if
                              f["pending"] + f["exists"] + f["reviewed"] + f["merged"] else "") + scope)
            for private in done.get("private", []):
                click.echo(f"  {private}: private, not read (name it to import it)")
        notes = [(f["file"], n) for f in done["files"] for n in f["notes"]]
        for file, note in notes:
            click.echo(f"  {file}: {note}")
        if done.get("left_out"):
            click.echo("left out (not statements): "
                       + ", ".join(f"{n} {kind}" for kind, n in sorted(done["left_out"].items())))
        for skipped in done["skipped"]:
            where = "" if "file" in done else f"{skipped['file']} "
            click.echo(f"  {where}line {skipped['line']}: {skipped['reason']}")
        if not done["files"]:
            click.echo("no guidance files found (CLAUDE.md, AGENTS.md, .cursor/rules, .claude/rules, "
                       ".github/instructions, ...)")
        if done["queued"] and not done.get("dry_run"):
            click.echo("review them with `cairn review list` or /cairn:review-memory")

    _emit(as_json, done, human)
