"""The hook process: `cairn hook EVENT` (hooks/cairn-hook runs `hook_main` through `python -P -c`,
which spares the hook runpy's imports; `python -m cairn hook EVENT` is the same).

Fail open, fast, bounded: exit 0 always, print valid JSON or nothing, never block the prompt.
1. Ask the warm process (one per user, holding the embedding model) to handle the event with
   hybrid recall. It answers in tens of milliseconds.
2. If it is not there or not ready, start it in the background and answer keyword-only here
   (claude.hooks.handle, imported only then).
Until step 2 this module imports only os, sys, time and the warm client (which adds the C halves of
socket and json): the hook's budget is milliseconds, so the hook's stdin is forwarded undecoded and
the warm process's reply carries the hook's output ready to print. sentence-transformers is never
imported here. tests/test_architecture.py holds the warm path to that list of modules.

This is the hook process's composition root: it reads its environment once (`process_environ`, in
hook_main) and passes it down: the hook's variables (warm.HOOK_ENV_KEYS) to the warm process or to
claude.hooks.handle, its own switches (CAIRN_NO_WARM, CAIRN_HOOK_NO_FORK, CAIRN_HOOK_TIMING) read here.
"""

import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the warm path
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..warm.embedders import WarmEmbedder

WARM_TIMEOUT_S = {"SessionStart": 2.0, "SessionStart:rest": 2.0, "UserPromptSubmit": 1.0, "SubagentStart": 1.0}
# Tool time runs on every tool call: only the warm process answers it. When it is not up, the hook
# starts it and answers nothing at once (it never holds the tool call for an in-process engine).
TOOL_TIMEOUT_S = {"PreToolUse": 0.5, "PostToolUse": 0.5}
CAPTURE_EVENTS = ("Stop", "PreCompact")  # as claude.hooks.CAPTURE_EVENTS (not imported: the warm path stays light)
SESSION_END = "SessionEnd"  # the session's unresolved writes go to the review queue (claude.capture.settle_session)
# Every event `cairn hook` answers; any other is a typo in a hooks configuration, logged
# (UNKNOWN_EVENT) so that `cairn doctor` can report it.
KNOWN_EVENTS = (*WARM_TIMEOUT_S, *TOOL_TIMEOUT_S, *CAPTURE_EVENTS, SESSION_END, "capture-now")
DETACHED_EVENTS = (*CAPTURE_EVENTS, SESSION_END)  # answered at once; the work goes on in a forked child
UNKNOWN_EVENT = "unknown hook event"
CAPTURE_HANDOFF_S = 0.25  # how long a capture hook waits for the warm process to take the job


def process_environ() -> "Mapping[str, str]":
    """This process's environment: the hook process's one read of it (hook_main, and run_raw when a
    caller gives none)."""
    return os.environ


def hook_env(environ: "Mapping[str, str]") -> dict:
    """The hook's variables the warm process and claude.hooks.handle read (warm.HOOK_ENV_KEYS)."""
    from ..warm.client import HOOK_ENV_KEYS

    return {k: environ[k] for k in HOOK_ENV_KEYS if k in environ}


def capture(event: str, payload: dict, environ: "Mapping[str, str]", *, detached: bool = False) -> None:
    """Stop / PreCompact: hand the capture of the transcript's new part to the warm process (which
    queues it and answers at once), else to a detached `cairn hook capture-now` process; return
    without waiting either way. A Stop with `stop_hook_active` (Claude continuing because a Stop
    hook asked it to) captures nothing: the next Stop resumes from the same offset, so nothing is lost.
    detached: this is already the hook's forked child (hook_main), which then captures by itself
    rather than start yet another process. environ: this process's environment."""
    from ..warm import client as warm

    if payload.get("stop_hook_active") or not payload.get("transcript_path") or not payload.get("session_id"):
        return None
    if environ.get("CAIRN_NO_WARM") != "1":
        reply = warm.request({"op": "capture", "event": event, "payload": payload, "env": hook_env(environ)},
                             timeout=CAPTURE_HANDOFF_S, environ=environ)
        if reply is not None:
            return None
        warm.spawn(environ=environ)
    if detached:
        capture_now(payload, environ)
    else:
        spawn_capture(payload, environ)
    return None


