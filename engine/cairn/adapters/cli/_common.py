"""What every command shares: the `cli` group, --store/--create/--json and the engine they open
(store_options), options derived from the catalogue of operations (option), output (_emit), time
parsing, stdin, progress bars and the warm-process embedder.

The CLI's composition root (every command, `cairn serve` included): `environ()` is its one read of
the process environment, passed down to resolve, the warm client and the servers it starts."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

import cairn
from cairn import Embedder
from cairn import operations as ops

from ..warm import client as warm
from ..warm.embedders import GatedEmbedder, session_embedder

LOADING_NOTICE = "cairn: loading the embedding model (first call after a while)…"
# Where the call spent its time (`status --timings`): name -> seconds, in the order measured.
_TIMINGS: dict[str, float] = {}
# Commands the warm process answers when it is up (service.WarmServer.cli, warm.CLI_OPS): how each
# shows the answer (filled by the module that defines the command).
_WARM_VIEWS: dict[str, Callable[[bool, Any], None]] = {}


def environ() -> Mapping[str, str]:
    """This process's environment (CAIRN_STORE, CAIRN_CONFIG, CAIRN_NO_WARM, the hook variables ...):
    the CLI's one read of it, read at each call (a test sets a variable between two commands)."""
    return os.environ


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
    if environ().get("CAIRN_NO_WARM") == "1":
        inner = cairn.embedder_from_config(config, short_lived=True)
    else:
        inner = session_embedder(config, short_lived=True, environ=environ(),
                                 on_fallback=lambda reason: click.echo(f"cairn: {reason}", err=True))
    if inner is None:
        return None
    told = False

    def notice() -> None:
        # Said once, on a terminal, when the warm process is not up yet: the first embed then waits
        # for it, or loads the model in-process.
        nonlocal told
        if not told and sys.stderr.isatty() and not warm.socket_path(environ()).exists():
            click.echo(LOADING_NOTICE, err=True)
        told = True

    return GatedEmbedder(inner, notice)


def _count(n: int, one: str, many: str | None = None) -> str:
    """"1 time", "2 times": the number and the word in the right number."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def _emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human()


def _progress(items: Iterable[Any], total: int) -> Iterable[Any]:
    """`items` with a progress bar on stderr when it is a terminal (a stores.Progress)."""
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
        env = environ()
        if fn.__name__ in warm.CLI_OPS and not kwargs.get("keyword_only") and env.get("CAIRN_NO_WARM") != "1":
            # The warm process is up: it has the store open and the model loaded, so it answers in
            # milliseconds; this process then imports neither the engine nor SQLite.
            reply = warm.request({"op": "cli", "command": fn.__name__, "store": store_name, "cwd": os.getcwd(),
                                  "env": {k: env[k] for k in warm.HOOK_ENV_KEYS if k in env},
                                  "options": kwargs}, timeout=60, environ=env)
            if reply is not None:
                if reply.get("error"):
                    raise cairn.CairnError(reply["error"])
                return _WARM_VIEWS[fn.__name__](as_json, reply["result"])
        started = time.perf_counter()
        resolved = cairn.resolve(store_name, env=env)
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
        # A dry run writes nothing, so it creates no store either.
        with cairn.Cairn.open(resolved=resolved, create=create, embedder=embedder,
                              read_only=read_only or only_global or bool(kwargs.get("dry_run")),
                              check_model=check_model) as memory:
            _TIMINGS["store open"] = time.perf_counter() - started
            fn(memory, as_json=as_json, **kwargs)

    return wrapper


def _split_tags(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """--tag/--tags values, each comma-separated, as one tuple: split once, before the command runs,
    so a recall answered by the warm process gets the same tags as one answered here."""
    return tuple(t for v in values for t in v.split(",") if t.strip())


class TextParam(click.ParamType):
    """A string no longer than the catalogue allows (characters). Not its lower bound: the engine
    refuses an empty text or query itself, whitespace counted as empty, and says so."""

    name = "TEXT"

    def __init__(self, high: int):
        self.high = high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if len(value) > self.high:
            self.fail(f"{len(value)} characters; at most {self.high}", param, ctx)
        return value


def _click_type(arg: ops.Arg) -> click.ParamType | None:
    """The click type that holds `arg` to the catalogue's choices and bounds (None for a flag)."""
    if arg.type == "bool":
        return None
    if arg.choices:
        return click.Choice(arg.choices)
    if arg.type == "int":
        return click.IntRange(arg.low, arg.high)
    if arg.type == "time":
        return TIME
    return TextParam(arg.high) if arg.high is not None else click.STRING


def _listed(arg: ops.Arg, commas: bool) -> Callable[[click.Context, click.Parameter, tuple[str, ...]],
                                                      tuple[str, ...]]:
    """A callback for a repeatable option: split at commas (tags), then held to the catalogue's
    number of items."""

    def split(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
        out = _split_tags(ctx, param, values) if commas else values
        if arg.items is not None and len(out) > arg.items:
            raise click.BadParameter(f"{len(out)} values; at most {arg.items}", ctx, param)
        return out

    return split


def option(arg: ops.Arg, *decls: str, commas: bool = False, **changes: Any
           ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A click option for one argument of the catalogue (cairn.operations): its type, bounds,
    choices, default and help come from there, so the CLI holds the limits MCP and HTTP hold.

    decls: the flags (default --name-with-dashes); the value goes to the parameter called arg.name.
    A list argument repeats (--kind a --kind b); with commas, each value is also split at commas
    (--tags deploy,ci). changes: what
    this command says differently, e.g. remember's --kind, whose default with --replaces is the
    replaced memory's."""
    kwargs: dict[str, Any] = {"help": arg.help}
    click_type = _click_type(arg)
    if click_type is None:
        kwargs["is_flag"] = True
    else:
        kwargs["type"] = click_type
    if arg.many:
        kwargs["multiple"] = True
        if not arg.choices:
            kwargs["callback"] = _listed(arg, commas)
    elif arg.default is not None and arg.type != "bool":
        kwargs.update(default=arg.default, show_default=True)
    kwargs.update(changes)
    return click.option(*(decls or (f"--{arg.name.replace('_', '-')}",)), arg.name, **kwargs)


def argument(arg: ops.Arg, **changes: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A click argument (positional) for one argument of the catalogue, held to its bounds."""
    kwargs: dict[str, Any] = {"type": _click_type(arg)}
    kwargs.update(changes)
    return click.argument(arg.name, **kwargs)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cairn-memory")
@click.option("-v", "--verbose", is_flag=True, help="Log to stderr.")
def cli(verbose: bool) -> None:
    """Cairn: local-first, long-term memory for Claude Code.

    Wherever a command takes a memory's ID, its first 6 or more characters will do (any case).
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="cairn: %(levelname)s: %(message)s")
