"""The hook process: `cairn hook EVENT` (hooks/cairn-hook runs `python -P -m cairn hook EVENT`).

Fail open, fast, bounded: exit 0 always, print valid JSON or nothing, never block the prompt.
1. Ask the warm process (one per user, holding the embedding model) to handle the event with
   hybrid recall. It answers in tens of milliseconds.
2. If it is not there or not ready, start it in the background and answer keyword-only here
   (claude.handle, imported only then).
This module imports only the standard library and the warm client until step 2: the hook's budget
is milliseconds, and sentence-transformers is never imported here.
"""

from __future__ import annotations

import json
import os
import sys
import time

WARM_TIMEOUT_S = {"SessionStart": 2.0, "UserPromptSubmit": 1.0}


def run(event: str, payload: dict) -> dict | None:
    """Through the warm process if it answers in time, else keyword-only in this process."""
    from . import warm

    env = {k: os.environ[k] for k in warm.HOOK_ENV_KEYS if k in os.environ}
    reply = warm.request({"op": "hook", "event": event, "payload": payload, "env": env},
                         timeout=WARM_TIMEOUT_S.get(event, 1.0))
    if reply is not None:
        return reply.get("output")
    if os.environ.get("CAIRN_NO_WARM") != "1":
        warm.spawn()
    from .claude import handle

    return handle(event, payload, env, embedder=None)


def pause(args: list[str]) -> None:
    """`cairn hook pause SESSION_ID [on|off]`: the per-session pause behind /cairn:pause."""
    session_id, state = (args + ["", "on"])[:2]
    if not session_id:
        sys.stderr.write("cairn: pause needs the session id\n")
        return
    from .claude import set_paused

    set_paused(session_id, state != "off")
    print(f"Cairn memory injection is {'paused' if state != 'off' else 'back on'} for this session.")


def hook_main(argv: list[str]) -> None:
    """`cairn hook EVENT` (stdin: the hook's JSON). Exits 0 whatever happens."""
    started = time.monotonic()
    event = argv[0] if argv else ""
    try:
        if event == "pause":
            pause(argv[1:])
        else:
            raw = sys.stdin.buffer.read().decode("utf-8", "replace")
            payload = json.loads(raw) if raw.strip() else {}
            output = run(event, payload if isinstance(payload, dict) else {})
            if output:
                sys.stdout.write(json.dumps(output) + "\n")
    except BaseException as exc:  # noqa: BLE001 - the contract is to fail open, whatever happened
        _log_failure(event, exc)
    finally:
        if os.environ.get("CAIRN_HOOK_TIMING"):
            sys.stderr.write(f"cairn hook {event}: {1000 * (time.monotonic() - started):.1f} ms\n")
    sys.stdout.flush()
    sys.exit(0)


def _log_failure(event: str, exc: BaseException) -> None:
    try:
        import logging

        from cairn import data_root, private_dir, private_file

        logs = private_dir(data_root() / "logs")
        logging.basicConfig(filename=str(private_file(logs / "hooks.log")), level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(message)s")
        logging.getLogger("cairn.hook").error("%s hook failed open", event, exc_info=exc)
    except BaseException:  # noqa: BLE001 - nowhere to log; still never break the prompt
        pass