def spawn_capture(payload: dict, environ: "Mapping[str, str]") -> None:
    """Run the capture in a detached process (its own session: it outlives the hook and Claude Code's
    teardown), the payload on its stdin."""
    import json
    import subprocess

    from cairn import data_root

    logs = data_root(environ) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "capture.log", "ab") as log:
        child = subprocess.Popen([sys.executable, "-P", "-m", "cairn", "hook", "capture-now"], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, close_fds=True,
                                 env=dict(environ))
    assert child.stdin is not None  # stdin=PIPE
    child.stdin.write(json.dumps(payload).encode())
    child.stdin.close()


def capture_now(payload: dict, environ: "Mapping[str, str]") -> None:
    """The detached capture process: ingest with the warm process's model when it can serve one
    (started if need be), else keyword-only (the turns are embedded later, by the warm process)."""
    from .capture import capture as capture_transcript

    def embedder_for(config: dict) -> "WarmEmbedder | None":
        if environ.get("CAIRN_NO_WARM") == "1":
            return None
        from ..warm.embedders import session_embedder

        return session_embedder(config, environ=environ)

    capture_transcript(payload, dict(environ), embedder_for=embedder_for)


def with_site_packages() -> None:
    """hooks/cairn-hook starts Python with -S: without site, the interpreter starts in ~15 ms
    rather than ~21 (a third of a warm hook's start), and the warm path needs only the standard
    library and this package (on PYTHONPATH). Every other path imports the runtime's packages
    (SQLite, numpy ...): it calls this first, which adds site-packages as a normal start would."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


def run(event: str, payload: dict, environ: "Mapping[str, str] | None" = None, *, warm_asked: bool = False,
        detached: bool = False) -> dict | None:
    """Through the warm process if it answers in time, else keyword-only in this process.
    environ: this process's environment (default: process_environ()). warm_asked: the warm process
    was already asked (run_raw) and did not answer. detached: this is the forked child of a capture
    hook (see capture)."""
    environ = process_environ() if environ is None else environ
    with_site_packages()
    from ..warm import client as warm

    if event in CAPTURE_EVENTS:
        capture(event, payload, environ, detached=detached)
        return None
    if event == "capture-now":
        capture_now(payload, environ)
        return None
    if event not in KNOWN_EVENTS:
        import logging

        _log_to_file(environ=environ)
        logging.getLogger("cairn.hook").warning(
            "%s %r: Cairn answers %s; nothing was done (check the hooks configuration)", UNKNOWN_EVENT, event,
            ", ".join(e for e in KNOWN_EVENTS if e != "capture-now"))
        return None
    if event == SESSION_END:
        _log_to_file(environ=environ)
        from .capture import settle_session

        settle_session(payload, dict(environ))
        return None
    env = hook_env(environ)
    if not warm_asked:
        reply = warm.request({"op": "hook", "event": event, "payload": payload, "env": env},
                             timeout=WARM_TIMEOUT_S.get(event) or TOOL_TIMEOUT_S[event], environ=environ)
        if reply is not None:
            return reply.get("output")
    if environ.get("CAIRN_NO_WARM") != "1":
        warm.spawn(environ=environ)
    _log_to_file(environ=environ)  # what the engine logs here goes to hooks.log, never to the hook's stderr
    from .hooks import InProcessRuntime, handle

    # keyword-only: the hook process loads no model
    return handle(event, payload, env, InProcessRuntime(environ=environ))


def run_raw(event: str, raw: str, environ: "Mapping[str, str] | None" = None, *,
            detached: bool = False) -> str | None:
    """The hook's stdout line for `event` with stdin `raw`, or None to print nothing. The warm path
    (SessionStart, UserPromptSubmit with a warm process up) decodes and encodes no JSON here.
    environ: this process's environment (default: process_environ())."""
    environ = process_environ() if environ is None else environ
    asked = False
    timeout = WARM_TIMEOUT_S.get(event) or TOOL_TIMEOUT_S.get(event)
    if timeout and raw.strip().startswith("{"):
        from ..warm import client as warm

        reply = warm.hook_request(event, raw, hook_env(environ), timeout=timeout, environ=environ)
        if reply is not None:
            return reply.get("stdout") or None
        asked = True
        if event in TOOL_TIMEOUT_S and environ.get("CAIRN_NO_WARM") != "1":
            with_site_packages()
            warm.spawn(environ=environ)
            return None
    import json

    payload = json.loads(raw) if raw.strip() else {}
    output = run(event, payload if isinstance(payload, dict) else {}, environ, warm_asked=asked, detached=detached)
    return json.dumps(output) if output else None


