"""The `cairn` command line: a thin layer over the engine API.

A command that reads or writes one store's memories takes --store NAME (else $CAIRN_STORE, else the
project of the working directory) and --create; every command but hook, serve and config takes --json
(stable keys, docs/cli.md). Errors: one line on stderr, exit code 2. Defaults (k, scope, limit)
come from the config, never from here; options that an MCP tool or HTTP route also takes are
derived from the catalogue of operations (cairn.operations), so their limits are the same.

One module per group of commands: memories (remember, recall, list ...), stores (status, export,
stores, backup ...), review (review, maintain, import-guidance), sessions, serve (serve, token,
config, hook); _common holds what they share. This module imports them and runs `main`.
"""

import inspect
import re
import sys

import click

import cairn

# The command groups, imported in the order their commands are listed in docs/cli.md.
# isort: off
from . import memories, stores, review, sessions, serve  # noqa: F401 - registers their commands
# isort: on
from ._common import _TIMINGS, LOADING_NOTICE, _count, _since_process_start, _undecodable_argument, cli  # noqa: F401

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
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `cairn` (or a group): its help, as --help gives it
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        sys.exit(0)
    except click.ClickException as exc:
        # One line, like every other error; usage errors point at the command's --help.
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        message = " ".join(exc.format_message().split())  # click lists a choice's values one per line
        click.echo(f"cairn: error: {message}{hint}", err=True)
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