def pause(args: list[str]) -> None:
    """`cairn hook pause SESSION_ID [on|off]`: the per-session pause behind /cairn:pause."""
    session_id, state = (args + ["", "on"])[:2]
    if not session_id:
        sys.stderr.write("cairn: pause needs the session id\n")
        return
    with_site_packages()
    from .session_state import set_paused

    set_paused(session_id, state != "off", process_environ())
    print(f"Cairn memory injection is {'paused' if state != 'off' else 'back on'} for this session.")


def detach() -> bool:
    """Fork so that Claude Code is answered at once: True in the parent (which should exit now),
    False in the child, which goes on in a session of its own with stdin, stdout and stderr on
    /dev/null (Claude Code waits for the hook's pipes to close, not just for its exit). Where there
    is no fork (Windows) or it fails, False without forking: this process does the work itself."""
    if not hasattr(os, "fork"):
        return False
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid:
        return True
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    return False


def hook_main(argv: list[str], *, hook_process: bool = False) -> None:
    """`cairn hook EVENT` (stdin: the hook's JSON). Exits 0 whatever happens.

    hook_process: this process exists only to run the hook (the launchers say so). Then Stop and
    PreCompact only hand the capture off, and even the handoff (reaching the warm process, or
    capturing) is done by a forked child while this process exits, as is SessionEnd's work: the
    hook costs Claude Code one interpreter start and the read of its stdin; and the process ends
    with os._exit once its output is flushed. Never pass it otherwise: the parent of the fork
    exits, and in a caller's process (a test) that would end the caller."""
    started = time.monotonic()
    environ = process_environ()
    event = argv[0] if argv else ""
    child = False
    try:
        if event == "pause":
            pause(argv[1:])
        else:
            raw = sys.stdin.buffer.read()
            # Forked before even the JSON is parsed: the parent imports nothing more. The child
            # decides whether there is anything to capture (capture() checks the payload).
            if (hook_process and event in DETACHED_EVENTS and raw.strip()
                    and environ.get("CAIRN_HOOK_NO_FORK") != "1"):
                if detach():
                    _timing(event, started, environ)
                    os._exit(0)
                child = True
            line = run_raw(event, raw.decode("utf-8", "replace"), environ, detached=child)
            if line:
                sys.stdout.write(line + "\n")
    except BaseException as exc:  # noqa: BLE001 - the contract is to fail open, whatever happened
        _log_failure(event, exc, environ)
    if child:
        os._exit(0)  # the forked handoff: nothing of the parent's to clean up or flush
    _timing(event, started, environ)
    sys.stdout.flush()
    if hook_process:
        # This process exists only for the hook: its output is flushed (and what it logged: a
        # logging handler flushes each record), so it skips the interpreter's teardown (freeing
        # every module), about a millisecond of each hook.
        sys.stderr.flush()
        os._exit(0)
    sys.exit(0)


def _timing(event: str, started: float, environ: "Mapping[str, str]") -> None:
    if environ.get("CAIRN_HOOK_TIMING"):
        sys.stderr.write(f"cairn hook {event}: {1000 * (time.monotonic() - started):.1f} ms\n")
        sys.stderr.flush()


def _log_to_file(*, force: bool = False, environ: "Mapping[str, str] | None" = None) -> None:
    """Send this process's logging to <data root>/logs/hooks.log (once; a no-op when configured,
    unless force: `cairn hook` replaces the CLI's stderr logging, so a hook run by hand logs where
    the plugin's does). environ: whose data root (default: cairn.environment.process_env())."""
    import logging

    from cairn import data_root, private_dir, private_file

    logs = private_dir(data_root(environ) / "logs", environ)
    logging.basicConfig(filename=str(private_file(logs / "hooks.log")), level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", force=force)


def _log_failure(event: str, exc: BaseException, environ: "Mapping[str, str]") -> None:
    try:
        import logging

        from cairn import CairnError

        _log_to_file(environ=environ)
        if isinstance(exc, CairnError):  # its message says what and what to do: one line, no traceback
            logging.getLogger("cairn.hook").error("%s hook failed open: %s", event, exc)
        elif isinstance(exc, ValueError) and type(exc).__name__ == "JSONDecodeError":
            # Claude Code sends JSON; anything else is a caller's mistake, not a bug in Cairn.
            logging.getLogger("cairn.hook").error("%s hook failed open: its input is not JSON (%s)", event, exc)
        else:
            logging.getLogger("cairn.hook").error("%s hook failed open", event, exc_info=exc)
    except BaseException:  # noqa: BLE001 - nowhere to log; still never break the prompt
        pass
